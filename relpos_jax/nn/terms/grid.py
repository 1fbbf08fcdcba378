"""Grid parts: a scalar bias given by its distinct offsets and its query-dependent parts (`GridTable`, gathered or
evaluated per tile by `GridTableBias`: memory O(P + tile) instead of (H, L, L)), a vector-relative grid part,
iRPE's contextual mode (`GridScores`: its q, k and v terms per tile, from the tokens' coordinates), and a score
term of the layer input (`GridFeatureScores`, PaPE: per tile, from per-token features computed once); at explicit
coordinates (no grid shape, so no table) a scalar grid bias is evaluated per tile from the tokens' coordinates
(`GridCoordinateBias`).

The attention layer takes grid encoders (`is_grid`) on its grid path (`relpos_jax.nn.attention`): it rotates
q and k itself, adds a grid bias as a precomputed `position_bias`, and hands the other parts to
`functional.attend`, a grid vector part with the coordinates of its queries and keys (`with_coordinates`). A grid
rotation or absolute part gets the 1-D Term of its kind (`select.term_for`); a grid scalar bias gets
`GridCoordinateBias` (which the layer hands attend, with the coordinates, only on the tiled path at explicit
coordinates); a grid vector part gets `GridScores` (PaPE, which reads the layer input: `GridFeatureScores`); the
layer asks these Terms for their params in attend (`grid_params`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax.nn import skew
from relpos_jax.nn.terms import base, vector


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


def grid_coordinates(index, shape, class_token: bool):
  """Int32 (n, axes): the grid coordinates of flattened token indices (raster order, last axis fastest; a class
  token at index 0 when `class_token`, given token 0's coordinates: its pairs are overwritten by the encoder's
  `class_bias`). Indices past the grid (tile padding) read a valid coordinate; their pairs are masked."""
  n_tokens = int(np.prod(shape))
  rest = jnp.clip(jnp.asarray(index, jnp.int32) - int(class_token), 0, n_tokens - 1)
  coords = []
  for n in shape[::-1]:
    coords.append(rest % n)
    rest = rest // n
  return jnp.stack(coords[::-1], axis=-1)


def grid_pair_bias(part, params, q_index, k_index, shape, class_token: bool):
  """(H, q, k) float32: a query-dependent grid bias (fire2d: `pair_bias` reads p_i itself, not only p_i - p_j)
  evaluated on the pairs of the flattened token indices q_index x k_index of the grid `shape`, from their
  coordinates (`grid_coordinates`). What a tile of the blockwise path evaluates on its own (bq, bk) pairs, and
  `GridTable.dense` on all of them. A pair with the class token takes the encoder's `class_bias`, as its
  `pair_bias` at the CLASS_TOKEN coordinates does (relpos_jax.grid.contract)."""
  qc = grid_coordinates(q_index, shape, class_token)
  kc = grid_coordinates(k_index, shape, class_token)
  values = jnp.moveaxis(jnp.asarray(part.pair_bias(params, qc[:, None], kc[None, :]), jnp.float32), -1, 0)
  if class_token:
    cls = (jnp.asarray(q_index) == 0)[:, None] | (jnp.asarray(k_index) == 0)[None, :]
    values = jnp.where(cls[None], jnp.asarray(part.class_bias(params), jnp.float32)[:, None, None], values)
  return values


@dataclasses.dataclass(frozen=True)
class GridTable:
  """A scalar grid bias over the tokens of the grid `shape` in raster order (+ a class token first with
  `class_token`), kept in a form a tile can evaluate on its own:

    values        (H, P) float32 or None: the relative biases summed at the P = prod(2n - 1) distinct offsets
                  (+ one class-token column last with `class_token`); a tile gathers its block.
    pair_parts    query-dependent grid biases (fire2d, `is_toeplitz` False: its FIRE normaliser reads |p_i|, so
                  its bias is no function of p_i - p_j and has no table), with `pair_params` their params: a tile
                  evaluates each on its own (bq, bk) pairs (`grid_pair_bias`), O(tile x MLP width) memory.

  `functional.attend` takes it as `position_bias`: the blockwise path evaluates each tile's block (`GridTableBias`,
  memory O(P + tile) instead of (H, L, L)); the untiled paths take `dense()`."""

  values: jax.Array | None
  shape: tuple
  class_token: bool = False
  pair_parts: tuple = ()
  pair_params: tuple = ()

  @property
  def num_tokens(self) -> int:
    return int(np.prod(self.shape)) + int(self.class_token)

  def term(self) -> 'GridTableBias':
    """The blockwise path's Term for it (static: hashable, no arrays)."""
    return GridTableBias(tuple(self.shape), bool(self.class_token), tuple(self.pair_parts), self.values is not None)

  def theta(self):
    """What the blockwise path differentiates: the table's values and the pair parts' params."""
    values = None if self.values is None else jnp.asarray(self.values, jnp.float32)
    return {'values': values, 'pairs': list(self.pair_params)}

  def dense(self) -> jax.Array:
    """(H, N, N): every pair's bias (one gather, as relpos_jax.grid.positions.block_toeplitz, plus every pair
    part evaluated on all N x N pairs)."""
    n = jnp.arange(self.num_tokens, dtype=jnp.int32)
    return self.term().block(self.theta(), n, n)


