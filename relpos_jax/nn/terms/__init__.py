"""Terms: what each kind of attention part contributes to one tile of queries x keys, as a package.

One Term per kind (and form), asked by every path: the explicit path is the one-tile case
(`blockwise.explicit`), the blockwise kernel asks the same Terms tile by tile, and the Pallas kernel takes
those with a kernel form (`pallas_attention`: the Toeplitz bias, rotations). The modules:

  base      the contract: `Term` (its `Stage` and declared traits and methods), `Tile`, `Context`,
            `tile_at`, `tile_mask` (which pairs of a tile may attend: one function for every path)
  where     where a call's tokens sit: 1-D `Positions`, a `Grid`, `Coordinates` (re-exported by nn.call)
  select    which Term a part gets (`term_for`, `terms_for`): the only module of relpos_jax.nn that
            compares an encoder's kind, or a part's grid against the positions' type
  parts     a layer's parts and what it asks of them outside the tile loops (rotate, scalar_bias,
            input_embedding, token_features, ...), each by asking the parts' Terms
  scalar    scalar biases: Toeplitz (distinct values), per pair, a precomputed bias
  grid      the grid parts' Terms: rotations at coordinates, a bias by its table of distinct offsets
            (`GridTableBias`, its `prepare`) or per pair, iRPE's and PaPE's grid scores
  vector    vector relative embeddings (Shaw, Transformer-XL): rows once or a table per tile
  inputs    rotations of q and k, absolute input embeddings (outside the tile loops)
  remap     position remaps (Self-Extend, ReRoPE, Dual Chunk): the base's term per region
  rows      per-row and per-column terms: FoX's separable c_i - c_j, temperatures (SSMax, log-n)
  content   terms that read q . k along the keys: CoPE's counts, PaTH's replaced logit, DAPE's score
            transform, stick-breaking's normalizer, and the refusal of a part with no per-tile form
"""

from __future__ import annotations

from relpos_jax.nn.terms import base, content, grid, inputs, parts, remap, rows, scalar, select, vector, where
from relpos_jax.nn.terms.base import Stage, Term, Tile
from relpos_jax.nn.terms.grid import grid_offset_index
from relpos_jax.nn.terms.select import term_for, terms_for
