"""The position terms of attention, one pure function per encoder kind.

Shared by the NNX layer (`relpos_jax.nn.attention`) and its Linen twin (`relpos_jax.nn.linen`), so both
compute exactly the same thing. Everything dispatches on `encoder.kind`, never on a name:

  SCALAR_BIAS      `scalar_bias`: b_h(i, j) added to the scaled scores, (H, Lq, Lk) from the Toeplitz
                   expansion of the Lq + Lk - 1 distinct relative positions, or (B, H, Lq, Lk) for explicit
                   positions.
  VECTOR_RELATIVE  `vector_scores` / `vector_values`: q_i . a^K_{j-i} (Shaw) or (q_i + v) . W_R R_{j-i}
                   (Transformer-XL) in the scores, sum_j w_ij a^V_{j-i} in the outputs. Never builds an
                   (Lq, Lk, head_dim) tensor: the queries are projected once against the table rows that
                   can occur (`RelativeTable`) and the scores gathered per distance; the attention weights
                   are aggregated per row before meeting a^V.
  ROTARY           `rotate`: q and k rotated at their positions.
  ABSOLUTE         `input_embedding`: x + p_i, added by the model at its input, not in the layer.
  COMBINED         `flatten`: the parts, each contributing its own kind's term; the terms add up.

Positions. Either contiguous (`q_positions is None`: queries at q_offset .. q_offset + Lq - 1, keys at
0 .. Lk - 1, the layout of a full forward and of cached decoding), or explicit int arrays (B, Lq) and
(B, Lk) (randomized positions, or an offset p .. p + L - 1). Relative position = key - query, always.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import positions as positions_lib
from relpos_jax.encoders import base

Kind = base.Kind


# ----------------------------------------------------------------------------------------------------------
# Parts: which encoders act where.


def flatten(encoder: base.Encoder) -> tuple[base.Encoder, ...]:
  """The leaf encoders of a (possibly combined) encoder, in order."""
  if encoder.kind is Kind.COMBINED:
    return tuple(leaf for part in encoder.parts for leaf in flatten(part))
  return (encoder,)


def attention_parts(encoder: base.Encoder) -> tuple[base.Encoder, ...]:
  """The parts that act inside attention: scalar biases, vector-relative tables, rotations."""
  return tuple(p for p in flatten(encoder) if p.kind is not Kind.ABSOLUTE)


def input_parts(encoder: base.Encoder) -> tuple[base.Encoder, ...]:
  """The absolute parts: the model adds their embedding to its input (x + p_i)."""
  return tuple(p for p in flatten(encoder) if p.kind is Kind.ABSOLUTE)


def has_kind(parts, kind: Kind) -> bool:
  return any(p.kind is kind for p in parts)


def init_params(parts, rng: jax.Array, *, num_heads: int, head_dim: int, model_dim: int) -> list:
  """One params pytree per part (each part sees every size: some need head_dim, others model_dim)."""
  rngs = jax.random.split(rng, max(len(parts), 1))
  return [part.init(r, num_heads, head_dim=head_dim, model_dim=model_dim) for part, r in zip(parts, rngs)]


def check_params(parts, params) -> None:
  if params is None or len(params) != len(parts):
    got = 'None' if params is None else f'{len(params)} entries'
    raise ValueError(f'position params: expected one params pytree per attention part '
                     f'({[p.name or type(p).__name__ for p in parts]}), got {got}.')


def contiguous_positions(batch: int, length: int, offset=0) -> jax.Array:
  """Int32 (batch, length): offset .. offset + length - 1 in every row."""
  row = jnp.arange(length, dtype=jnp.int32) + jnp.asarray(offset, jnp.int32)
  return jnp.broadcast_to(row, (batch, length))


# ----------------------------------------------------------------------------------------------------------
# ABSOLUTE


def input_embedding(parts, params, positions: jax.Array) -> jax.Array | None:
  """Sum of the absolute parts' embeddings at int positions (B, L) -> (B, L, model_dim) float32, or None."""
  total = None
  for part, p in zip(parts, params):
    if part.kind is Kind.ABSOLUTE:
      emb = jnp.asarray(part.embed(p, positions), jnp.float32)
      total = emb if total is None else total + emb
  return total


# ----------------------------------------------------------------------------------------------------------
# SCALAR_BIAS


def scalar_bias(parts, params, q_len: int, k_len: int, *, q_offset=0, q_positions=None,
                k_positions=None) -> jax.Array | None:
  """The summed scalar bias of `parts`, float32; None when no part is a scalar bias.

  Contiguous positions: (H, q_len, k_len) via `relpos_jax.bias_matrix` (Toeplitz from q_len + k_len - 1
  values, or the encoder's own pair_bias path when it is not Toeplitz). Explicit positions:
  (B, H, q_len, k_len) via `relpos_jax.bias_at_positions`.
  """
  total = None
  for part, p in zip(parts, params):
    if part.kind is not Kind.SCALAR_BIAS:
      continue
    if q_positions is None:
      b = positions_lib.bias_matrix(part, p, q_len, k_len, q_offset)
    else:
      b = positions_lib.bias_at_positions(part, p, q_positions, k_positions)
    b = jnp.asarray(b, jnp.float32)
    total = b if total is None else total + b
  return total


