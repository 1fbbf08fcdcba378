"""Blockwise attention: queries and keys in tiles, an online softmax, every position term built per tile.

`implementation='blockwise'` of `functional.attend`. The explicit path materialises (B, H, Lq, Lk) scores
and, for a scalar bias, an (H, Lq, Lk) bias; this one never holds more than one (B, H, bq, bk) tile of
scores, so memory grows linearly with the length, for training too.

Forward (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Rabe & Staats 2021,
"Self-attention does not need O(n^2) memory"; Dao et al. 2022/2023, FlashAttention 1/2): for each query
tile, loop over key tiles keeping the running row maximum m, the running normaliser l and the unnormalised
output acc,

    s     = (q_t . k_t + position scores) * scale + bias_t          masked entries: a large negative value
    m'    = max(m, rowmax s);  p = exp(s - m');  c = exp(m - m')
    l     = c l + rowsum p;    acc = c acc + p v_t + (a^V term of p);   m = m'

and output acc / l, keeping lse = m + log l. Under a causal mask the key tiles wholly ahead of the query
tile (index > q_offset + last query) are never visited.

Backward: a custom VJP that recomputes each tile from q, k, v, the position data and lse (FlashAttention-2's
backward): P = exp(s - lse), dP = dO . (v + a^V)^T, dS = P (dP - D) with D_i = dO_i . O_i, then the tile's
own score and value functions are differentiated by `jax.vjp` to give dq, dk, dv and the position data's
gradient. Nothing (Lq, Lk)-sized is saved or rebuilt: memory O(L) in training.

What a tile needs, per kind (`_tiler`; the layer still knows kinds, never names):

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
  separable contextual term (FoX)     the encoder's `row_column_terms` once (c at the queries, -c at the
                                      keys, O(L H)); a tile adds their outer sum.
  temperature (SSMax, log-n)          t_h(n_i) per row before the loop (`content_terms.visible_counts` and
                                      `temperature_factor`, as the explicit path); a tile scales its rows.
  position remap (Self-Extend,        a rotary base's q and k rotated under each position set once
  ReRoPE, Dual Chunk)                 (`position_terms.remap_rotations`, O(L) per set); a tile merges its
                                      sets by region (`position_terms.remap_merge`, the explicit path's own
                                      merge, on the tile's positions). A scalar base: its bias per region.
                                      A tile wholly inside one region computes that set only.
  score transform (DAPE)              A + B + f([A; B]) on the tile: B from the base's own tiler, f per pair
                                      (v1); v2's convolutions along the keys read `key_halo` keys on each
                                      side, so a tile also scores a strip of that many keys left and right
                                      (as `_logits` scores its own) and crops f's output to the tile.
  normalizer (stick-breaking)         no softmax: key tiles from the nearest to the farthest, the encoder's
                                      `tile_weights` with a per-row carry of sum log(1 - beta) (see the
                                      normalizer kernel below); the remainder (1 - sum_j A_ij) v_own outside.

A kind without a tiler (a future one) is a ValueError naming the encoder and its kind.

Tile sizes: `block_size` None (512 x 512), an int (square tiles) or (block_q, block_k); each capped at the
sequence length, remainders padded (padded keys masked, padded queries dropped). Numerics: float32 scores
and accumulation whatever the inputs' dtype; the same large finite negative for masked scores as the other
paths, so a query that sees no key gives what they give (the caller zeroes it).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import positions as positions_lib
from relpos_jax.encoders import contract
from relpos_jax.nn import content_terms, position_terms, skew

Kind = contract.Kind

DEFAULT_BLOCK_SIZE = (512, 512)
# dot_product_attention's own choice (jax.nn.functions._get_large_negative): finite in float32. Every path
# masks with it (functional imports it from here).
LARGE_NEGATIVE = np.float32(-0.7 * np.finfo(np.float32).max)


def block_sizes(block_size) -> tuple[int, int]:
  """None -> the default (block_q, block_k); an int -> square tiles; a pair -> itself. Else ValueError."""
  if block_size is None:
    return DEFAULT_BLOCK_SIZE
  pair = (block_size, block_size) if isinstance(block_size, numbers.Integral) else block_size
  try:
    pair = tuple(pair)
  except TypeError:
    pair = ()
  ok = len(pair) == 2 and all(isinstance(b, numbers.Integral) and not isinstance(b, bool) and b >= 1 for b in pair)
  if not ok:
    raise ValueError(
        f'block_size={block_size!r} is invalid; allowed: None (default {DEFAULT_BLOCK_SIZE}), '
        'an int >= 1 (square tiles) or a pair (block_q, block_k) of ints >= 1.'
    )
  return int(pair[0]), int(pair[1])


# ----------------------------------------------------------------------------------------------------------
# Tiles.


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


@dataclasses.dataclass(frozen=True)
class _Tiler:
  """What one attention part contributes to a tile. `prepare` runs once, outside the tile loops (plain
  autodiff); `local` picks the tile's share of the prepared data, `accumulate` adds its gradient back."""

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
class ToeplitzBias(_Tiler):

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
class _PairBias(_Tiler):

  def bias(self, part, local, tile):
    b = part.pair_bias(local, tile.q_pos[:, :, None], tile.k_pos[:, None, :])  # (B|1, bq, bk, H)
    return jnp.moveaxis(jnp.asarray(b, jnp.float32), -1, 1)


