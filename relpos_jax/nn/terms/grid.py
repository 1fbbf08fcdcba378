"""Grid parts: the Terms of encoders that read coordinates (relpos_jax.grid), chosen by `select.term_for` by the
part's kind and by where the tokens sit (`where.Grid`: a static grid in raster order; `where.Coordinates`: explicit
coordinates (B, L, axes)):

  kind             on a Grid                                  at Coordinates
  ROTARY           GridRotation: q and k rotated at the tokens' coordinates, before attention
  SCALAR_BIAS      GridTableBias: the table of the prod(2n - 1)   GridCoordinateBias: the encoder's `pair_bias`
                   distinct offsets (its `prepare`), a tile        on each tile's pairs of coordinates
                   gathers its block; GridPairBias for a
                   query-dependent bias (fire2d: no table), its
                   `pair_bias` on each tile's pairs
  VECTOR_RELATIVE  GridScores (iRPE's contextual mode): its q, k and v terms per tile, from the tokens'
                   coordinates (on a Grid, its buckets at every offset); GridFeatureScores (PaPE): per tile, from
                   per-token features of the layer input x

The layer hands each part's Term its params once, outside attend (`Term.bind`: the coordinates checked against
the encoder, a learned table against the grid, and what the coordinate and feature Terms read packed
`with_coordinates` / `with_features`); attend then asks these Terms as it asks the 1-D ones, on every path (the
explicit path is the one-tile case, dot_product_attention takes a scalar bias whole: `whole_bias`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import grid as grid_lib
from relpos_jax.encoders import contract
from relpos_jax.nn import skew
from relpos_jax.nn.terms import base, vector


def grid_offset_index(q_index, k_index, shape, class_token: bool):
  """Int32 (..q, ..k): for flattened token indices of a grid in raster order (`shape` static, a class token at
  index 0 when `class_token`), the entry of the distinct-offset table that pair (i, j) reads: sum_a (r_ia - r_ja
  + n_a - 1) * stride_a, strides of the (2n - 1) per-axis offsets, last axis fastest (relpos_jax.grid.positions'
  `distinct_offsets` / `block_toeplitz_index` layout), and P = prod(2n - 1) (the class bucket, last) for a pair
  with the class token. Indices past the grid (tile padding) read a valid entry; their pairs are masked."""
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
  `GridPairBias.whole_bias` on all of them. A pair with the class token takes the encoder's `class_bias`, as its
  `pair_bias` at the CLASS_TOKEN coordinates does (relpos_jax.grid.contract)."""
  qc = grid_coordinates(q_index, shape, class_token)
  kc = grid_coordinates(k_index, shape, class_token)
  values = jnp.moveaxis(jnp.asarray(part.pair_bias(params, qc[:, None], kc[None, :]), jnp.float32), -1, 0)
  if class_token:
    cls = (jnp.asarray(q_index) == 0)[:, None] | (jnp.asarray(k_index) == 0)[None, :]
    values = jnp.where(cls[None], jnp.asarray(part.class_bias(params), jnp.float32)[:, None, None], values)
  return values


def bound_coordinates(part, where, x, shape=None):
  """The tokens' coordinates (B, L, axes) as `part` reads them (`part.coordinates`: trailing axis, finite values),
  a learned table checked against the grid `shape` when given (ValueError naming the encoder)."""
  coords = part.coordinates(where.coordinates(x.shape[0]))
  if shape is not None:
    part.check_grid(shape)
  return coords


@dataclasses.dataclass(frozen=True)
class GridRotation(base.Term):
  """q and k rotated at the tokens' coordinates (rope_axial, RoPE-Mixed, VideoRoPE, ...), in float32 and cast
  back, as the 1-D `inputs.Rotation`; `shape` the grid's (its learned tables checked in `bind`) or None."""

  stage = base.Stage.ROTATE
  kernel_form = True
  dot_product_form = True
  shape: tuple | None = None

  def bind(self, part, params, where, x):
    bound_coordinates(part, where, x, self.shape)
    return params

  def rotate(self, part, params, query, key, q_positions, k_positions):
    query = part.rotate_queries(params, query.astype(jnp.float32), part.coordinates(q_positions)).astype(query.dtype)
    key = part.rotate_keys(params, key.astype(jnp.float32), part.coordinates(k_positions)).astype(key.dtype)
    return query, key


