"""A layer's parts and what it asks of them, outside the tile loops: one loop per question, each asking every
part's Term (`select.term_for`), shared by the NNX layer (`relpos_jax.nn.attention`), its Linen twin
(`relpos_jax.nn.linen`), the models and `functional.attend`, so all compute exactly the same thing.

  attention_parts / input_parts   the leaves acting inside attention / at the model's input (stage INPUT)
  input_embedding                 x + p_i: the absolute parts' embeddings (`Term.embed`)
  bind                            the params attend reads at the call's positions (`Term.bind`: a grid part's
                                  coordinates or features of x)
  rotate                          q and k rotated at their positions by the rotary parts (`Term.rotate`)
  scalar_bias                     the summed scalar bias (H or B, H, Lq, Lk) for dot_product_attention
                                  (`Term.whole_bias`), and its debug checks (`check_realised`)
  query_biases                    Transformer-XL's content bias u (`Term.query_bias`)
  token_features / feature_sizes  the contextual parts' per-token features (`Term.token_features`)
  remap_scores                    a position remap over the whole matrix (`remap.remap_merge`)

Positions. Either contiguous (`q_positions is None`: queries at q_offset .. q_offset + Lq - 1, keys at
0 .. Lk - 1, the layout of a full forward and of cached decoding), or explicit int arrays (B, Lq) and
(B, Lk) (randomized positions, or an offset p .. p + L - 1). Relative position = key - query, always. A grid's
tokens (`where.Grid`, `where.Coordinates`) are read by the grid parts' Terms (`select.term_for(..., where=)`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.nn.terms import base, remap, select
from relpos_jax.nn.terms.where import Positions


def attention_parts(encoder: contract.Encoder) -> tuple[contract.Encoder, ...]:
  """The parts that act inside attention: scalar biases, vector-relative tables, rotations, content kinds."""
  return tuple(p for p in contract.leaves(encoder) if select.term_for(p).stage is not base.Stage.INPUT)


def input_parts(encoder: contract.Encoder) -> tuple[contract.Encoder, ...]:
  """The absolute parts: the model adds their embedding to its input (x + p_i)."""
  return tuple(p for p in contract.leaves(encoder) if select.term_for(p).stage is base.Stage.INPUT)


def rotates(parts) -> bool:
  """Whether a part rotates q and k before attention."""
  return any(select.term_for(p).stage is base.Stage.ROTATE for p in parts)


def reads_content(parts) -> bool:
  """Whether a part reads the scores or the content (then `attend` checks its token features)."""
  return any(select.term_for(p).reads_content for p in parts)


def init_params(parts, rng: jax.Array, *, num_heads: int, head_dim: int, model_dim: int) -> list:
  """One params pytree per part (each part sees every size: some need head_dim, others model_dim)."""
  rngs = jax.random.split(rng, max(len(parts), 1))
  return [part.init(r, num_heads, head_dim=head_dim, model_dim=model_dim) for part, r in zip(parts, rngs)]


def check_params(parts, params, num_heads: int | None = None) -> None:
  """One params pytree per part, each what that part's `init` returns (for `num_heads` heads, if given)."""
  validation.require(
      len(params) == len(parts),
      'position_params',
      'len(position_params)',
      len(params),
      f'one params pytree per attention part ({[p.name or type(p).__name__ for p in parts]})',
  )
  for part, p in zip(parts, params):
    contract.check_params(part, p, num_heads)


def check_causal(who: str, encoder: contract.Encoder, causal: bool) -> None:
  """Refuses a causal-only part (xPos) in a bidirectional layer or model."""
  causal_only = [p.name or type(p).__name__ for p in contract.leaves(encoder) if p.requires_causal]
  validation.require(
      causal or not causal_only,
      who,
      'encoder',
      encoder,
      f'an encoder without a causal-only part when causal=False; {causal_only} is causal-only '
      f'(requires_causal: keys ahead of the query would be scaled without bound): use '
      f'causal=True (a DecoderLM) or another encoder',
  )


def contiguous_positions(batch: int, length: int, offset=0) -> jax.Array:
  """Int32 (batch, length): offset .. offset + length - 1 in every row."""
  row = jnp.arange(length, dtype=jnp.int32) + jnp.asarray(offset, jnp.int32)
  return jnp.broadcast_to(row, (batch, length))