@dataclasses.dataclass(frozen=True)
class _GivenBias(_Tiler):
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


@dataclasses.dataclass(frozen=True)
class _VectorRows(_Tiler):
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
class _VectorTable(_Tiler):
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
class _RowColumnBias(_Tiler):
  """A separable contextual term (FoX's c_i - c_j): the encoder's `row_column_terms` once, an outer sum per tile.
  Beside a replaced content logit (PaTH) it joins that logit before the 1/sqrt(d) scaling, as the PaTH-FoX
  reference does (fla `naive_path_attn`: softmax((A + g_i - g_j) * scale)): `factor` = the scale then."""

  factor: float = 1.0

  def prepare(self, part, params, ctx):
    row, column = part.row_column_terms(params, ctx.feature, ctx.key_mask, ctx.q_index)
    row = _pad_axis(jnp.asarray(row, jnp.float32), 2, ctx.padded_q_len)
    return {'row': row, 'column': _pad_axis(jnp.asarray(column, jnp.float32), 2, ctx.padded_k_len)}

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
class _RowTemperature(_Tiler):
  """A temperature: t_h(n_i) per row (`content_terms.temperature_factor`), known before the tile loop."""

  def prepare(self, part, params, ctx):
    factor = content_terms.temperature_factor([part], [params], ctx.counts, ctx.q_index)
    return _pad_axis(factor, 2, ctx.padded_q_len)  # (B|1, H, padded Lq)

  def local(self, theta, tile):
    return _slice_rows(theta, tile.qs, tile.bq)

  def accumulate(self, acc, d_local, tile):
    return _add_rows(acc, d_local, tile.qs)

  def transform(self, part, local, s, tile):
    return s * local[..., None]


@dataclasses.dataclass(frozen=True)
class _Remap(_Tiler):
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
class _Normalizer(_Tiler):
  """Replaces the softmax (stick-breaking): no term of its own; the kernel folds its `tile_weights`."""

  def prepare(self, part, params, ctx):
    return None


@dataclasses.dataclass(frozen=True)
class _ScoreTransform(_Tiler):
  """A score transform (DAPE): A + B + f([A; B]) on the tile, B from the base's own tiler. A correction that
  reads neighbouring keys (`key_halo`, version 2's convolutions) sees `halo` extra key columns on each side,
  scored exactly like the tile's own (`_logits`), then cropped: the explicit path's result, tile by tile."""

  base: _Tiler
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
class _CountedPositions(_Tiler):
  """A term of counts along the keys (CoPE): p_ij = (query i's gates on the keys of j's tile from j on) +
  (its gates on every nearer key tile). The second sum is a carry per (query tile, key tile), from the row
  sums of every tile's gates (`complete`, once, by plain autodiff: O(L^2 / bk) floats); a tile adds its own
  suffix sums and reads the encoder's `counted_term` at p."""

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
        return jnp.sum(part.gates(logits, _valid(cfg, aux, _tile(cfg, aux, qs, ks))), axis=-1)

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
    return scores, part.counted_term(local['params'], query, counts, self.scale)


@dataclasses.dataclass(frozen=True)
class _ReplacedContent(_Tiler):
  """A contextual part whose logit replaces q . k (PaTH): a_ij reads every token between j and i through a
  carry across the keys (its chunked scan), so it has no per-tile form yet (`encoders/path.py` says what one
  would take); the one-tile (explicit) path builds it whole."""

  def prepare(self, part, params, ctx):
    return {'params': params, 'feature': ctx.feature, 'logits': None}

  def complete(self, part, theta, cfg, aux, q, k):
    tile = _tile(cfg, aux, jnp.int32(0), jnp.int32(0))
    valid = _valid(cfg, aux, tile)
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


def _tiler(part, contiguous: bool, scale: float = 1.0, one_tile: bool = False) -> _Tiler:
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
    return _ScoreTransform(_tiler(part.base, contiguous), int(part.key_halo))
  raise ValueError(
      f'tiled attention (implementation "blockwise" or "pallas"): encoder {part.name or type(part).__name__!r} is of '
      f'kind {part.kind.value!r}, which has no per-tile form; use implementation "einsum".'
  )


# ----------------------------------------------------------------------------------------------------------
# The kernel.


@dataclasses.dataclass(frozen=True)
class _Config:
  """Everything static about one call (hashable: the custom VJP's nondiff argument)."""

  parts: tuple  # the parts with a term inside attention (not rotary)
  tilers: tuple
  given_bias: bool  # theta ends with a precomputed bias
  causal: bool
  scale: float
  bq: int
  bk: int
  num_q_tiles: int
  num_k_tiles: int
  k_len: int  # real keys (later ones are padding)
  has_key_mask: bool
  has_mask: bool
  normalizer: int | None = None  # index in parts of a normalizer replacing the softmax (stick-breaking)
  halo: int = 0  # extra key columns on each side of a tile that a score transform reads (DAPE version 2)


@dataclasses.dataclass(frozen=True)
class _Context:
  """What `_Tiler.prepare` may read: sizes, the real queries' key indices, masks, counts, the part's features."""

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