def _check_heads(part, heads: int, ctx) -> None:
  expected = ctx.query.shape[2]
  if heads != expected:
    raise ValueError(
        f'attend: the grid part {part.name!r} of {heads} heads is invalid; allowed: parts of num_heads = {expected} '
        "heads (the queries')"
    )


@dataclasses.dataclass(frozen=True)
class GridTableBias(base.Term):
  """A relative grid bias on the grid `shape` (+ a class token first with `class_token`): `prepare` evaluates it
  once at the P = prod(2n - 1) distinct offsets (+ the class-token value last), an (H, P) table
  (`relpos_jax.grid.grid_bias_table`, the 2-D analogue of the 1-D Toeplitz bias's Lq + Lk - 1 values); each tile
  holds the whole table and gathers its (H, bq, bk) block at the offsets of its queries' and keys' flattened
  indices (`grid_offset_index`; its gradient a scatter-add into the table, O(P) per tile). Memory O(P + tile)
  instead of the (H, L, L) bias; the explicit path is the one-tile case."""

  stage = base.Stage.BIAS
  scalar_bias = True
  dot_product_form = True
  shape: tuple = ()
  class_token: bool = False

  def bind(self, part, params, where, x):
    bound_coordinates(part, where, x, self.shape)
    return params

  def prepare(self, part, params, ctx):
    table = jnp.asarray(grid_lib.grid_bias_table(part, params, self.shape, class_token=self.class_token), jnp.float32)
    _check_heads(part, table.shape[0], ctx)
    return table

  def block(self, table, q_index, k_index):
    """(H, q, k) float32: the bias of the pairs of flattened token indices q_index x k_index."""
    return jnp.take(table, grid_offset_index(q_index, k_index, self.shape, self.class_token), axis=-1)

  def bias(self, part, local, tile):
    q_index = tile.qs + jnp.arange(tile.bq, dtype=jnp.int32)
    k_index = tile.ks + jnp.arange(tile.bk, dtype=jnp.int32)
    return self.block(local, q_index, k_index)[None]

  def whole_bias(self, part, params, q_len, k_len, where):
    """(H, N, N): every pair's bias, gathered from the table (as relpos_jax.grid.positions.block_toeplitz)."""
    table = jnp.asarray(grid_lib.grid_bias_table(part, params, self.shape, class_token=self.class_token), jnp.float32)
    n = jnp.arange(q_len, dtype=jnp.int32)
    return self.block(table, n, n)

  def check_realised(self, part, params, where):
    """debug_checks: the bias over every pair is block-Toeplitz (`relpos_jax.grid.assert_block_toeplitz`)."""
    n = int(np.prod(self.shape)) + int(self.class_token)
    shape, cls = self.shape, self.class_token
    jax.debug.callback(
        lambda t: grid_lib.assert_block_toeplitz(t, shape, class_token=cls), self.whole_bias(part, params, n, n, where)
    )


@dataclasses.dataclass(frozen=True)
class GridPairBias(base.Term):
  """A query-dependent grid bias on the grid `shape` (fire2d, `is_toeplitz` False: its FIRE normaliser reads |p_i|,
  so its bias is no function of p_i - p_j and has no table of offsets): each tile evaluates the encoder's
  `pair_bias` on its own (bq, bk) pairs, from coordinates derived from the flattened indices (`grid_pair_bias`),
  O(tile x MLP width) memory; its params' gradients are summed over the tiles."""

  stage = base.Stage.BIAS
  scalar_bias = True
  dot_product_form = True
  shape: tuple = ()
  class_token: bool = False

  bind = GridTableBias.bind

  def prepare(self, part, params, ctx):
    _check_heads(part, contract.dims(params).num_heads, ctx)
    return params

  def bias(self, part, local, tile):
    q_index = tile.qs + jnp.arange(tile.bq, dtype=jnp.int32)
    k_index = tile.ks + jnp.arange(tile.bk, dtype=jnp.int32)
    return grid_pair_bias(part, local, q_index, k_index, self.shape, self.class_token)[None]

  def whole_bias(self, part, params, q_len, k_len, where):
    """(H, N, N): the per-tile form over every pair."""
    n = jnp.arange(q_len, dtype=jnp.int32)
    return grid_pair_bias(part, params, n, n, self.shape, self.class_token)