@dataclasses.dataclass(frozen=True)
class GridTableBias(base.Term):
  """A grid bias in its tileable form (`GridTable`): the tile holds the whole (H, P) table (small: the 2-D
  analogue of the 1-D Toeplitz bias's Lq + Lk - 1 values) and gathers its (H, bq, bk) block at the offsets of its
  queries' and keys' flattened indices (its gradient is a scatter-add into the table, O(P) per tile), and
  evaluates each query-dependent part on its own pairs (its gradient: that part's params, per tile)."""

  stage = base.Stage.BIAS

  shape: tuple
  class_token: bool = False
  pair_parts: tuple = ()
  has_values: bool = True

  def local(self, theta, tile):
    return theta

  def block(self, theta, q_index, k_index):
    """(H, q, k) float32: the bias of the pairs of flattened token indices q_index x k_index."""
    out = None
    if self.has_values:
      out = jnp.take(theta['values'], grid_offset_index(q_index, k_index, self.shape, self.class_token), axis=-1)
    for part, params in zip(self.pair_parts, theta['pairs']):
      term = grid_pair_bias(part, params, q_index, k_index, self.shape, self.class_token)
      out = term if out is None else out + term
    return out

  def bias(self, part, local, tile):
    q_index = tile.qs + jnp.arange(tile.bq, dtype=jnp.int32)
    k_index = tile.ks + jnp.arange(tile.bk, dtype=jnp.int32)
    return self.block(local, q_index, k_index)[None]


def with_coordinates(params, q_coords, k_coords, offset_buckets=None) -> dict:
  """What a grid vector part (`GridScores`) reads in `functional.attend`: its params and the coordinates of the
  queries (B, Lq, axes) and keys (B, Lk, axes) (a class token's are CLASS_TOKEN), as the layer's grid path hands
  them, and for a static grid the part's buckets at every offset (`offset_buckets`: what its tiles read instead of
  bucketing each pair; only for coordinates on that grid, as the layer given `grid_shape` hands them: each pair's
  offset is its index into the table). The coordinates and buckets travel as float32 (exact: real coordinates are at most 2^22,
  buckets far fewer) and get no gradient."""
  out = {'params': params}
  named = {'q_coords': q_coords, 'k_coords': k_coords, 'offset_buckets': offset_buckets}
  for name, value in named.items():
    if value is not None:
      out[name] = jax.lax.stop_gradient(jnp.asarray(value, jnp.float32))
  return out