def _tile(cfg: _Config, aux, qs, ks) -> Tile:
  q_pos = jax.lax.dynamic_slice_in_dim(aux['q_pos'], qs, cfg.bq, axis=1)
  k_pos = jax.lax.dynamic_slice_in_dim(aux['k_pos'], ks, cfg.bk, axis=1)
  return Tile(qs, ks, cfg.bq, cfg.bk, aux['q_offset'], q_pos, k_pos, cfg.num_q_tiles * cfg.bq, cfg.num_k_tiles * cfg.bk)


def _locals(cfg: _Config, theta, tile: Tile, k=None, aux=None):
  """The tile's share of every part's data; with a halo (and k given), also each side strip's keys and share."""
  terms = [t.local(th, tile) for t, th in zip(cfg.tilers, theta['parts'])]
  given = _GivenBias().local(theta['given'], tile) if cfg.given_bias else None
  out = {'parts': terms, 'given': given, 'u': theta['u']}
  if cfg.halo and k is not None:
    out['halo'] = tuple(
        (jax.lax.dynamic_slice_in_dim(k, side.ks, cfg.halo, axis=1), _locals(cfg, theta, side))
        for side in _halo_tiles(cfg, aux, tile)
    )
  return out


def _accumulate(cfg: _Config, acc, d_local, tile: Tile, aux=None):
  terms = [t.accumulate(a, d, tile) for t, a, d in zip(cfg.tilers, acc['parts'], d_local['parts'])]
  given = _GivenBias().accumulate(acc['given'], d_local['given'], tile) if cfg.given_bias else None
  u = None if acc['u'] is None else acc['u'] + d_local['u']
  out = {'parts': terms, 'given': given, 'u': u}
  for side, (_, d_side) in zip(_halo_tiles(cfg, aux, tile) if 'halo' in d_local else (), d_local.get('halo', ())):
    out = _accumulate(cfg, out, d_side, side)
  return out


def _halo_tiles(cfg: _Config, aux, tile: Tile) -> tuple[Tile, Tile]:
  """The strips of `cfg.halo` keys left and right of a tile. A strip that starts outside the keys (before
  the first, after the padded last) is clamped by the slices but wholly masked (`_valid`): its values never
  count, and its gradient is zero. Every other strip lies inside the keys (`prepare` keeps bk >= halo)."""
  h = cfg.halo

  def side(ks):
    return dataclasses.replace(tile, ks=ks, bk=h, k_pos=jax.lax.dynamic_slice_in_dim(aux['k_pos'], ks, h, axis=1))

  return side(tile.ks - h), side(tile.ks + tile.bk)


def _add_halo_keys(cfg: _Config, dk, d_local, tile: Tile):
  """dk plus the gradients of the side strips' keys (zero for a strip outside the keys)."""
  for (d_k_side, _), start in zip(d_local.get('halo', ()), (tile.ks - cfg.halo, tile.ks + tile.bk)):
    start = jnp.clip(start, 0, dk.shape[1] - cfg.halo)  # where the forward's clamped slice read
    dk = jax.lax.dynamic_update_slice_in_dim(
        dk, jax.lax.dynamic_slice_in_dim(dk, start, cfg.halo, axis=1) + d_k_side.astype(dk.dtype), start, axis=1
    )
  return dk


def _valid(cfg: _Config, aux, tile: Tile):
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
  return valid


def _logits(cfg: _Config, aux, tile: Tile, q_t, k_t, local):
  """The tile's masked scores (B, H, bq, bk) float32, exactly as the explicit path computes them: every score
  and bias, then the score transforms (DAPE), then the other transforms (temperatures), then the mask."""
  valid = _valid(cfg, aux, tile)
  s = _scores(cfg, tile, q_t, k_t, local, valid)
  for index, (part, tiler) in enumerate(zip(cfg.parts, cfg.tilers)):
    if part.kind is Kind.SCORE_TRANSFORM:
      s = _transformed(cfg, aux, tile, q_t, s, valid, index, local)
  for part, tiler, th in zip(cfg.parts, cfg.tilers, local['parts']):
    if part.kind is not Kind.SCORE_TRANSFORM:
      s = tiler.transform(part, th, s, tile)
  return s if valid is None else jnp.where(valid, s, LARGE_NEGATIVE)