def toeplitz_parts(parts) -> bool:
  """Whether every scalar-bias part claims to be Toeplitz (so its realised bias must be)."""
  return all(p.is_toeplitz for p in parts if p.kind is Kind.SCALAR_BIAS)


# ----------------------------------------------------------------------------------------------------------
# ROTARY


def rotate(parts, params, query: jax.Array, key: jax.Array, q_positions: jax.Array,
           k_positions: jax.Array) -> tuple[jax.Array, jax.Array]:
  """q (B, Lq, H, D) and k (B, Lk, H, D) rotated at int positions (B, Lq), (B, Lk) by the rotary parts.

  The rotation is computed in float32 (the encoders' contract) and cast back to the inputs' dtype, so a
  bfloat16 model keeps bfloat16 matmuls but exact angles.
  """
  for part, p in zip(parts, params):
    if part.kind is Kind.ROTARY:
      query = part.rotate_queries(p, query.astype(jnp.float32), q_positions).astype(query.dtype)
      key = part.rotate_keys(p, key.astype(jnp.float32), k_positions).astype(key.dtype)
  return query, key


# ----------------------------------------------------------------------------------------------------------
# VECTOR_RELATIVE


@dataclasses.dataclass(frozen=True)
class RelativeTable:
  """Which relative positions a vector-relative table is evaluated at, and how pairs (i, j) read it.

  mode:
    'distinct'  contiguous positions; rows = the Lq + Lk - 1 distinct relative positions (ascending), pair
                (i, j) reads row j - i + Lq - 1 (a fixed skew, whatever q_offset).
    'clipped'   a table clipped at distance k with 2k + 1 rows (rel -k .. k) when that is fewer than the
                distinct positions, or explicit positions; pair (i, j) reads row clip(rel_ij, -k, k) + k.
    'pairwise'  explicit positions and an unclipped table: the relative positions that occur are not known
                statically, so each pair is evaluated at its own rel (B, Lq, Lk). The one layout that builds
                (B, Lq, Lk, H, D); only reached with explicit positions and an unbounded table.
  """
  mode: str
  q_len: int
  k_len: int
  rows: jax.Array | None  # (R,) int32 relative positions, or None for 'pairwise'
  rel: jax.Array          # (Lq, Lk) or (B, Lq, Lk) int32: rel_ij = k_pos_j - q_pos_i
  q_offset: jax.Array | int = 0
  contiguous: bool = True
  clip: int | None = None

  @property
  def index(self) -> jax.Array:
    """Row read by each pair: (Lq, Lk) or (B, Lq, Lk) int32."""
    if self.mode == 'distinct':
      return (jnp.arange(self.k_len, dtype=jnp.int32)[None, :]
              - jnp.arange(self.q_len, dtype=jnp.int32)[:, None] + (self.q_len - 1))
    if self.mode == 'clipped':
      return jnp.clip(self.rel, -self.clip, self.clip) + self.clip
    raise ValueError(f'RelativeTable: mode {self.mode!r} has no row index.')


def relative_table(encoder: base.VectorRelativeEncoder, q_len: int, k_len: int, *, q_offset=0,
                   q_positions=None, k_positions=None) -> RelativeTable:
  """Chooses the rows to evaluate `encoder`'s table at (see `RelativeTable`)."""
  clip = encoder.clip_distance
  if q_positions is None:
    rel = positions_lib.relative_positions(q_len, k_len, q_offset)
    if clip is not None and 2 * clip + 1 < q_len + k_len - 1:
      rows = jnp.arange(-clip, clip + 1, dtype=jnp.int32)
      return RelativeTable('clipped', q_len, k_len, rows, rel, q_offset, True, clip)
    rows = positions_lib.distinct_relative_positions(q_len, k_len, q_offset)
    return RelativeTable('distinct', q_len, k_len, rows, rel, q_offset, True, clip)
  rel = (jnp.asarray(k_positions, jnp.int32)[..., None, :]
         - jnp.asarray(q_positions, jnp.int32)[..., :, None])
  if clip is not None:
    rows = jnp.arange(-clip, clip + 1, dtype=jnp.int32)
    return RelativeTable('clipped', q_len, k_len, rows, rel, 0, False, clip)
  return RelativeTable('pairwise', q_len, k_len, None, rel, 0, False, None)


def query_biases(parts, params):
  """Summed Transformer-XL content bias u over the vector parts: (H, D) float32 or None."""
  total = None
  for part, p in zip(parts, params):
    if part.kind is Kind.VECTOR_RELATIVE:
      u, _ = part.query_biases(p)
      if u is not None:
        u = jnp.asarray(u, jnp.float32)
        total = u if total is None else total + u
  return total


def _gather_rows(projected: jax.Array, table: RelativeTable) -> jax.Array:
  """projected (B, H, Lq, R) -> (B, H, Lq, Lk): entry (i, j) is projected[..., i, index_ij]."""
  index = table.index
  index = index[None, None] if index.ndim == 2 else index[:, None]
  index = jnp.broadcast_to(index, projected.shape[:2] + index.shape[2:])
  return jnp.take_along_axis(projected, index, axis=-1)