@dataclasses.dataclass(frozen=True)
class GridScores(base.Term):
  """A vector-relative grid part (iRPE's contextual mode, relpos_jax.grid.encoders.irpe): per tile, each pair's
  buckets from its query's and key's coordinates (`pair_buckets`, (B, bq, bk) per table), a 'bucketed' relative
  table of the encoder's rows (`skew.bucketed_table`), read by the vector kind's own kernels:

    on keys     (s q_i) . r^K_{b(p_i - p_j)}          `vector.vector_scores` (queries projected on the rows once)
    on queries  (s k_j) . r^Q_{b(p_j - p_i)}          the same projection of the keys, gathered transposed
                                                      (`content`: a bias, since `scores` sees the queries only)
    on values   sum_j a_ij r^V_{b(p_i - p_j)}         `vector.vector_values` (weights aggregated per bucket)

  with s the softmax scale (the Term's `scale`). A tile holds (B, H, bq, R) projections and (B, bq, bk) buckets,
  never an (L, L) array; the explicit path is the one-tile case. The params arrive `with_coordinates`."""

  stage = base.Stage.SCORES
  scale: float = 1.0

  def grid_params(self, part, params, coords, inputs, grid_shape=None):
    """What the layer's grid path hands `functional.attend` for this part: its params with the coordinates
    (B, L, axes) of its queries and keys (self-attention) and, on a static grid (`grid_shape`), the part's
    buckets at the grid's every offset; the layer input is not read."""
    del inputs
    table = None if grid_shape is None else part.offset_buckets(grid_shape)
    return with_coordinates(params, coords, coords, offset_buckets=table)

  def prepare(self, part, params, ctx):
    keys = {'params', 'q_coords', 'k_coords'}
    if not (isinstance(params, dict) and set(params) in (keys, keys | {'offset_buckets'})):
      raise ValueError(
          f'attend: the grid part {part.name!r} reads the coordinates of its queries and keys: pass its params as '
          'terms.grid.with_coordinates(params, q_coords, k_coords) (the attention layer does, given grid_shape or '
          'positions (batch, length, axes)).'
      )
    # The tiles' padding repeats the last token's coordinates rather than zeros: a padded pair is masked, yet a
    # learned window (swin, GridCoordinateBias) makes an offset beyond it NaN, which would reach the gradients;
    # repeated coordinates keep every padded offset one of the real ones.
    b = ctx.key_mask.shape[0]

    def pad(c, length):
      c = jnp.broadcast_to(c, (b,) + c.shape[1:])
      return jnp.pad(c, ((0, 0), (0, length - c.shape[1]), (0, 0)), mode='edge')

    return {
        **params,
        'q_coords': pad(params['q_coords'], ctx.padded_q_len),
        'k_coords': pad(params['k_coords'], ctx.padded_k_len),
    }

  def local(self, theta, tile):
    return {
        **theta,
        'q_coords': jax.lax.dynamic_slice_in_dim(theta['q_coords'], tile.qs, tile.bq, axis=1),
        'k_coords': jax.lax.dynamic_slice_in_dim(theta['k_coords'], tile.ks, tile.bk, axis=1),
    }

  def accumulate(self, acc, d_local, tile):
    params = jax.tree.map(jnp.add, acc['params'], d_local['params'])
    return {**acc, 'params': params}  # the coordinates (and offset buckets) take no gradient

  def _tables(self, part, local, rows, cols):
    """One 'bucketed' table per encoder table: pairs (rows, cols) read the bucket of p_row - p_col (from the
    offset buckets of a static grid, else from each pair's coordinates)."""
    table = local.get('offset_buckets')
    table = None if table is None else table.astype(jnp.int32)
    buckets = part.pair_buckets(local[rows], local[cols], offset_buckets=table)  # (B, rows, cols, tables)
    return [skew.bucketed_table(part.table_rows(t), buckets[..., t]) for t in range(buckets.shape[-1])]

  def scores(self, part, local, q_t, tile):
    tables = self._tables(part, local, 'q_coords', 'k_coords')
    terms = [vector.vector_scores(part, local['params'], q_t, table) for table in tables]
    return None if terms[0] is None else sum(terms)  # None: no table on the keys

  def content(self, part, local, content_q, k_t, scores, tile, valid=None, query=None):
    total = None
    for table in self._tables(part, local, 'k_coords', 'q_coords'):
      rows = part.query_embeddings(local['params'], table.rows)  # (R, H, D), None: no table on the queries
      if rows is None:
        return scores, None
      projected = jnp.einsum('bjhd,rhd->bhjr', k_t.astype(jnp.float32), rows)  # each key against each row, once
      term = jnp.swapaxes(skew.gather_rows(projected, table), -1, -2)  # (B, H, bq, bk)
      total = term if total is None else total + term
    return scores, total * np.float32(self.scale)

  def values(self, part, local, p_t, tile):
    tables = self._tables(part, local, 'q_coords', 'k_coords')
    terms = [vector.vector_values(part, local['params'], p_t, table) for table in tables]
    return None if terms[0] is None else sum(terms)  # None: no table on the values