def _transformed(cfg: _Config, aux, tile: Tile, q_t, s, valid, index: int, local):
  """A score transform on the tile: with a halo, on [left strip | tile | right strip], cropped to the tile."""
  part, tiler = cfg.parts[index], cfg.tilers[index]
  layers = {'layers': local['parts'][index]['layers']}
  bias = tiler.base_bias(part, local['parts'][index], tile)
  if not tiler.halo:
    return part.transform(layers, s, bias, valid)
  pieces = []
  for side, (k_side, side_local) in zip(_halo_tiles(cfg, aux, tile), local['halo']):
    side_valid = _valid(cfg, aux, side)
    side_scores = _scores(cfg, side, q_t, k_side, side_local, side_valid)
    pieces.append((side_scores, tiler.base_bias(part, side_local['parts'][index], side), side_valid))
  (s_left, b_left, v_left), (s_right, b_right, v_right) = pieces
  everything = (s, s_left, s_right, v_left, v_right) + (() if valid is None else (valid,))
  batch = max(x.shape[0] for x in everything)
  scores = jnp.concatenate([s_left, s, s_right], axis=-1)
  widths = (cfg.halo, tile.bk, cfg.halo)
  full = lambda x, width: jnp.broadcast_to(x, (batch, s.shape[1], cfg.bq, width))
  biases = jnp.concatenate([full(b, w) for b, w in zip((b_left, bias, b_right), widths)], axis=-1)
  middle = jnp.ones((1, 1, cfg.bq, tile.bk), bool) if valid is None else valid
  flags = jnp.concatenate(
      [jnp.broadcast_to(v, (batch, 1, cfg.bq, w)) for v, w in zip((v_left, middle, v_right), widths)], -1
  )
  out = part.transform(layers, jnp.broadcast_to(scores, (batch,) + scores.shape[1:]), biases, flags)
  return out[..., cfg.halo : cfg.halo + tile.bk]


def _scores(cfg: _Config, tile: Tile, q_t, k_t, local, valid=None):
  """Every score and bias of the tile, scaled and summed, before any transform (unmasked; `valid` is for the
  terms that read the mask, CoPE's gates)."""
  content_q = q_t
  if local['u'] is not None:
    content_q = q_t.astype(jnp.float32) + local['u']
    k_t = k_t.astype(jnp.float32)
  s, remap_bias = None, None
  for part, tiler, th in zip(cfg.parts, cfg.tilers, local['parts']):
    s, b = tiler.content(part, th, content_q, k_t, s, tile, valid, q_t)
    if b is not None:
      remap_bias = b if remap_bias is None else remap_bias + b
  if s is None:
    s = jnp.einsum('bihd,bjhd->bhij', content_q, k_t, preferred_element_type=jnp.float32)
  for part, tiler, th in zip(cfg.parts, cfg.tilers, local['parts']):
    extra = tiler.scores(part, th, q_t, tile)
    if extra is not None:
      s = s + extra
  s = s * np.float32(cfg.scale)
  for part, tiler, th in zip(cfg.parts, cfg.tilers, local['parts']):
    b = tiler.bias(part, th, tile)
    if b is not None:
      s = s + b
  if cfg.given_bias:
    s = s + local['given']
  if remap_bias is not None:
    s = s + remap_bias
  return s


def _values(cfg: _Config, tile: Tile, p_t, v_t, local):
  """sum_j p_ij (v_j + a^V_ij): (B, bq, H, D) float32."""
  out = jnp.einsum('bhij,bjhd->bihd', p_t.astype(v_t.dtype), v_t, preferred_element_type=jnp.float32)
  for part, tiler, th in zip(cfg.parts, cfg.tilers, local['parts']):
    extra = tiler.values(part, th, p_t, tile)
    if extra is not None:
      out = out + extra
  return out


