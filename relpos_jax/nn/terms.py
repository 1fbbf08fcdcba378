"""Terms: what each kind of attention part contributes to one tile of queries x keys.

One Term per kind, asked by every path: the explicit path is the one-tile case (`blockwise.attend_one_tile`),
the blockwise kernel asks the same Terms tile by tile, and the Pallas kernel takes the kinds whose Term has a
kernel form (`pallas_attention`: the Toeplitz bias). A Term prepares its data once, outside the tile loops
(`prepare`, then `complete` once the tiles are known, by plain autodiff); a tile reads its share (`local`) and
the Term adds content, scores, a bias, a transform of the logits or a value term for that tile; `accumulate`
adds a tile's gradient back. The order in which a tile's logits fold the Terms is the kernel's
(`blockwise._logits`), the same for every path.

What a tile needs, per kind (`term_for`; the layer still knows kinds, never names):

  scalar bias, Toeplitz, contiguous   the Lq + Lk - 1 distinct values b_h(rel), evaluated once (O(L H)); a
                                      tile reads the bq + bk - 1 it needs (one dynamic slice) and expands
                                      them with `positions.toeplitz`. No (H, L, L) array ever exists.
  scalar bias otherwise (FIRE, the    `encoder.pair_bias(params, q_pos, k_pos)` on the tile's positions
  absolute score term, explicit or    (the encoder's own pure function, per tile).
  randomized positions)
  vector relative, contiguous,        the table rows a^K (and a^V) of the distinct relative positions,
  unclipped (Transformer-XL)          evaluated once; a tile slices its bq + bk - 1 rows, projects its
                                      queries on them and skews (`position_terms` kernels).
  vector relative otherwise (Shaw's   the tile is a (bq, bk) problem of its own at q_offset + qs - ks:
  clipped tables, explicit positions) `skew.relative_table`, `position_terms.vector_scores` / `vector_values`.
  rotary                              applied to q and k before attention (nothing to do here).
  a precomputed `position_bias`       sliced per tile (it is (H, Lq, Lk) already: no memory saving).
  a grid bias given by its distinct   the (H, P = prod(2n - 1)) table, once (the layer's grid path with a
  offsets (`GridTable`)               static grid_shape); a tile gathers its block at the offsets of its
                                      queries' and keys' flattened indices (`grid_offset_index`): O(P + tile).
  separable contextual term (FoX)     the encoder's `row_column_terms` once (c at the queries, -c at the
                                      keys, O(L H)); a tile adds their outer sum.
  temperature (SSMax, log-n)          t_h(n_i) per row before the loop (`content_terms.visible_counts` and
                                      `temperature_factor`, as the explicit path); a tile scales its rows.
  position remap (Self-Extend,        a rotary base's q and k rotated under each position set once
  ReRoPE, Dual Chunk)                 (`position_terms.remap_rotations`, O(L) per set); a tile merges its
                                      sets by region (`position_terms.remap_merge`, the explicit path's own
                                      merge, on the tile's positions). A scalar base: its bias per region.
                                      A tile wholly inside one region computes that set only.
  score transform (DAPE)              A + B + f([A; B]) on the tile: B from the base's own Term, f per pair
                                      (v1); v2's convolutions along the keys read `key_halo` keys on each
                                      side, so a tile also scores a strip of that many keys left and right
                                      (as `_logits` scores its own) and crops f's output to the tile.
  normalizer (stick-breaking)         no softmax: key tiles from the nearest to the farthest, the encoder's
                                      `tile_weights` with a per-row carry of sum log(1 - beta) (see the
                                      normalizer kernel in blockwise); the remainder (1 - sum_j A_ij) v_own outside.

A kind without a Term (a future one) is a ValueError naming the encoder and its kind.

"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import positions as positions_lib
from relpos_jax.encoders import contract
from relpos_jax.nn import content_terms, position_terms, skew

Kind = contract.Kind


@dataclasses.dataclass(frozen=True)
class Tile:
  """One (bq, bk) tile: queries qs .. qs + bq - 1 (at key index q_offset + qs + i), keys ks .. ks + bk - 1."""

  qs: jax.Array  # int32 scalar
  ks: jax.Array  # int32 scalar
  bq: int
  bk: int
  q_offset: jax.Array  # int32 scalar
  q_pos: jax.Array  # (B or 1, bq) int32 positions the position terms read
  k_pos: jax.Array  # (B or 1, bk) int32
  padded_q_len: int
  padded_k_len: int

  @property
  def tile_q_offset(self):
    """The tile as a (bq, bk) problem of its own: its queries sit at this offset from its keys."""
    return self.q_offset + self.qs - self.ks

  @property
  def diagonal_start(self):
    """First of the bq + bk - 1 distinct values the tile reads, in the `distinct_relative_positions` layout
    of the padded lengths (entry n holds rel n - (Lq - 1) - q_offset)."""
    return self.ks - self.qs + (self.padded_q_len - 1) - (self.bq - 1)


def _start(*index):
  """A dynamic_slice start of one index type (int32): a literal 0 is int64 under jax_enable_x64."""
  return tuple(jnp.asarray(i, jnp.int32) for i in index)


def _slice_diagonals(x, tile: Tile, axis: int):
  return jax.lax.dynamic_slice_in_dim(x, tile.diagonal_start, tile.bq + tile.bk - 1, axis=axis)


def _add_diagonals(acc, update, tile: Tile, axis: int):
  start = tile.diagonal_start
  size = tile.bq + tile.bk - 1
  return jax.lax.dynamic_update_slice_in_dim(
      acc, jax.lax.dynamic_slice_in_dim(acc, start, size, axis=axis) + update, start, axis=axis
  )


def pad_axis(x, axis: int, size: int):
  """x padded with zeros at the end of `axis` to `size` (the tiles' padded lengths)."""
  if x.shape[axis] == size:
    return x
  widths = [(0, 0)] * x.ndim
  widths[axis] = (0, size - x.shape[axis])
  return jnp.pad(x, widths)


@dataclasses.dataclass(frozen=True)
class Term:
  """What one attention part contributes to a tile. `prepare` runs once, outside the tile loops (plain
  autodiff); `local` picks the tile's share of the prepared data, `accumulate` adds its gradient back."""

  # Whether the Pallas kernel (`pallas_attention`) has this Term's per-tile form; it asks at construction.
  kernel_form = False
  # Whether it does elementwise work of its own on every (query, key) pair beyond the scores (the kernel then
  # takes smaller default tiles on a CPU, blockwise.PER_PAIR_BLOCK_SIZE).
  per_pair_work = False

  def prepare(self, part, params, ctx):
    return params

  def local(self, theta, tile: Tile):
    return theta

  def accumulate(self, acc, d_local, tile: Tile):
    return jax.tree.map(jnp.add, acc, d_local)

  def bias(self, part, local, tile: Tile):
    """(B or 1, H, bq, bk) float32 added to the scaled scores, or None."""
    return None

  def scores(self, part, local, q_t, tile: Tile):
    """Unscaled position scores (B, H, bq, bk) float32 from the queries q_t (B, bq, H, D), or None."""
    return None

  def values(self, part, local, p_t, tile: Tile):
    """The output term (B, bq, H, D) float32 of the weights p_t (B, H, bq, bk), or None."""
    return None

  def content(self, part, local, content_q, k_t, scores, tile: Tile, valid=None, query=None):
    """(the content scores, replaced or None to keep q . k, a bias or None): a remap merges its sets here.
    `valid`: the tile's mask (None: nothing masked); `query`: the queries without a query bias u."""
    return scores, None

  def complete(self, part, theta, cfg, aux, q, k):
    """The prepared data once the tiles are known (`prepare` runs before): a carry over tiles goes here."""
    return theta

  def transform(self, part, local, s, tile: Tile):
    """The tile's logits after every score and bias (a temperature scales them per row)."""
    return s


@dataclasses.dataclass(frozen=True)
class ToeplitzBias(Term):
  """A Toeplitz scalar bias: the Lq + Lk - 1 distinct values once; a tile slices and expands its own."""

  kernel_form = True  # the Pallas kernel reads the same distinct values per tile

  def prepare(self, part, params, ctx):
    rel = positions_lib.distinct_relative_positions(ctx.padded_q_len, ctx.padded_k_len, ctx.q_offset)
    return jnp.asarray(part.bias(params, rel), jnp.float32).T  # (H, Lq + Lk - 1)

  def local(self, theta, tile):
    return _slice_diagonals(theta, tile, axis=1)

  def accumulate(self, acc, d_local, tile):
    return _add_diagonals(acc, d_local, tile, axis=1)

  def bias(self, part, local, tile):
    return positions_lib.toeplitz(local, tile.bq, tile.bk)[None]


@dataclasses.dataclass(frozen=True)
class _PairBias(Term):

  def bias(self, part, local, tile):
    b = part.pair_bias(local, tile.q_pos[:, :, None], tile.k_pos[:, None, :])  # (B|1, bq, bk, H)
    return jnp.moveaxis(jnp.asarray(b, jnp.float32), -1, 1)


@dataclasses.dataclass(frozen=True)
class GivenBias(Term):
  """A precomputed (B or 1, H, Lq, Lk) bias, padded; the tile slices it."""

  def prepare(self, part, params, ctx):
    raise AssertionError('a given bias is prepared by the caller')

  def local(self, theta, tile):
    return jax.lax.dynamic_slice(theta, _start(0, 0, tile.qs, tile.ks), theta.shape[:2] + (tile.bq, tile.bk))

  def accumulate(self, acc, d_local, tile):
    start = _start(0, 0, tile.qs, tile.ks)
    return jax.lax.dynamic_update_slice(acc, jax.lax.dynamic_slice(acc, start, d_local.shape) + d_local, start)

  def bias(self, part, local, tile):
    return local


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
class GridTableBias(Term):
  """A grid bias from its distinct offsets (`GridTable`): the tile holds the whole (H, P) table (small: the 2-D
  analogue of the 1-D Toeplitz bias's Lq + Lk - 1 values) and gathers its (H, bq, bk) block at the offsets of its
  queries' and keys' flattened indices; its gradient is a scatter-add into the table (O(P) per tile)."""

  shape: tuple
  class_token: bool = False

  def local(self, theta, tile):
    return theta

  def bias(self, part, local, tile):
    q_index = tile.qs + jnp.arange(tile.bq, dtype=jnp.int32)
    k_index = tile.ks + jnp.arange(tile.bk, dtype=jnp.int32)
    return jnp.take(local, grid_offset_index(q_index, k_index, self.shape, self.class_token), axis=-1)[None]


@dataclasses.dataclass(frozen=True)
class _VectorRows(Term):
  """Contiguous positions, unclipped table: a^K (a^V) at the distinct relative positions, once."""

  def prepare(self, part, params, ctx):
    rel = positions_lib.distinct_relative_positions(ctx.padded_q_len, ctx.padded_k_len, ctx.q_offset)
    _, v = part.query_biases(params)
    value_rows = part.value_embeddings(params, rel)
    return {
        'key': jnp.asarray(part.key_embeddings(params, rel), jnp.float32),
        'value': None if value_rows is None else jnp.asarray(value_rows, jnp.float32),
        'v': None if v is None else jnp.asarray(v, jnp.float32),
    }

  def local(self, theta, tile):
    return {
        'key': _slice_diagonals(theta['key'], tile, axis=0),
        'value': None if theta['value'] is None else _slice_diagonals(theta['value'], tile, axis=0),
        'v': theta['v'],
    }

  def accumulate(self, acc, d_local, tile):
    return {
        'key': _add_diagonals(acc['key'], d_local['key'], tile, axis=0),
        'value': None if acc['value'] is None else _add_diagonals(acc['value'], d_local['value'], tile, axis=0),
        'v': None if acc['v'] is None else acc['v'] + d_local['v'],
    }

  def scores(self, part, local, q_t, tile):
    q = q_t.astype(jnp.float32)
    if local['v'] is not None:
      q = q + local['v']
    projected = jnp.einsum('bihd,rhd->bhir', q, local['key'])  # (B, H, bq, bq + bk - 1)
    return skew.skew(projected, tile.bk)  # out[i, j] = projected[i, j - i + bq - 1]

  def values(self, part, local, p_t, tile):
    if local['value'] is None:
      return None
    rows = skew.unskew(p_t.astype(jnp.float32), tile.bq + tile.bk - 1)
    return jnp.einsum('bhir,rhd->bihd', rows, local['value'])


@dataclasses.dataclass(frozen=True)
class _VectorTable(Term):
  """Clipped tables or explicit positions: the tile as a (bq, bk) problem of its own, position_terms' kernels."""

  contiguous: bool = True

  def _table(self, part, tile):
    if self.contiguous:
      return skew.relative_table(part, tile.bq, tile.bk, q_offset=tile.tile_q_offset)
    return skew.relative_table(part, tile.bq, tile.bk, q_positions=tile.q_pos, k_positions=tile.k_pos)

  def scores(self, part, local, q_t, tile):
    return position_terms.vector_scores(part, local, q_t, self._table(part, tile))

  def values(self, part, local, p_t, tile):
    return position_terms.vector_values(part, local, p_t, self._table(part, tile))


def _slice_rows(x, start, size):
  """The tile's share (..., size) of per-position values (..., L) on the last axis."""
  return jax.lax.dynamic_slice_in_dim(x, start, size, axis=-1)


def _add_rows(acc, update, start):
  size = update.shape[-1]
  return jax.lax.dynamic_update_slice_in_dim(acc, _slice_rows(acc, start, size) + update, start, axis=-1)


@dataclasses.dataclass(frozen=True)
class _RowColumnBias(Term):
  """A separable contextual term (FoX's c_i - c_j): the encoder's `row_column_terms` once, an outer sum per tile.
  Beside a replaced content logit (PaTH) it joins that logit before the 1/sqrt(d) scaling, as the PaTH-FoX
  reference does (fla `naive_path_attn`: softmax((A + g_i - g_j) * scale)): `factor` = the scale then."""

  factor: float = 1.0

  def prepare(self, part, params, ctx):
    row, column = part.row_column_terms(params, ctx.feature, ctx.key_mask, ctx.q_index)
    row = pad_axis(jnp.asarray(row, jnp.float32), 2, ctx.padded_q_len)
    return {'row': row, 'column': pad_axis(jnp.asarray(column, jnp.float32), 2, ctx.padded_k_len)}

  def local(self, theta, tile):
    return {
        'row': _slice_rows(theta['row'], tile.qs, tile.bq),
        'column': _slice_rows(theta['column'], tile.ks, tile.bk),
    }

  def accumulate(self, acc, d_local, tile):
    return {
        'row': _add_rows(acc['row'], d_local['row'], tile.qs),
        'column': _add_rows(acc['column'], d_local['column'], tile.ks),
    }

  def bias(self, part, local, tile):
    outer = local['row'][:, :, :, None] + local['column'][:, :, None, :]
    return outer if self.factor == 1.0 else outer * np.float32(self.factor)


@dataclasses.dataclass(frozen=True)
class _RowTemperature(Term):
  """A temperature: t_h(n_i) per row (`content_terms.temperature_factor`), known before the tile loop."""

  def prepare(self, part, params, ctx):
    factor = content_terms.temperature_factor([part], [params], ctx.counts, ctx.q_index)
    return pad_axis(factor, 2, ctx.padded_q_len)  # (B|1, H, padded Lq)

  def local(self, theta, tile):
    return _slice_rows(theta, tile.qs, tile.bq)

  def accumulate(self, acc, d_local, tile):
    return _add_rows(acc, d_local, tile.qs)

  def transform(self, part, local, s, tile):
    return s * local[..., None]


@dataclasses.dataclass(frozen=True)
class _Remap(Term):
  """A position remap (Self-Extend, ReRoPE, Dual Chunk): a rotary base's queries and keys rotated under each
  position set once (`position_terms.remap_rotations`, O(L) per set); a tile merges its sets by region with
  the explicit path's `position_terms.remap_merge` on the tile's positions (a scalar base: its bias there)."""

  rotary: bool

  def prepare(self, part, params, ctx):
    if not self.rotary:
      return {'params': params}
    rotations = position_terms.remap_rotations(part, params, ctx.query, ctx.key, ctx.q_pos, ctx.k_pos)
    return {'params': params, 'q': [q for q, _ in rotations], 'k': [k for _, k in rotations]}

  def local(self, theta, tile):
    if not self.rotary:
      return theta
    return {
        'params': theta['params'],
        'q': [jax.lax.dynamic_slice_in_dim(q, tile.qs, tile.bq, axis=1) for q in theta['q']],
        'k': [jax.lax.dynamic_slice_in_dim(k, tile.ks, tile.bk, axis=1) for k in theta['k']],
    }

  def accumulate(self, acc, d_local, tile):
    params = jax.tree.map(jnp.add, acc['params'], d_local['params'])
    if not self.rotary:
      return {'params': params}
    add = lambda a, d, start: jax.lax.dynamic_update_slice_in_dim(
        a, jax.lax.dynamic_slice_in_dim(a, start, d.shape[1], axis=1) + d, start, axis=1
    )
    return {
        'params': params,
        'q': [add(a, d, tile.qs) for a, d in zip(acc['q'], d_local['q'])],
        'k': [add(a, d, tile.ks) for a, d in zip(acc['k'], d_local['k'])],
    }

  def content(self, part, local, content_q, k_t, scores, tile, valid=None, query=None):
    rotations = list(zip(local['q'], local['k'])) if self.rotary else None
    return position_terms.remap_merge(part, local['params'], rotations, content_q, k_t, tile.q_pos, tile.k_pos, scores)


@dataclasses.dataclass(frozen=True)
class _Normalizer(Term):
  """Replaces the softmax (stick-breaking): no term of its own; the kernel folds its `tile_weights`."""

  per_pair_work = True

  def prepare(self, part, params, ctx):
    return None


@dataclasses.dataclass(frozen=True)
class _ScoreTransform(Term):
  """A score transform (DAPE): A + B + f([A; B]) on the tile, B from the base's own Term. A correction that
  reads neighbouring keys (`key_halo`, version 2's convolutions) sees `halo` extra key columns on each side,
  scored exactly like the tile's own (`_logits`), then cropped: the explicit path's result, tile by tile."""

  per_pair_work = True

  base: Term
  halo: int = 0

  def prepare(self, part, params, ctx):
    return {'layers': params['layers'], 'base': self.base.prepare(part.base, params['base'], ctx)}

  def local(self, theta, tile):
    return {'layers': theta['layers'], 'base': self.base.local(theta['base'], tile)}

  def accumulate(self, acc, d_local, tile):
    return {
        'layers': jax.tree.map(jnp.add, acc['layers'], d_local['layers']),
        'base': self.base.accumulate(acc['base'], d_local['base'], tile),
    }

  def base_bias(self, part, local, tile):
    return self.base.bias(part.base, local['base'], tile)


@dataclasses.dataclass(frozen=True)
class _CountedPositions(Term):
  """A term of counts along the keys (CoPE): p_ij = (query i's gates on the keys of j's tile from j on) +
  (its gates on every nearer key tile). The second sum is a carry per (query tile, key tile), from the row
  sums of every tile's gates (`complete`, once, by plain autodiff: O(L^2 / bk) floats); a tile adds its own
  suffix sums and reads the encoder's `counted_term` at p."""

  per_pair_work = True

  scale: float
  shares_scores: bool = True  # its q . k is the content score too (no query bias u, no remap replacing it)

  def prepare(self, part, params, ctx):
    return {'params': params, 'carry': None}

  def complete(self, part, theta, cfg, aux, q, k):
    def query_tile(t):
      qs = t * cfg.bq
      q_t = jax.lax.dynamic_slice_in_dim(q, qs, cfg.bq, axis=1).astype(jnp.float32)

      @jax.checkpoint  # the gates of a tile are recomputed in the backward pass, never stored
      def row_sums(n):
        ks = n * cfg.bk
        k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1).astype(jnp.float32)
        logits = jnp.einsum('bihd,bjhd->bhij', q_t, k_t) * np.float32(self.scale)
        return jnp.sum(part.gates(logits, tile_mask(cfg, aux, tile_at(cfg, aux, qs, ks))), axis=-1)

      return jax.lax.map(row_sums, jnp.arange(cfg.num_k_tiles, dtype=jnp.int32))  # (nk, B, H, bq)

    if cfg.num_k_tiles == 1:  # one key tile: no nearer tile, nothing to carry
      b, _, h, _ = q.shape
      return {'params': theta['params'], 'carry': jnp.zeros((cfg.num_q_tiles, 1, b, h, cfg.bq), jnp.float32)}
    sums = jax.lax.map(query_tile, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))  # (nq, nk, B, H, bq)
    nearer = jnp.flip(jnp.cumsum(jnp.flip(sums, 1), axis=1), 1) - sums  # the key tiles after n
    return {'params': theta['params'], 'carry': nearer}

  def local(self, theta, tile):
    t, n = tile.qs // tile.bq, tile.ks // tile.bk
    carry = jax.lax.dynamic_index_in_dim(jax.lax.dynamic_index_in_dim(theta['carry'], t, 0, False), n, 0, False)
    return {'params': theta['params'], 'carry': carry}

  def accumulate(self, acc, d_local, tile):
    start = _start(tile.qs // tile.bq, tile.ks // tile.bk, *(0,) * (acc['carry'].ndim - 2))
    update = d_local['carry'][None, None]
    carry = jax.lax.dynamic_update_slice(
        acc['carry'], jax.lax.dynamic_slice(acc['carry'], start, update.shape) + update, start
    )
    return {'params': jax.tree.map(jnp.add, acc['params'], d_local['params']), 'carry': carry}

  def content(self, part, local, content_q, k_t, scores, tile, valid=None, query=None):
    query = content_q if query is None else query
    logits = jnp.einsum('bihd,bjhd->bhij', query, k_t, preferred_element_type=jnp.float32)  # q . k, no u
    if scores is None and self.shares_scores:
      scores = logits
    gates = part.gates(logits * np.float32(self.scale), valid)
    counts = local['carry'][..., None] + jnp.flip(jnp.cumsum(jnp.flip(gates, -1), axis=-1), -1)
    return scores, part.counted_term(local['params'], query, counts, np.float32(self.scale))


@dataclasses.dataclass(frozen=True)
class _ReplacedContent(Term):
  """A contextual part whose logit replaces q . k (PaTH): a_ij reads every token between j and i through a
  carry across the keys (its chunked scan), so it has no per-tile form yet (`encoders/path.py` says what one
  would take); the one-tile (explicit) path builds it whole."""

  def prepare(self, part, params, ctx):
    return {'params': params, 'feature': ctx.feature, 'logits': None}

  def complete(self, part, theta, cfg, aux, q, k):
    tile = tile_at(cfg, aux, jnp.int32(0), jnp.int32(0))
    valid = tile_mask(cfg, aux, tile)
    b, q_len = q.shape[:2]
    ctx = contract.AttentionContext(
        query=q.astype(jnp.float32),
        key=k.astype(jnp.float32),
        features=theta['feature'],
        valid=jnp.ones((1, 1, cfg.bq, cfg.bk), bool) if valid is None else valid,
        key_mask=aux.get('key_mask', jnp.ones((b, cfg.k_len), bool)),
        q_index=jnp.arange(q_len, dtype=jnp.int32) + aux['q_offset'],
        scale=cfg.scale,
    )
    return {**theta, 'logits': jnp.asarray(part.score_term(theta['params'], ctx), jnp.float32)}

  def content(self, part, local, content_q, k_t, scores, tile, valid=None, query=None):
    return local['logits'], None


def term_for(part, contiguous: bool, scale: float = 1.0, one_tile: bool = False) -> Term:
  if part.kind is Kind.SCALAR_BIAS:
    return ToeplitzBias() if contiguous and part.is_toeplitz else _PairBias()
  if part.kind is Kind.VECTOR_RELATIVE:
    if contiguous and part.clip_distance is None:
      return _VectorRows()
    return _VectorTable(contiguous)
  if part.kind is Kind.POSITION_REMAP:
    return _Remap(part.base.kind is Kind.ROTARY)
  if part.kind is Kind.CONTEXTUAL and part.separable:
    return _RowColumnBias()
  if part.kind is Kind.CONTEXTUAL and part.counts_along_keys:
    return _CountedPositions(scale)
  if part.kind is Kind.CONTEXTUAL and part.replaces_content and one_tile:
    return _ReplacedContent()
  if part.kind is Kind.TEMPERATURE:
    return _RowTemperature()
  if part.kind is Kind.NORMALIZER and part.tiles:
    return _Normalizer()
  if part.kind is Kind.SCORE_TRANSFORM:
    return _ScoreTransform(term_for(part.base, contiguous), int(part.key_halo))
  raise ValueError(
      f'tiled attention (implementation "blockwise" or "pallas"): encoder {part.name or type(part).__name__!r} is of '
      f'kind {part.kind.value!r}, which has no per-tile form; use implementation "einsum".'
  )


def terms_for(parts, contiguous: bool, scale: float, *, one_tile: bool, query_bias: bool) -> tuple[Term, ...]:
  """Every part's Term, as the parts beside it need it; a composition no tiled form covers is a ValueError.

  Beside PaTH's replaced logit, FoX's sums join that logit before the 1/sqrt(d) scaling. CoPE's gates read
  the plain q . k: beside a query bias u (`query_bias`) or a remap (which replaces q . k) it computes its own.
  """
  chosen = tuple(term_for(part, contiguous, scale, one_tile) for part in parts)
  if any(isinstance(t, _ReplacedContent) for t in chosen):
    chosen = tuple(dataclasses.replace(t, factor=scale) if isinstance(t, _RowColumnBias) else t for t in chosen)
  if query_bias or any(isinstance(t, _Remap) for t in chosen):
    chosen = tuple(
        dataclasses.replace(t, shares_scores=False) if isinstance(t, _CountedPositions) else t for t in chosen
    )
  halos = [(part, t.halo) for part, t in zip(parts, chosen) if isinstance(t, _ScoreTransform) and t.halo]
  # Beside a normalizer a halo tiles too (stick-breaking's backward adds the strips' key gradients like the
  # softmax's); it used to be refused here on every path, the explicit one included, while the error pointed
  # the user to the explicit one. Two such transforms share one halo width: refused on every path.
  if len(halos) > 1:
    raise ValueError(
        f'attention: {halos[0][0].name!r} and {halos[1][0].name!r} each read neighbouring keys on each side of a '
        f'logit ({halos[0][1]} and {halos[1][1]}); allowed: one such score transform (DAPE version 2) per layer.'
    )
  counted = [part for part, t in zip(parts, chosen) if isinstance(t, _CountedPositions)]
  if counted and halos and not one_tile:
    raise ValueError(
        f'tiled attention: {counted[0].name!r} counts gates along the keys; it does not tile beside a score '
        'transform that reads neighbouring keys (DAPE version 2); use implementation "einsum".'
    )
  return chosen


def key_halo(parts, chosen) -> tuple[int, object]:
  """(The keys a tile reads beyond each side, the part that reads them or None): a score transform's halo."""
  for part, t in zip(parts, chosen):
    if isinstance(t, _ScoreTransform) and t.halo:
      return int(t.halo), part
  return 0, None


@dataclasses.dataclass(frozen=True)
class Context:
  """What `Term.prepare` may read: sizes, the real queries' key indices, masks, counts, the part's features."""

  padded_q_len: int
  padded_k_len: int
  q_offset: jax.Array
  q_index: jax.Array | None = None  # (Lq,) int32, the real queries' key indices
  key_mask: jax.Array | None = None  # (B, Lk) bool (all True when none was given)
  counts: jax.Array | None = None  # (B or 1, Lq) float32: keys each query sees (temperatures)
  feature: jax.Array | None = None  # this part's token features of the keys (B, Lk, F)
  query: jax.Array | None = None  # (B, padded Lq, H, D) the content queries (+ u), padded
  key: jax.Array | None = None  # (B, padded Lk, H, D)
  q_pos: jax.Array | None = None  # (B, padded Lq) int32 positions the position terms read
  k_pos: jax.Array | None = None  # (B, padded Lk) int32


def tile_at(cfg, aux, qs, ks) -> Tile:
  """The tile of queries qs .. qs + bq - 1 and keys ks .. ks + bk - 1 of a kernel call (`cfg`: its static
  configuration, blockwise._Config; `aux`: its positions, offsets and masks)."""
  q_pos = jax.lax.dynamic_slice_in_dim(aux['q_pos'], qs, cfg.bq, axis=1)
  k_pos = jax.lax.dynamic_slice_in_dim(aux['k_pos'], ks, cfg.bk, axis=1)
  return Tile(qs, ks, cfg.bq, cfg.bk, aux['q_offset'], q_pos, k_pos, cfg.num_q_tiles * cfg.bq, cfg.num_k_tiles * cfg.bk)


def tile_mask(cfg, aux, tile: Tile):
  """(B or 1, 1, bq, bk) bool of the pairs that may attend, or None when none is masked."""
  k_index = tile.ks + jnp.arange(tile.bk, dtype=jnp.int32)
  valid = None
  if cfg.causal:
    q_index = tile.qs + jnp.arange(cfg.bq, dtype=jnp.int32) + tile.q_offset
    valid = (k_index[None, :] <= q_index[:, None])[None, None]
  strip = tile.bk != cfg.bk  # a halo strip may lie outside the keys
  if strip or cfg.num_k_tiles * cfg.bk != cfg.k_len:
    real = ((k_index < cfg.k_len) & (k_index >= 0))[None, None, None, :]
    valid = real if valid is None else valid & real
  if cfg.has_key_mask:
    km = jax.lax.dynamic_slice_in_dim(aux['key_mask'], tile.ks, tile.bk, axis=1)[:, None, None, :]
    valid = km if valid is None else valid & km
  if cfg.has_mask:
    m = aux['mask']
    m = jax.lax.dynamic_slice(m, _start(0, 0, tile.qs, tile.ks), m.shape[:2] + (cfg.bq, tile.bk))
    valid = m if valid is None else valid & m
  if cfg.has_segments:  # packed documents: a query sees the keys of its own document only
    q_seg = jax.lax.dynamic_slice_in_dim(aux['q_segment_ids'], tile.qs, cfg.bq, axis=1)
    k_seg = jax.lax.dynamic_slice_in_dim(aux['k_segment_ids'], tile.ks, tile.bk, axis=1)
    same = (q_seg[:, :, None] == k_seg[:, None, :])[:, None]  # (B, 1, bq, bk): the tile's ids, O(bq + bk) read
    valid = same if valid is None else valid & same
  return valid