def vector_scores(encoder, params, query: jax.Array, table: RelativeTable) -> jax.Array:
  """Unscaled position scores (q_i + v) . a^K_{rel_ij}: query (B, Lq, H, D) -> (B, H, Lq, Lk) float32."""
  _, v = encoder.query_biases(params)
  q = query.astype(jnp.float32)
  if v is not None:
    q = q + jnp.asarray(v, jnp.float32)
  if table.mode == 'pairwise':
    emb = jnp.asarray(encoder.key_embeddings(params, table.rel), jnp.float32)  # (B, Lq, Lk, H, D)
    return jnp.einsum('bihd,bijhd->bhij', q, emb)
  rows = jnp.asarray(encoder.key_embeddings(params, table.rows), jnp.float32)  # (R, H, D)
  projected = jnp.einsum('bihd,rhd->bhir', q, rows)  # queries against each row, once
  return _gather_rows(projected, table)


def _take_masked(x: jax.Array, index: jax.Array) -> jax.Array:
  """x (B, H, Lq, Lk), index (Lq, N) of key positions -> (B, H, Lq, N), zero where index is outside."""
  k_len = x.shape[-1]
  valid = (index >= 0) & (index < k_len)
  gathered = jnp.take_along_axis(
      x, jnp.broadcast_to(jnp.clip(index, 0, k_len - 1), x.shape[:2] + index.shape), axis=-1)
  return jnp.where(valid, gathered, 0.0)


def aggregate_weights(weights: jax.Array, table: RelativeTable) -> jax.Array:
  """Attention weights (B, H, Lq, Lk) summed per table row: (B, H, Lq, R), A[i, r] = sum_{j: row(i,j)=r} w_ij.

  distinct: each row is met by at most one key per query, a skewed gather.
  clipped, contiguous: rows strictly inside the window (|rel| < k) are single keys (a gather); the two edge
  rows collect everything at rel <= -k and rel >= k, read off a forward and a reverse cumulative sum.
  clipped, explicit positions: a scatter-add of the weights into their rows.
  """
  b, h, q_len, k_len = weights.shape
  i = jnp.arange(q_len, dtype=jnp.int32)[:, None]
  if table.mode == 'distinct':
    r = jnp.arange(q_len + k_len - 1, dtype=jnp.int32)[None, :]
    return _take_masked(weights, r + i - (q_len - 1))  # row r holds key j = r + i - (Lq - 1)
  if table.mode != 'clipped':
    raise ValueError(f'aggregate_weights: mode {table.mode!r} has no row table.')
  k = table.clip
  num_rows = 2 * k + 1
  if not table.contiguous:
    index = jnp.broadcast_to(table.index[:, None], weights.shape)  # (B, H, Lq, Lk)
    bi, hi, qi = jnp.meshgrid(jnp.arange(b), jnp.arange(h), jnp.arange(q_len), indexing='ij')
    out = jnp.zeros((b, h, q_len, num_rows), weights.dtype)
    return out.at[bi[..., None], hi[..., None], qi[..., None], index].add(weights)
  if k == 0:
    return jnp.sum(weights, axis=-1, keepdims=True)
  # Key j sits at rel = j - i - q_offset from query i: rel = -k is key i + q_offset - k.
  centre = i + jnp.asarray(table.q_offset, jnp.int32)  # (Lq, 1) key index at rel 0
  forward = jnp.cumsum(weights, axis=-1)                      # sum_{j' <= j}
  backward = jnp.flip(jnp.cumsum(jnp.flip(weights, -1), axis=-1), -1)  # sum_{j' >= j}
  # Left edge: keys j <= centre - k, i.e. forward[centre - k] (clamped above; nothing when < 0).
  left_j = centre - k
  left = jnp.where(left_j >= 0, _take_masked(forward, jnp.minimum(left_j, k_len - 1)), 0.0)
  # Right edge: keys j >= centre + k, i.e. backward[centre + k] (clamped below; nothing when >= Lk).
  right_j = centre + k
  right = jnp.where(right_j < k_len, _take_masked(backward, jnp.maximum(right_j, 0)), 0.0)
  middle = _take_masked(weights, centre + jnp.arange(-k + 1, k, dtype=jnp.int32)[None, :])
  return jnp.concatenate([left, middle, right], axis=-1)


def vector_values(encoder, params, weights: jax.Array, table: RelativeTable) -> jax.Array | None:
  """The a^V output term sum_j w_ij a^V_{rel_ij}: weights (B, H, Lq, Lk) -> (B, Lq, H, D) float32, or None."""
  weights = weights.astype(jnp.float32)
  if table.mode == 'pairwise':
    emb = encoder.value_embeddings(params, table.rel)
    if emb is None:
      return None
    return jnp.einsum('bhij,bijhd->bihd', weights, jnp.asarray(emb, jnp.float32))
  rows = encoder.value_embeddings(params, table.rows)
  if rows is None:
    return None
  return jnp.einsum('bhir,rhd->bihd', aggregate_weights(weights, table), jnp.asarray(rows, jnp.float32))