def _key_tile_range(cfg: _Config, aux, qs):
  """[lo, hi): the key tiles query tile qs must visit (causal: none wholly ahead of its last query)."""
  if not cfg.causal:
    return 0, cfg.num_k_tiles
  last_key = qs + cfg.bq - 1 + aux['q_offset']  # the furthest key any query of the tile sees
  hi = jnp.clip(last_key // cfg.bk + 1, 0, cfg.num_k_tiles)
  return 0, hi


def _forward(cfg: _Config, q, k, v, theta, aux):
  b, _, h, d = q.shape

  def query_tile(t):
    qs = t * cfg.bq
    q_t = jax.lax.dynamic_slice_in_dim(q, qs, cfg.bq, axis=1)

    def key_tile(n, carry):
      m, l, acc = carry
      ks = n * cfg.bk
      tile = _tile(cfg, aux, qs, ks)
      local = _locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      s = _logits(cfg, aux, tile, q_t, k_t, local)
      m_new = jnp.maximum(m, jnp.max(s, axis=-1))
      p = jnp.exp(s - m_new[..., None])
      correction = jnp.exp(m - m_new)  # (B, H, bq)
      l = correction * l + jnp.sum(p, axis=-1)
      acc = acc * jnp.moveaxis(correction, 1, 2)[..., None] + _values(cfg, tile, p, v_t, local)
      return m_new, l, acc

    init = (
        jnp.full((b, h, cfg.bq), -jnp.inf, jnp.float32),
        jnp.zeros((b, h, cfg.bq), jnp.float32),
        jnp.zeros((b, cfg.bq, h, d), jnp.float32),
    )
    lo, hi = _key_tile_range(cfg, aux, qs)
    m, l, acc = jax.lax.fori_loop(lo, hi, key_tile, init)
    seen = l > 0
    out = acc / jnp.moveaxis(jnp.where(seen, l, 1.0), 1, 2)[..., None]
    lse = jnp.where(seen, m + jnp.log(jnp.where(seen, l, 1.0)), -jnp.inf)
    return out.astype(v.dtype), lse

  out, lse = jax.lax.map(query_tile, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  out = jnp.moveaxis(out, 0, 1).reshape(b, cfg.num_q_tiles * cfg.bq, h, d)  # (nq, B, bq, H, D) -> (B, Lq, H, D)
  lse = jnp.moveaxis(lse, 0, 2).reshape(b, h, cfg.num_q_tiles * cfg.bq)
  return out, lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(cfg: _Config, q, k, v, theta, aux):
  return _forward(cfg, q, k, v, theta, aux)[0]


def _attention_fwd(cfg, q, k, v, theta, aux):
  out, lse = _forward(cfg, q, k, v, theta, aux)
  return out, (q, k, v, theta, aux, out, lse)


def _query_tile_rows(cfg, t, q, d_out, *per_row):
  """Query tile t's start and rows: q and d_out are (B, L, H, D) (rows on axis 1), per_row are (B, H, L)."""
  qs = t * cfg.bq
  rows = [jax.lax.dynamic_slice_in_dim(x, qs, cfg.bq, axis=1) for x in (q, d_out)]
  rows += [jax.lax.dynamic_slice_in_dim(x, qs, cfg.bq, axis=2) for x in per_row]
  return qs, rows


def _add_key_rows(cfg, ks, totals, parts):
  """Each (B, L, H, D) total plus its key tile's part at rows ks .. ks + bk."""
  return tuple(
      jax.lax.dynamic_update_slice_in_dim(
          total, jax.lax.dynamic_slice_in_dim(total, ks, cfg.bk, axis=1) + part.astype(total.dtype), ks, axis=1
      )
      for total, part in zip(totals, parts)
  )


def attention_bwd(cfg, residuals, d_out):
  q, k, v, theta, aux, out, lse = residuals
  d_out = d_out.astype(jnp.float32)
  # D_i = dO_i . O_i = sum_j P_ij dP_ij: the softmax's backward per row, once.
  delta = jnp.einsum('bihd,bihd->bhi', d_out, out.astype(jnp.float32))
  zeros = lambda x: jax.tree.map(jnp.zeros_like, x)

  def query_tile(carry, t):
    dk, dv, d_theta = carry
    qs, (q_t, do_t, lse_t, delta_t) = _query_tile_rows(cfg, t, q, d_out, lse, delta)

    def key_tile(n, inner):
      dq_t, dk, dv, d_theta = inner
      ks = n * cfg.bk
      tile = _tile(cfg, aux, qs, ks)
      local = _locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      s, logits_vjp = jax.vjp(lambda q_, k_, l_: _logits(cfg, aux, tile, q_, k_, l_), q_t, k_t, local)
      p = jnp.exp(s - lse_t[..., None])
      _, values_vjp = jax.vjp(lambda p_, v_, l_: _values(cfg, tile, p_, v_, l_), p, v_t, local)
      dp, dv_t, d_local_v = values_vjp(do_t)
      ds = p * (dp - delta_t[..., None])
      dq_part, dk_t, d_local_s = logits_vjp(ds)
      d_local = jax.tree.map(jnp.add, d_local_s, d_local_v)
      dk, dv = _add_key_rows(cfg, ks, (dk, dv), (dk_t, dv_t))
      dk = _add_halo_keys(cfg, dk, d_local, tile)
      return dq_t + dq_part.astype(jnp.float32), dk, dv, _accumulate(cfg, d_theta, d_local, tile, aux)

    lo, hi = _key_tile_range(cfg, aux, qs)
    dq_t = jnp.zeros(q_t.shape, jnp.float32)
    dq_t, dk, dv, d_theta = jax.lax.fori_loop(lo, hi, key_tile, (dq_t, dk, dv, d_theta))
    return (dk, dv, d_theta), dq_t

  init = (jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32), zeros(theta))
  (dk, dv, d_theta), dq = jax.lax.scan(query_tile, init, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  b, _, h, d = q.shape
  dq = jnp.moveaxis(dq, 0, 1).reshape(q.shape)
  return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), d_theta, None


_attention.defvjp(_attention_fwd, attention_bwd)


# ----------------------------------------------------------------------------------------------------------
# A normalizer instead of the softmax (stick-breaking): key tiles from the nearest to the farthest.
#
# Forward, per query tile: C = 0 (sum of log(1 - beta) over the allowed keys already visited, all nearer the
# query), then for each key tile, nearest first: (A, C) = tile_weights(s, allowed, C), acc += A v (+ a^V
# term), w += rowsum A. Outputs (acc, w); the remainder (1 - w) v_own is added outside, by plain autodiff.
#
# Backward: with g_ij = dL/dA_ij (from the values' VJP, plus the cotangent of w), A_ij depends on z_ij and on
# the carry entering its tile, which the nearer tiles' log(1 - beta) make up. The carry leaving a tile feeds
# every farther key, so its cotangent is sum_{farther j} g_ij A_ij = G_i - R_i, with G_i = sum_j g_ij A_ij =
# dacc_i . acc_i + dw_i w_i (known before the loop) and R_i the same sum over the tiles visited so far
# (this one included). Each tile is then `jax.vjp` of its own tile_weights: no (Lq, Lk) array.


def _reverse_key_tiles(cfg, aux, qs):
  lo, hi = _key_tile_range(cfg, aux, qs)
  return lo, hi, lambda i: hi - 1 - (i - lo)  # loop index -> key tile, nearest first


def _allowed(cfg, aux, tile, normalizer):
  valid = _valid(cfg, aux, tile)
  if valid is None:
    valid = jnp.ones((1, 1, cfg.bq, cfg.bk), bool)
  q_index = tile.qs + jnp.arange(cfg.bq, dtype=jnp.int32) + tile.q_offset
  return normalizer.allowed(valid, q_index, tile.ks + jnp.arange(cfg.bk, dtype=jnp.int32))


def _normalized_forward(cfg: _Config, q, k, v, theta, aux):
  b, _, h, d = q.shape
  normalizer = cfg.parts[cfg.normalizer]

  def query_tile(t):
    qs = t * cfg.bq
    q_t = jax.lax.dynamic_slice_in_dim(q, qs, cfg.bq, axis=1)
    lo, hi, key_tile_of = _reverse_key_tiles(cfg, aux, qs)

    def key_tile(i, carry):
      c, w, acc = carry
      ks = key_tile_of(i) * cfg.bk
      tile = _tile(cfg, aux, qs, ks)
      local = _locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      s = _logits(cfg, aux, tile, q_t, k_t, local)
      weights, c = normalizer.tile_weights(s, _allowed(cfg, aux, tile, normalizer), c)
      return c, w + jnp.sum(weights, axis=-1), acc + _values(cfg, tile, weights, v_t, local)

    init = (
        normalizer.initial_carry((b, h, cfg.bq)),
        jnp.zeros((b, h, cfg.bq), jnp.float32),
        jnp.zeros((b, cfg.bq, h, d), jnp.float32),
    )
    _, w, acc = jax.lax.fori_loop(lo, hi, key_tile, init)
    return acc, w

  acc, w = jax.lax.map(query_tile, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  acc = jnp.moveaxis(acc, 0, 1).reshape(b, cfg.num_q_tiles * cfg.bq, h, d)
  w = jnp.moveaxis(w, 0, 2).reshape(b, h, cfg.num_q_tiles * cfg.bq)
  return acc, w


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _normalized_attention(cfg: _Config, q, k, v, theta, aux):
  """(sum_j A_ij (v_j + a^V_ij) (B, Lq, H, D) float32, sum_j A_ij (B, H, Lq)) of a tiled normalizer."""
  return _normalized_forward(cfg, q, k, v, theta, aux)


def _normalized_fwd(cfg, q, k, v, theta, aux):
  acc, w = _normalized_forward(cfg, q, k, v, theta, aux)
  return (acc, w), (q, k, v, theta, aux, acc, w)


def _normalized_bwd(cfg, residuals, cotangents):
  q, k, v, theta, aux, acc, w = residuals
  d_acc, d_w = cotangents
  d_acc = d_acc.astype(jnp.float32)
  normalizer = cfg.parts[cfg.normalizer]
  total = jnp.einsum('bihd,bihd->bhi', d_acc, acc) + d_w * w  # G_i = sum_j g_ij A_ij
  zeros = lambda x: jax.tree.map(jnp.zeros_like, x)

  def query_tile(carry, t):
    dk, dv, d_theta = carry
    qs, (q_t, do_t, dw_t, total_t) = _query_tile_rows(cfg, t, q, d_acc, d_w, total)
    lo, hi, key_tile_of = _reverse_key_tiles(cfg, aux, qs)

    def key_tile(i, inner):
      dq_t, dk, dv, d_theta, c, seen = inner
      ks = key_tile_of(i) * cfg.bk
      tile = _tile(cfg, aux, qs, ks)
      local = _locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      s, logits_vjp = jax.vjp(lambda q_, k_, l_: _logits(cfg, aux, tile, q_, k_, l_), q_t, k_t, local)
      allowed = _allowed(cfg, aux, tile, normalizer)
      (weights, c_next), weights_vjp = jax.vjp(lambda s_, c_: normalizer.tile_weights(s_, allowed, c_), s, c)
      _, values_vjp = jax.vjp(lambda p_, v_, l_: _values(cfg, tile, p_, v_, l_), weights, v_t, local)
      d_weights, dv_t, d_local_v = values_vjp(do_t)
      g = d_weights + dw_t[..., None]
      seen = seen + jnp.sum(g * weights, axis=-1)
      # The carry into the farther tiles: its cotangent is what those tiles' weights still owe, G - R.
      ds, _ = weights_vjp((g, total_t - seen))
      dq_part, dk_t, d_local_s = logits_vjp(ds)
      d_local = jax.tree.map(jnp.add, d_local_s, d_local_v)
      dk, dv = _add_key_rows(cfg, ks, (dk, dv), (dk_t, dv_t))
      dk = _add_halo_keys(cfg, dk, d_local, tile)
      return dq_t + dq_part.astype(jnp.float32), dk, dv, _accumulate(cfg, d_theta, d_local, tile, aux), c_next, seen

    b, _, h, _ = q.shape
    init = (
        jnp.zeros(q_t.shape, jnp.float32),
        dk,
        dv,
        d_theta,
        normalizer.initial_carry((b, h, cfg.bq)),
        jnp.zeros((b, h, cfg.bq), jnp.float32),
    )
    dq_t, dk, dv, d_theta, _, _ = jax.lax.fori_loop(lo, hi, key_tile, init)
    return (dk, dv, d_theta), dq_t

  init = (jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32), zeros(theta))
  (dk, dv, d_theta), dq = jax.lax.scan(query_tile, init, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  dq = jnp.moveaxis(dq, 0, 1).reshape(q.shape)
  return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), d_theta, None


_normalized_attention.defvjp(_normalized_fwd, _normalized_bwd)


def _pad_axis(x, axis: int, size: int):
  if x.shape[axis] == size:
    return x
  widths = [(0, 0)] * x.ndim
  widths[axis] = (0, size - x.shape[axis])
  return jnp.pad(x, widths)


@dataclasses.dataclass(frozen=True)
class Prepared:
  """One call, ready for the tile loops: the static config, padded q, k, v, the position data and masks."""

  cfg: _Config
  q: jax.Array
  k: jax.Array
  v: jax.Array
  theta: dict
  aux: dict
  q_len: int


def prepare(
    query,
    key,
    value,
    *,
    parts,
    params,
    causal: bool,
    scale: float,
    key_mask=None,
    mask=None,
    q_offset=0,
    q_positions=None,
    k_positions=None,
    position_bias=None,
    block_size=None,
    features=None,
    one_tile: bool = False,
) -> Prepared:
  """Tiles, padding, and each part's prepared data (`_Tiler.prepare`, differentiable by plain autodiff)."""
  b, q_len, num_heads, _ = query.shape
  k_len = key.shape[1]
  bq, bk = (q_len, k_len) if one_tile else block_sizes(block_size)  # one_tile: the explicit path
  contiguous = q_positions is None
  q_offset = jnp.asarray(q_offset, jnp.int32)

  if features is None:
    features = [None] * len(parts)
  terms = [(part, p, f) for part, p, f in zip(parts, params, features) if part.kind is not Kind.ROTARY]
  if position_bias is not None:  # It replaces the scalar parts' own bias (functional.attend's contract).
    terms = [(part, p, f) for part, p, f in terms if part.kind is not Kind.SCALAR_BIAS]
  tilers = tuple(_tiler(part, contiguous, scale, one_tile) for part, _, _ in terms)
  if any(isinstance(t, _ReplacedContent) for t in tilers):
    tilers = tuple(dataclasses.replace(t, factor=scale) if isinstance(t, _RowColumnBias) else t for t in tilers)
  normalizers = [i for i, (part, _, _) in enumerate(terms) if part.kind is Kind.NORMALIZER]
  halos = [(part, t.halo) for (part, _, _), t in zip(terms, tilers) if isinstance(t, _ScoreTransform) and t.halo]
  halo = max((h for _, h in halos), default=0)
  if halos and (normalizers or len(halos) > 1):
    raise ValueError(
        f'tiled attention: {halos[0][0].name!r} reads {halo} neighbouring keys on each side of a logit; it tiles '
        'alone or beside softmax terms, not beside a normalizer or a second such transform; use implementation "einsum".'
    )
  if halo and min(bk, k_len) < halo and k_len > bk:
    raise ValueError(
        f'block_size={block_size!r}: key tiles of {bk} are narrower than the {halo} neighbouring keys '
        f'{halos[0][0].name!r} reads on each side of a logit; allowed: key tiles of at least {halo}.'
    )
  bq, bk = min(bq, q_len), max(min(bk, k_len), halo)  # one key tile of at least the halo (padding masked)
  num_q_tiles, num_k_tiles = -(-q_len // bq), -(-k_len // bk)
  padded_q, padded_k = num_q_tiles * bq, num_k_tiles * bk
  q_index = jnp.arange(q_len, dtype=jnp.int32) + q_offset
  if contiguous:
    q_pos = (jnp.arange(padded_q, dtype=jnp.int32) + q_offset)[None]
    k_pos = jnp.arange(padded_k, dtype=jnp.int32)[None]
  else:
    q_pos = _pad_axis(jnp.asarray(q_positions, jnp.int32), 1, padded_q)
    k_pos = _pad_axis(jnp.asarray(k_positions, jnp.int32), 1, padded_k)
  u = position_terms.query_biases([part for part, _, _ in terms], [p for _, p, _ in terms])
  # CoPE's gates read the plain q . k: beside a query bias u or a remap (which replaces q . k) it computes its own.
  if u is not None or any(isinstance(t, _Remap) for t in tilers):
    tilers = tuple(
        dataclasses.replace(t, shares_scores=False) if isinstance(t, _CountedPositions) else t for t in tilers
    )
  counted = [part for (part, _, _), t in zip(terms, tilers) if isinstance(t, _CountedPositions)]
  if counted and halo and not one_tile:
    raise ValueError(
        f'tiled attention: {counted[0].name!r} counts gates along the keys; it does not tile beside a score '
        'transform that reads neighbouring keys (DAPE version 2); use implementation "einsum".'
    )
  content_q, content_k = _pad_axis(query, 1, padded_q), _pad_axis(key, 1, padded_k)
  if u is not None:  # As _logits: the content queries carry Transformer-XL's u.
    content_q, content_k = content_q.astype(jnp.float32) + u, content_k.astype(jnp.float32)
  counts = None
  if any(part.kind is Kind.TEMPERATURE for part, _, _ in terms):
    counts = content_terms.visible_counts(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask)
  ctx = _Context(
      padded_q,
      padded_k,
      q_offset,
      q_index=q_index,
      key_mask=jnp.ones((b, k_len), bool) if key_mask is None else jnp.asarray(key_mask, bool),
      counts=counts,
      query=content_q,
      key=content_k,
      q_pos=jnp.broadcast_to(q_pos, (b, padded_q)),
      k_pos=jnp.broadcast_to(k_pos, (b, padded_k)),
  )
  theta = {
      'parts': [t.prepare(part, p, dataclasses.replace(ctx, feature=f)) for t, (part, p, f) in zip(tilers, terms)],
      'given': None,
      'u': u,
  }
  if position_bias is not None:
    bias = jnp.asarray(position_bias, jnp.float32)
    bias = bias[None] if bias.ndim == 3 else bias
    theta['given'] = _pad_axis(_pad_axis(bias, 2, padded_q), 3, padded_k)

  aux = {'q_offset': q_offset, 'q_pos': q_pos, 'k_pos': k_pos}
  if key_mask is not None:
    aux['key_mask'] = _pad_axis(jnp.asarray(key_mask, bool), 1, padded_k)
  if mask is not None:
    m = jnp.asarray(mask, bool)
    m = jnp.reshape(m, (1,) * (4 - m.ndim) + m.shape)
    m = jnp.broadcast_to(m, m.shape[:2] + (q_len, k_len))
    aux['mask'] = _pad_axis(_pad_axis(m, 2, padded_q), 3, padded_k)

  cfg = _Config(
      parts=tuple(part for part, _, _ in terms),
      tilers=tilers,
      given_bias=position_bias is not None,
      causal=bool(causal),
      scale=float(scale),
      bq=bq,
      bk=bk,
      num_q_tiles=num_q_tiles,
      num_k_tiles=num_k_tiles,
      k_len=k_len,
      has_key_mask=key_mask is not None,
      has_mask=mask is not None,
      normalizer=normalizers[0] if normalizers else None,
      halo=halo,
  )
  padded_query, padded_key = _pad_axis(query, 1, padded_q), _pad_axis(key, 1, padded_k)
  theta['parts'] = [
      t.complete(part, th, cfg, aux, padded_query, padded_key) for t, part, th in zip(tilers, cfg.parts, theta['parts'])
  ]
  return Prepared(cfg, padded_query, padded_key, _pad_axis(value, 1, padded_k), theta, aux, q_len)


def attend_one_tile(query, key, value, **kwargs) -> jax.Array:
  """The explicit path: the same per-kind Terms on one tile that holds every query and key ((B, H, Lq, Lk)
  scores), a plain softmax (or the normalizer's weights), differentiated by plain autodiff. Keywords as
  `prepare`; the one kind with no per-tile form, PaTH's replaced logit, is built whole here."""
  p = prepare(query, key, value, one_tile=True, **kwargs)
  cfg = p.cfg
  tile = _tile(cfg, p.aux, jnp.int32(0), jnp.int32(0))
  local = _locals(cfg, p.theta, tile, p.k, p.aux)
  s = _logits(cfg, p.aux, tile, p.q, p.k, local)
  if cfg.normalizer is None:
    return _values(cfg, tile, jax.nn.softmax(s, axis=-1), p.v, local)[:, : p.q_len].astype(value.dtype)
  normalizer = cfg.parts[cfg.normalizer]
  b, _, h, _ = p.q.shape
  carry = normalizer.initial_carry((b, h, cfg.bq))
  weights, _ = normalizer.tile_weights(s, _allowed(cfg, p.aux, tile, normalizer), carry)
  out = _values(cfg, tile, weights, p.v, local)
  return _with_remainder(p, value, out, jnp.sum(weights, axis=-1))


def _with_remainder(p: Prepared, value, out, w):
  """A normalizer's output: what the keys leave (1 - sum_j A_ij) goes to the query's own value if it says so."""
  out, w = out[:, : p.q_len], w[:, :, : p.q_len]
  if p.cfg.parts[p.cfg.normalizer].remainder_to_self:
    own_index = jnp.clip(jnp.arange(p.q_len, dtype=jnp.int32) + p.aux['q_offset'], 0, p.cfg.k_len - 1)
    own = jnp.take(value, own_index, axis=1).astype(jnp.float32)  # (B, Lq, H, D)
    out = out + jnp.moveaxis(1.0 - w, 1, 2)[..., None] * own
  return out.astype(value.dtype)


def attend(query, key, value, **kwargs) -> jax.Array:
  """`functional.attend`'s contract, blockwise (keywords as `prepare`): (B, Lq, H, D) in value's dtype.

  The caller (functional.attend) has checked the shapes and zeroes the queries that see no key.
  """
  p = prepare(query, key, value, **kwargs)
  if p.cfg.normalizer is None:
    return _attention(p.cfg, p.q, p.k, p.v, p.theta, p.aux)[:, : p.q_len]
  acc, w = _normalized_attention(p.cfg, p.q, p.k, p.v, p.theta, p.aux)
  return _with_remainder(p, value, acc, w)