def input_embedding(parts, params, positions: jax.Array) -> jax.Array | None:
  """Sum of the absolute parts' embeddings at int positions (B, L) -> (B, L, model_dim) float32, or None."""
  total = None
  for part, p in zip(parts, params):
    emb = select.term_for(part).embed(part, p, positions)
    if emb is not None:
      total = emb if total is None else total + emb
  return total


def scalar_bias(
    parts, params, q_len: int, k_len: int, *, q_offset=0, q_positions=None, k_positions=None, where=None
) -> jax.Array | None:
  """The summed scalar bias of `parts`, float32; None when no part is a scalar bias (`Term.whole_bias`).

  Contiguous positions: (H, q_len, k_len) via `relpos_jax.bias_matrix` (Toeplitz from q_len + k_len - 1
  values, or the encoder's own pair_bias path when it is not Toeplitz). Explicit positions:
  (B, H, q_len, k_len) via `relpos_jax.bias_at_positions`. `where` (a `where.Grid` or `Coordinates`, or
  `Positions` in place of the three keywords): a grid's bias, (H, N, N) on a Grid, (B, H, N, N) at coordinates.
  """
  where = Positions(q_offset, q_positions, k_positions) if where is None else where
  total = None
  for part, p in zip(parts, params):
    term = select.term_for(part, where=where)
    if not term.scalar_bias:
      continue
    b = jnp.asarray(term.whole_bias(part, p, q_len, k_len, where), jnp.float32)
    total = b if total is None else total + b
  return total


def check_realised(parts, params, where) -> None:
  """debug_checks: each scalar part's own check of the bias it realises (`Term.check_realised`)."""
  for part, p in zip(parts, params):
    select.term_for(part, where=where).check_realised(part, p, where)


def bind(parts, params, where, x: jax.Array) -> list:
  """Per part, the params attend reads when the layer input x (B, L, model_dim) sits at `where` (`Term.bind`)."""
  return [select.term_for(part, where=where).bind(part, p, where, x) for part, p in zip(parts, params)]


def toeplitz_parts(parts) -> bool:
  """Whether every scalar-bias part claims to be Toeplitz (so its realised bias must be)."""
  return all(t.toeplitz for t in map(select.term_for, parts) if t.scalar_bias)


def rotate(
    parts, params, query: jax.Array, key: jax.Array, q_positions: jax.Array, k_positions: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """q (B, Lq, H, D) and k (B, Lk, H, D) rotated at int positions (B, Lq), (B, Lk) by the rotary parts.

  The rotation is computed in float32 (the encoders' contract) and cast back to the inputs' dtype, so a
  bfloat16 model keeps bfloat16 matmuls but exact angles.
  """
  for part, p in zip(parts, params):
    query, key = select.term_for(part).rotate(part, p, query, key, q_positions, k_positions)
  return query, key


def query_biases(parts, params):
  """Summed Transformer-XL content bias u over the vector parts: (H, D) float32 or None."""
  total = None
  for part, p in zip(parts, params):
    u = select.term_for(part).query_bias(part, p)
    if u is not None:
      u = jnp.asarray(u, jnp.float32)
      total = u if total is None else total + u
  return total


def remap_scores(
    part,
    params,
    query: jax.Array,
    key: jax.Array,
    q_positions: jax.Array,
    k_positions: jax.Array,
    scores: jax.Array | None = None,
):
  """A remap's contribution over the whole matrix: `remap.remap_merge` of `remap.remap_rotations` (for a rotary
  base). Positions (B, Lq), (B, Lk)."""
  rotations = None
  if select.term_for(part).rotary:
    rotations = remap.remap_rotations(part, params, query, key, q_positions, k_positions)
  return remap.remap_merge(part, params, rotations, query, key, q_positions, k_positions, scores)


def feature_sizes(parts, dims_: contract.Dims) -> tuple[int, ...]:
  """Per part, the size of the per-token features it keeps in the KV cache (0: none)."""
  return tuple(select.term_for(p).num_features(p, dims_) for p in parts)


def token_features(parts, params, x: jax.Array) -> list:
  """Per part, its token features of the layer input x (B, L, model_dim): (B, L, F) float32 or None."""
  out = []
  for part, p in zip(parts, params):
    f = select.term_for(part).token_features(part, p, x)
    out.append(None if f is None else jnp.asarray(f, jnp.float32))
  return out