@dataclasses.dataclass(frozen=True)
class GridCoordinateBias(base.Term):
  """A scalar grid bias at explicit coordinates (the layer's grid path given positions (B, L, axes): Qwen2-VL
  style mixed sequences, shifted or float coordinates, where no table of distinct offsets exists): each tile
  evaluates its (B, H, bq, bk) block with the encoder's own `pair_bias` on its queries' and keys' coordinates,
  as `relpos_jax.grid.grid_bias_at_positions` does on every pair (class-token pairs included: CLASS_TOKEN
  coordinates take the encoder's `class_bias` there). The params arrive `with_coordinates`; their gradients are
  summed over the tiles, the coordinates take none. Memory O(tile) per tile (O(tile x MLP width) for fire2d and
  Swin v2's CPB) instead of the (B, H, L, L) bias; the explicit path is the one-tile case."""

  stage = base.Stage.BIAS
  scalar_bias = True

  def grid_params(self, part, params, coords, inputs, grid_shape=None):
    """What the layer's grid path hands `functional.attend` for this part: its params with the coordinates
    (B, L, axes) of its queries and keys (self-attention); the layer input is not read (nor a grid shape: the
    layer hands this Term only explicit coordinates)."""
    del inputs, grid_shape
    return with_coordinates(params, coords, coords)

  prepare = GridScores.prepare
  local = GridScores.local
  accumulate = GridScores.accumulate

  def bias(self, part, local, tile):
    q, k = local['q_coords'], local['k_coords']
    values = part.pair_bias(local['params'], q[:, :, None, :], k[:, None, :, :])  # (B, bq, bk, H)
    return jnp.moveaxis(jnp.asarray(values, jnp.float32), -1, 1)


def with_features(query_features, key_features) -> dict:
  """What a grid score term of the layer input (`GridFeatureScores`, PaPE) reads in `functional.attend`: the
  per-token features the encoder appends to q and k (`features`), of the queries (B, H, Lq, F) and of the keys
  (B, H, Lk, F), computed once outside the tile loops. They are differentiable: attend returns their gradients,
  and the gradient to x and the encoder's params flows on through `features` by plain autodiff."""
  return {'q_features': jnp.asarray(query_features, jnp.float32), 'k_features': jnp.asarray(key_features, jnp.float32)}


@dataclasses.dataclass(frozen=True)
class GridFeatureScores(base.Term):
  """A grid score term of the layer input x at coordinates (kind VECTOR_RELATIVE with `reads_inputs`: PaPE's
  parabolas, whose curvature and tilt are projections of the query token's x), in the reference's own form
  (DTU-PAS/parabolic-position-encoding, `encode_query_key`: features appended to q and k): the unscaled score of
  pair (i, j) is q'_i . k'_j over the F appended features, scaled with q . k by the softmax scale, as the
  reference's kernel scales q' . k'. The layer's grid path computes each token's features once, outside the tile
  loops, from x and the coordinates (`grid_params` -> `with_features`); a tile slices its (B, H, bq, F) and
  (B, H, bk, F) shares and adds their products, so no (L, L) array exists on the blockwise path (memory O(L F)),
  and the explicit path is the one-tile case. The features' gradients come back through attend's backward
  (`accumulate`, per tile into their rows)."""

  stage = base.Stage.SCORES

  def grid_params(self, part, params, coords, inputs, grid_shape=None):
    """What the layer's grid path hands `functional.attend` for this part: the features of the tokens at
    `coords` (B, L, axes) with layer input `inputs` (B, L, model_dim), self-attention (queries = keys)."""
    del grid_shape
    return with_features(*part.features(params, inputs, coords, coords))

  def prepare(self, part, params, ctx):
    if not (isinstance(params, dict) and set(params) == {'q_features', 'k_features'}):
      raise ValueError(
          f'attend: the grid part {part.name!r} reads per-token features of the layer input (the terms it appends '
          'to q and k): pass its params as terms.grid.with_features(*encoder.features(params, x, q_coords, '
          'k_coords)) (the attention layer does, given grid_shape or positions (batch, length, axes)).'
      )
    b = ctx.key_mask.shape[0]
    q_f, k_f = params['q_features'], params['k_features']
    pad = lambda f, length: base.pad_axis(jnp.broadcast_to(f, (b,) + f.shape[1:]), 2, length)
    return {'q_features': pad(q_f, ctx.padded_q_len), 'k_features': pad(k_f, ctx.padded_k_len)}

  def local(self, theta, tile):
    return {
        'q_features': jax.lax.dynamic_slice_in_dim(theta['q_features'], tile.qs, tile.bq, axis=2),
        'k_features': jax.lax.dynamic_slice_in_dim(theta['k_features'], tile.ks, tile.bk, axis=2),
    }

  def accumulate(self, acc, d_local, tile):
    out = {}
    for name, first in (('q_features', tile.qs), ('k_features', tile.ks)):
      update = d_local[name]
      share = jax.lax.dynamic_slice_in_dim(acc[name], first, update.shape[2], axis=2)
      out[name] = jax.lax.dynamic_update_slice_in_dim(acc[name], share + update, first, axis=2)
    return out

  def scores(self, part, local, q_t, tile):
    return jnp.einsum('bhif,bhjf->bhij', local['q_features'], local['k_features'], precision=jax.lax.Precision.HIGHEST)
