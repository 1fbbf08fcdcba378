"""Grid parts: a scalar bias given by its distinct offsets (`GridTable`, gathered per tile by `GridTableBias`:
memory O(P + tile) instead of (H, L, L)), and iRPE's contextual score term on a grid (`GridScores`).

The attention layer takes grid encoders (`is_grid`) on its grid path (`relpos_jax.nn.attention`): it rotates
q and k itself, adds a grid bias (or iRPE's contextual score term) as a precomputed `position_bias`, and
hands the other parts to `functional.attend`. A grid scalar bias, rotation or absolute part gets the 1-D Term of
its kind (`select.term_for`); iRPE's contextual score term gets `GridScores`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax.nn.terms import base


def grid_offset_index(q_index, k_index, shape, class_token: bool):
  """Int32 (..q, ..k): for flattened token indices of a grid in raster order (`shape` static, a class token at
  index 0 when `class_token`), the entry of the distinct-offset table that pair (i, j) reads: sum_a (r_ia - r_ja
  + n_a - 1) * stride_a, strides of the (2n - 1) per-axis offsets, last axis fastest (relpos_jax.grid.positions'
  `distinct_offsets` / `block_toeplitz_index` layout), and P = prod(2n - 1) (the class bucket, last) for a pair
  with the class token. Indices past the grid (tile padding) read a valid entry; their pairs are masked.

  Written here, not imported from relpos_jax.grid: the 1-D path never imports the grid package."""
  n_tokens = int(np.prod(shape))
  offset = int(class_token)
  q = jnp.clip(jnp.asarray(q_index, jnp.int32) - offset, 0, n_tokens - 1)
  k = jnp.clip(jnp.asarray(k_index, jnp.int32) - offset, 0, n_tokens - 1)
  index = jnp.zeros(jnp.broadcast_shapes(q[:, None].shape, k[None, :].shape), jnp.int32)
  stride, q_rest, k_rest = 1, q, k
  for n in shape[::-1]:  # last axis first: coordinate a of token t is (t // prod(later sides)) % n_a
    index = index + ((q_rest % n)[:, None] - (k_rest % n)[None, :] + (n - 1)) * stride
    q_rest, k_rest, stride = q_rest // n, k_rest // n, stride * (2 * n - 1)
  if class_token:
    cls = (jnp.asarray(q_index) == 0)[:, None] | (jnp.asarray(k_index) == 0)[None, :]
    index = jnp.where(cls, stride, index)  # stride is now P = prod(2n - 1)
  return index


@dataclasses.dataclass(frozen=True)
class GridTable:
  """A scalar grid bias given by its distinct values: `values` (H, P) float32 at the P = prod(2n - 1) offsets of
  the grid `shape` (+ one class-token column last with `class_token`), for the tokens of that grid in raster
  order. `functional.attend` takes it as `position_bias`: the blockwise path gathers each tile's block from it
  (`GridTableBias`, memory O(P + tile) instead of (H, L, L)); the untiled paths take `dense()`."""

  values: jax.Array
  shape: tuple
  class_token: bool = False

  @property
  def num_tokens(self) -> int:
    return int(np.prod(self.shape)) + int(self.class_token)

  def dense(self) -> jax.Array:
    """(H, N, N): every pair's bias (one gather, as relpos_jax.grid.positions.block_toeplitz)."""
    n = jnp.arange(self.num_tokens, dtype=jnp.int32)
    return jnp.take(self.values, grid_offset_index(n, n, self.shape, self.class_token), axis=-1)


@dataclasses.dataclass(frozen=True)
class GridTableBias(base.Term):
  """A grid bias from its distinct offsets (`GridTable`): the tile holds the whole (H, P) table (small: the 2-D
  analogue of the 1-D Toeplitz bias's Lq + Lk - 1 values) and gathers its (H, bq, bk) block at the offsets of its
  queries' and keys' flattened indices; its gradient is a scatter-add into the table (O(P) per tile)."""

  stage = base.Stage.BIAS

  shape: tuple
  class_token: bool = False

  def local(self, theta, tile):
    return theta

  def bias(self, part, local, tile):
    q_index = tile.qs + jnp.arange(tile.bq, dtype=jnp.int32)
    k_index = tile.ks + jnp.arange(tile.bk, dtype=jnp.int32)
    return jnp.take(local, grid_offset_index(q_index, k_index, self.shape, self.class_token), axis=-1)[None]


@dataclasses.dataclass(frozen=True)
class GridScores(base.Term):
  """A grid score term of the content (kind VECTOR_RELATIVE, `contextual_scores` of q, k and the layer input x
  at coordinates: iRPE's contextual mode, PaPE's parabolas): the layer's grid path adds it whole, as a
  precomputed bias; it never enters the tile loops."""

  stage = base.Stage.SCORES
  tiles = False
