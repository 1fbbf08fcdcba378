"""The vector-relative kernels: which rows of a relative table to evaluate, and how pairs read them.

A vector-relative encoder (Shaw's a^K / a^V, Transformer-XL's W_R R) is evaluated once per table row, never per
(i, j) pair: `relative_table` chooses the rows (the Lq + Lk - 1 distinct relative positions, the 2k + 1 rows of
a clipped table, or, for explicit positions and an unbounded table, every pair), `gather_rows` reads the
per-row query projections back per pair (Transformer-XL's relative shift, a pad and two reshapes, for the
distinct rows), and `aggregate_weights` sums attention weights per row for the a^V output term. The two are
linear and each other's transpose, and are differentiated as such (two custom VJPs).
The per-kind dispatch that calls them is `terms.vector.vector_scores` / `vector_values`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from relpos_jax import positions as positions_lib
from relpos_jax.encoders import contract


@dataclasses.dataclass(frozen=True)
class RelativeTable:
  """Which relative positions a vector-relative table is evaluated at, and how pairs (i, j) read it.

  mode:
    'distinct'  contiguous positions; rows = the Lq + Lk - 1 distinct relative positions (ascending), pair
                (i, j) reads row j - i + Lq - 1 (a fixed skew, whatever q_offset). With `causal` only the
                positions <= 0 (rows 0 .. Lq + q_offset - 1): pairs ahead of the query read zero, since the
                causal mask removes them anyway.
    'clipped'   a table clipped at distance k with 2k + 1 rows (rel -k .. k) when that is fewer than the
                distinct positions, or explicit positions; pair (i, j) reads row clip(rel_ij, -k, k) + k.
    'pairwise'  explicit positions and an unclipped table: the relative positions that occur are not known
                statically, so each pair is evaluated at its own rel (B, Lq, Lk). The one layout that builds
                (B, Lq, Lk, H, D); only reached with explicit positions and an unbounded table.
    'bucketed'  a table whose rows are buckets of something other than j - i (iRPE's buckets of grid offsets,
                relpos_jax.grid): `rows` the R bucket ids, `rel` holds the row each pair reads directly
                ((B, Lq, Lk) int32 in [0, R), `bucketed_table`); gathered per query, aggregated by a scatter-add.
  """

  mode: str
  q_len: int
  k_len: int
  rows: jax.Array | None  # (R,) int32 relative positions, or None for 'pairwise'
  rel: jax.Array  # (Lq, Lk) or (B, Lq, Lk) int32: rel_ij = k_pos_j - q_pos_i
  q_offset: jax.Array | int = 0
  contiguous: bool = True
  clip: int | None = None
  causal: bool = False  # 'distinct' rows stop at rel = 0; pairs with rel > 0 read zero

  @property
  def num_rows(self) -> int:
    return 0 if self.rows is None else int(self.rows.shape[0])

  @property
  def index(self) -> jax.Array:
    """Row read by each pair: (Lq, Lk) or (B, Lq, Lk) int32 (for causal 'distinct', >= num_rows ahead)."""
    if self.mode == 'distinct':
      return positions_lib.toeplitz_index(self.q_len, self.k_len)
    if self.mode == 'bucketed':
      return self.rel
    assert self.mode == 'clipped', f'mode {self.mode!r} has no row index'
    return jnp.clip(self.rel, -self.clip, self.clip) + self.clip


def relative_table(
    encoder: contract.VectorRelativeEncoder,
    q_len: int,
    k_len: int,
    *,
    q_offset=0,
    q_positions=None,
    k_positions=None,
    causal: bool = False,
) -> RelativeTable:
  """Chooses the rows to evaluate `encoder`'s table at (see `RelativeTable`).

  `causal=True` promises that the caller masks keys ahead of the query (j > q_offset + i): an unclipped
  table with contiguous positions and a static integer q_offset is then evaluated at the Lq + q_offset
  positions <= 0 only, not all Lq + Lk - 1 (half the rows, half the projection and its gradient, for a
  causal square). Ignored for explicit positions (their order is not the mask's) and a traced q_offset.
  """
  clip = encoder.clip_distance
  if q_positions is None:
    rel = positions_lib.relative_positions(q_len, k_len, q_offset)
    if clip is not None and 2 * clip + 1 < q_len + k_len - 1:
      rows = jnp.arange(-clip, clip + 1, dtype=jnp.int32)
      return RelativeTable('clipped', q_len, k_len, rows, rel, q_offset, True, clip)
    rows = positions_lib.distinct_relative_positions(q_len, k_len, q_offset)
    static_offset = isinstance(q_offset, int) and not isinstance(q_offset, bool)
    if causal and static_offset and q_len + q_offset < rows.shape[0]:
      # Row n holds rel n - (Lq - 1) - q_offset, so rel <= 0 is rows 0 .. Lq + q_offset - 1.
      return RelativeTable('distinct', q_len, k_len, rows[: q_len + q_offset], rel, q_offset, True, clip, causal=True)
    return RelativeTable('distinct', q_len, k_len, rows, rel, q_offset, True, clip)
  rel = jnp.asarray(k_positions, jnp.int32)[..., None, :] - jnp.asarray(q_positions, jnp.int32)[..., :, None]
  if clip is not None:
    rows = jnp.arange(-clip, clip + 1, dtype=jnp.int32)
    return RelativeTable('clipped', q_len, k_len, rows, rel, 0, False, clip)
  return RelativeTable('pairwise', q_len, k_len, None, rel, 0, False, None)


def bucketed_table(rows: jax.Array, index: jax.Array) -> RelativeTable:
  """A 'bucketed' table: rows (R,) int32 bucket ids (what the encoder's embeddings are evaluated at), index
  (B, Lq, Lk) int32 in [0, R), the row of `rows` each pair reads."""
  index = jnp.asarray(index, jnp.int32)
  return RelativeTable('bucketed', index.shape[-2], index.shape[-1], jnp.asarray(rows, jnp.int32), index, 0, False)


def _take_per_query(x: jax.Array, index: jax.Array) -> jax.Array:
  """x (B, H, Lq, N), index (Lq, M) or (B, Lq, M) in [0, N) -> (B, H, Lq, M): out[.., i, m] = x[.., i, index_im].

  One flat gather over the last two axes with the index shared by the heads (and the batch, for a 2-d
  index): take_along_axis would broadcast an int32 index as large as the output.
  """
  b, h, q_len, n = x.shape
  flat = x.reshape(b, h, q_len * n)
  if index.ndim == 2:
    m = index.shape[-1]
    idx = (index + jnp.arange(q_len, dtype=jnp.int32)[:, None] * n).reshape(-1)
    return jnp.take(flat, idx, axis=-1, mode='clip').reshape(b, h, q_len, m)
  m = index.shape[-1]
  idx = (index + jnp.arange(q_len, dtype=jnp.int32)[:, None] * n).reshape(b, -1)
  take = lambda xb, ib: jnp.take(xb, ib, axis=-1, mode='clip')
  return jax.vmap(take)(flat, idx).reshape(b, h, q_len, m)


def _take_masked(x: jax.Array, index: jax.Array) -> jax.Array:
  """x (B, H, Lq, Lk), index (Lq, N) of key positions -> (B, H, Lq, N), zero where index is outside."""
  k_len = x.shape[-1]
  valid = (index >= 0) & (index < k_len)
  return jnp.where(valid, _take_per_query(x, jnp.clip(index, 0, k_len - 1)), 0.0)


def skew(projected: jax.Array, k_len: int) -> jax.Array:
  """(B, H, Lq, R) -> (B, H, Lq, Lk): out[i, j] = projected[i, j - i + Lq - 1], the 'distinct' read.

  Transformer-XL's relative shift: with the rows padded to width W, entry (i, j) sits at flat offset
  (Lq - 1) + i (W - 1) + j, so a slice and two reshapes replace a gather. W = max(R, Lk + 1) keeps the
  strided rows Lk wide; reads past row R see the zero padding or the next query's row, only ever at
  rel > 0 (all of them are in range unless the table is causal, where they are masked).
  """
  b, h, q_len, num_rows = projected.shape
  width = max(num_rows, k_len + 1)
  flat = jnp.pad(projected, [(0, 0)] * 3 + [(0, width - num_rows)]).reshape(b, h, q_len * width)
  flat = flat[..., q_len - 1 : q_len - 1 + q_len * (width - 1)]
  return flat.reshape(b, h, q_len, width - 1)[..., :k_len]


def unskew(weights: jax.Array, num_rows: int) -> jax.Array:
  """The transpose of `skew`: (B, H, Lq, Lk) -> (B, H, Lq, R), A[i, r] = weights[i, r + i - (Lq - 1)].

  Exact when every weight `skew` would read out of range is zero (none for a full table; rel > 0 for a
  causal one, which the caller zeroes).
  """
  b, h, q_len, k_len = weights.shape
  width = max(num_rows, k_len + 1)
  flat = jnp.pad(weights, [(0, 0)] * 3 + [(0, width - 1 - k_len)]).reshape(b, h, q_len * (width - 1))
  flat = jnp.pad(flat, [(0, 0)] * 2 + [(q_len - 1, 1)])
  return flat.reshape(b, h, q_len, width)[..., :num_rows]


def _ahead(table: RelativeTable) -> jax.Array:
  """(Lq, Lk) bool: pairs of a causal 'distinct' table with no row (rel > 0)."""
  return table.index >= table.num_rows


def _gather_rows_impl(projected: jax.Array, table: RelativeTable) -> jax.Array:
  if table.mode == 'distinct':
    out = skew(projected, table.k_len)
    # Pairs ahead of the query have no row in a causal table: they read zero (the causal mask drops them).
    return jnp.where(_ahead(table), 0.0, out) if table.causal else out
  return _take_per_query(projected, table.index)


def _aggregate_impl(weights: jax.Array, table: RelativeTable) -> jax.Array:
  b, h, q_len, k_len = weights.shape
  i = jnp.arange(q_len, dtype=jnp.int32)[:, None]
  if table.mode == 'distinct':
    if table.causal:
      weights = jnp.where(_ahead(table), 0.0, weights)
    return unskew(weights, table.num_rows)  # row r holds key j = r + i - (Lq - 1)
  assert table.mode in ('clipped', 'bucketed'), f'mode {table.mode!r} has no row table'
  if not table.contiguous:  # explicit positions or buckets: a scatter-add of the weights into their rows
    num_rows = table.num_rows
    # One flat index per weight, entry ((b H + h) Lq + i) R + row: a 1-d scatter, about twice as fast on this
    # (shared, noisy) CPU as the same scatter-add indexed by (b, h, i, row): 1.2-1.6 ms against 2.9-3.7 ms for a
    # (1, 2, 512, 512) tile of weights into R = 50 rows.
    along = lambda n, axis: jnp.arange(n, dtype=jnp.int32).reshape([n if a == axis else 1 for a in range(4)])
    first = ((along(b, 0) * h + along(h, 1)) * q_len + along(q_len, 2)) * num_rows  # (B, H, Lq, 1)
    flat = (first + jnp.asarray(table.index, jnp.int32)[:, None]).reshape(-1)
    out = jnp.zeros((b * h * q_len * num_rows,), weights.dtype).at[flat].add(weights.reshape(-1))
    return out.reshape(b, h, q_len, num_rows)
  k = table.clip
  if k == 0:
    return jnp.sum(weights, axis=-1, keepdims=True)
  # Key j sits at rel = j - i - q_offset from query i: rel = -k is key i + q_offset - k.
  centre = i + jnp.asarray(table.q_offset, jnp.int32)  # (Lq, 1) key index at rel 0
  rel = jnp.arange(k_len, dtype=jnp.int32)[None, :] - centre  # (Lq, Lk), from iotas
  # The two edge rows collect every key at rel <= -k and at rel >= k: two masked row sums, one pass each.
  left = jnp.sum(jnp.where(rel <= -k, weights, 0.0), axis=-1, keepdims=True)
  right = jnp.sum(jnp.where(rel >= k, weights, 0.0), axis=-1, keepdims=True)
  middle = _take_masked(weights, centre + jnp.arange(-k + 1, k, dtype=jnp.int32)[None, :])
  return jnp.concatenate([left, middle, right], axis=-1)


# `gather_rows` and `aggregate_weights` are linear and each other's transpose (a pair reads row r <=> its
# weight is summed into row r), so each one's VJP is the other: a gather instead of the scatter-add that
# autodiff would make of a gather (slow on CPU), and masked sums instead of a gather's transpose.
# The table travels as its static fields (hashable) plus its int arrays (zero cotangent).


def _split_table(table: RelativeTable):
  static = (table.mode, table.q_len, table.k_len, table.contiguous, table.clip, table.causal)
  return static, (table.rows, table.rel, jnp.asarray(table.q_offset, jnp.int32))


def _join_table(static, arrays) -> RelativeTable:
  mode, q_len, k_len, contiguous, clip, causal = static
  rows, rel, q_offset = arrays
  return RelativeTable(mode, q_len, k_len, rows, rel, q_offset, contiguous, clip, causal)


def _linear_with_transpose(impl, transpose):
  """`impl(x, table)` as a custom-VJP function of (static, x, arrays) whose VJP is `transpose(g, table)`."""

  @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
  def linear(static, x, arrays):
    return impl(x, _join_table(static, arrays))

  def forward(static, x, arrays):
    return linear(static, x, arrays), arrays

  def backward(static, arrays, cotangent):
    return transpose(cotangent, _join_table(static, arrays)), None

  linear.defvjp(forward, backward)
  return linear


_gather_rows_linear = _linear_with_transpose(_gather_rows_impl, _aggregate_impl)
_aggregate_linear = _linear_with_transpose(_aggregate_impl, _gather_rows_impl)


def gather_rows(projected: jax.Array, table: RelativeTable) -> jax.Array:
  """projected (B, H, Lq, R) -> (B, H, Lq, Lk): entry (i, j) is projected[..., i, index_ij]."""
  static, arrays = _split_table(table)
  return _gather_rows_linear(static, projected, arrays)


def aggregate_weights(weights: jax.Array, table: RelativeTable) -> jax.Array:
  """Attention weights (B, H, Lq, Lk) summed per table row: (B, H, Lq, R), A[i, r] = sum_{j: row(i,j)=r} w_ij.

  distinct: each row is met by at most one key per query, a skew (pad and reshape, `unskew`; causal:
  rows rel <= 0 only).
  clipped, contiguous: rows strictly inside the window (|rel| < k) are single keys (a gather); the two edge
  rows collect everything at rel <= -k and rel >= k, two masked row sums.
  clipped, explicit positions: a scatter-add of the weights into their rows.
  The transpose of `_gather_rows`, and differentiated as such.
  """
  static, arrays = _split_table(table)
  return _aggregate_linear(static, weights, arrays)