def with_coordinates(params, q_coords, k_coords, offset_buckets=None) -> dict:
  """What a grid vector part (`GridScores`) reads in `functional.attend`: its params and the coordinates of the
  queries (B, Lq, axes) and keys (B, Lk, axes) (a class token's are CLASS_TOKEN), as the layer hands them
  (`GridScores.bind`), and for a static grid the part's buckets at every offset (`offset_buckets`: what its tiles read instead of
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
  weights_form = True  # attention_weights rebuilds its q and k terms (its value term is not a weight)
  scale: float = 1.0
  shape: tuple | None = None  # on a grid: its buckets at every offset are read instead of each pair's

  def bind(self, part, params, where, x):
    """Its params with the coordinates (B, L, axes) of its queries and keys (self-attention) and, on a grid
    (`shape`), the part's buckets at the grid's every offset; the layer input is not read."""
    coords = bound_coordinates(part, where, x, self.shape)
    table = None if self.shape is None else part.offset_buckets(self.shape)
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
  """A scalar grid bias at explicit coordinates (the layer given positions (B, L, axes): Qwen2-VL
  style mixed sequences, shifted or float coordinates, where no table of distinct offsets exists): each tile
  evaluates its (B, H, bq, bk) block with the encoder's own `pair_bias` on its queries' and keys' coordinates,
  as `relpos_jax.grid.grid_bias_at_positions` does on every pair (class-token pairs included: CLASS_TOKEN
  coordinates take the encoder's `class_bias` there). The params arrive `with_coordinates`; their gradients are
  summed over the tiles, the coordinates take none. Memory O(tile) per tile (O(tile x MLP width) for fire2d and
  Swin v2's CPB) instead of the (B, H, L, L) bias; the explicit path is the one-tile case."""

  stage = base.Stage.BIAS
  scalar_bias = True
  dot_product_form = True  # taken whole (`whole_bias`) by dot_product_attention

  def bind(self, part, params, where, x):
    """Its params with the coordinates (B, L, axes) of its queries and keys (self-attention)."""
    coords = bound_coordinates(part, where, x)
    return with_coordinates(params, coords, coords)

  def whole_bias(self, part, params, q_len, k_len, where):
    """(B, H, Lq, Lk): every pair (`relpos_jax.grid.grid_bias_at_positions`)."""
    return grid_lib.grid_bias_at_positions(part, params['params'], params['q_coords'], params['k_coords'])

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
  reference's kernel scales q' . k'. The layer computes each token's features once, outside the tile
  loops, from x and the coordinates (`bind` -> `with_features`); a tile slices its (B, H, bq, F) and
  (B, H, bk, F) shares and adds their products, so no (L, L) array exists on the blockwise path (memory O(L F)),
  and the explicit path is the one-tile case. The features' gradients come back through attend's backward
  (`accumulate`, per tile into their rows)."""

  stage = base.Stage.SCORES
  weights_form = True  # attention_weights rebuilds its scores
  shape: tuple | None = None  # the grid's (a learned table checked against it), or None

  def bind(self, part, params, where, x):
    """The features of the tokens at their coordinates with layer input x (B, L, model_dim), self-attention
    (queries = keys)."""
    coords = bound_coordinates(part, where, x, self.shape)
    return with_features(*part.features(params, x, coords, coords))

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
