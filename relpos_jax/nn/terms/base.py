"""The Term contract: what one attention part contributes to a tile of queries x keys, and the tile itself.

Every path asks the same Terms (the explicit path is the one-tile case, `blockwise.explicit`; the blockwise
kernel asks them tile by tile; the Pallas kernel takes those with a kernel form). A Term prepares its data
once, outside the tile loops (`prepare`, then `complete` once the tiles are known, by plain autodiff); a
tile reads its share (`local`) and the Term adds content, scores, a bias, a transform of the logits or a
value term for that tile; `accumulate` adds a tile's gradient back. Which Term a part gets is decided in
one place, `select.term_for` (the only module of relpos_jax.nn that compares an encoder's kind); everything
else asks the Term: its `stage` (where the tile loops fold it) and the traits and methods declared on `Term`.

The tile: `tile_at` (its positions) and `tile_mask` (which of its pairs may attend; one function, read by
every path, so a new mask is one edit).
"""

from __future__ import annotations

import dataclasses
import enum

import jax
import jax.numpy as jnp


class Stage(enum.Enum):
  """Where a Term acts, in the order a tile's logits fold them (`blockwise.logits`):

  INPUT            before the layer: the model adds an absolute embedding to its input (x + p_i).
  ROTATE           before attention: q and k rotated at their positions (nothing per tile).
  CONTENT          the content logit q . k merged or replaced (a remap's regions, PaTH), or a term read from
                   it (CoPE's counted gates), via `Term.content`.
  SCORES           unscaled position scores from the queries (`Term.scores`) and a value term (`Term.values`).
  BIAS             a bias added to the scaled scores (`Term.bias`).
  SCORE_TRANSFORM  the summed logits corrected by a function of them (DAPE), after every score and bias.
  ROW_TRANSFORM    the logits of each query row rescaled (`Term.transform`: a temperature), after that.
  NORMALIZER       replaces the softmax: the kernel folds the encoder's `tile_weights` (stick-breaking).
  """

  INPUT = 'input'
  ROTATE = 'rotate'
  CONTENT = 'content'
  SCORES = 'scores'
  BIAS = 'bias'
  SCORE_TRANSFORM = 'score_transform'
  ROW_TRANSFORM = 'row_transform'
  NORMALIZER = 'normalizer'


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


def start(*index):
  """A dynamic_slice start of one index type (int32): a literal 0 is int64 under jax_enable_x64."""
  return tuple(jnp.asarray(i, jnp.int32) for i in index)


def slice_diagonals(x, tile: Tile, axis: int):
  """The tile's bq + bk - 1 distinct relative positions' entries of x (laid out along `axis`)."""
  return jax.lax.dynamic_slice_in_dim(x, tile.diagonal_start, tile.bq + tile.bk - 1, axis=axis)


def add_diagonals(acc, update, tile: Tile, axis: int):
  """acc plus a tile's gradient of its `slice_diagonals` share."""
  first = tile.diagonal_start
  size = tile.bq + tile.bk - 1
  return jax.lax.dynamic_update_slice_in_dim(
      acc, jax.lax.dynamic_slice_in_dim(acc, first, size, axis=axis) + update, first, axis=axis
  )


def slice_rows(x, first, size):
  """The tile's share (..., size) of per-position values (..., L) on the last axis."""
  return jax.lax.dynamic_slice_in_dim(x, first, size, axis=-1)


def add_rows(acc, update, first):
  """acc plus a tile's gradient of its `slice_rows` share."""
  size = update.shape[-1]
  return jax.lax.dynamic_update_slice_in_dim(acc, slice_rows(acc, first, size) + update, first, axis=-1)


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
  autodiff); `local` picks the tile's share of the prepared data, `accumulate` adds its gradient back.

  Declared traits (class attributes; what the layer, the paths and the kernels ask instead of a kind):

    stage             `Stage`: where the tile loops fold it (and which act outside them: INPUT, ROTATE).
    tiles             it has a per-tile form (else the tiled paths refuse it, `select.terms_for`).
    kernel_form       the Pallas kernel (`pallas_attention`) has its per-tile form.
    per_pair_work     it does elementwise work of its own on every (query, key) pair beyond the scores (the
                      kernel takes smaller default tiles on a CPU, blockwise.PER_PAIR_BLOCK_SIZE).
    scalar_bias       it adds a scalar b_h(i, j): a precomputed `position_bias` replaces it, and
                      dot_product_attention takes it as its bias (`parts.scalar_bias`).
    toeplitz          that bias is Toeplitz (built from its Lq + Lk - 1 distinct values).
    dot_product_form  jax.nn.dot_product_attention computes it (a scalar bias, a rotation, nothing inside).
    weights_form      `attention_weights` rebuilds it in the weights (those with `dot_product_form`, and the
                      grid's score terms).
    reads_content     it reads the scores or the content (the layer checks its token features).
    replaces_softmax  a normalizer: its weights replace the softmax's.
    carries           it carries state per query row across the key tiles of a query tile (PaTH: the query
                      transported through the tiles between): the tile loops visit key tiles nearest first
                      and thread `initial_carry` through `carry`, the backward runs its adjoint farthest first.

  Methods the layer asks outside the tile loops (defaults: the part does none of it): `bind` (the params as
  attend reads them at the call's positions: a grid part's coordinates checked and packed), `num_features` and
  `token_features` (a contextual part's per-token features, kept in the KV cache), `query_bias`
  (Transformer-XL's content bias u), `row_factor` (a temperature's t_h(n_i)), `embed` (an absolute
  embedding) and `rotate` (a rotation of q and k); and for a scalar bias, `whole_bias` (every pair, for
  dot_product_attention) and `check_realised` (debug_checks).
  """

  stage = None  # every Term declares its own `Stage`
  tiles = True
  kernel_form = False
  per_pair_work = False
  scalar_bias = False
  toeplitz = False
  dot_product_form = False
  reads_content = False
  carries = False

  @property
  def replaces_softmax(self) -> bool:
    return self.stage is Stage.NORMALIZER

  @property
  def weights_form(self) -> bool:
    return self.dot_product_form

  # ---- outside the tile loops

  def bind(self, part, params, where, x):
    """The params attend reads for this part when the layer input x (B, L, model_dim) sits at `where` (a
    `where.Positions`, `Grid` or `Coordinates`): the params themselves, but for the grid parts' Terms."""
    return params

  def whole_bias(self, part, params, q_len: int, k_len: int, where):
    """A scalar bias over every pair, float32 (H or B, H, Lq, Lk), at `where`; None for other Terms."""
    return None

  def check_realised(self, part, params, where) -> None:
    """debug_checks: a check of the bias it realises (a grid table's block-Toeplitz form); none by default."""

  def num_features(self, part, dims_) -> int:
    """The size of the per-token features the part keeps in the KV cache (0: none)."""
    return 0

  def token_features(self, part, params, x):
    """Its token features of the layer input x (B, L, model_dim): (B, L, F) or None."""
    return None

  def query_bias(self, part, params):
    """A content bias u (H, D) added to the queries of q . k, or None."""
    return None

  def row_factor(self, part, params, counts, q_index):
    """A factor (B or 1, H, Lq) of each query row's logits, from the keys it sees (`counts`), or None."""
    return None

  def embed(self, part, params, positions):
    """An embedding (B, L, model_dim) the model adds to its input at int `positions`, or None."""
    return None

  def rotate(self, part, params, query, key, q_positions, k_positions):
    """(q, k) after this part: rotated at their positions by a rotary part, unchanged otherwise."""
    return query, key

  # ---- the tile loops

  def prepare(self, part, params, ctx):
    return params

  def complete(self, part, theta, cfg, aux, q, k):
    """The prepared data once the tiles are known (`prepare` runs before): a carry over tiles goes here."""
    return theta

  def local(self, theta, tile: Tile):
    return theta

  def accumulate(self, acc, d_local, tile: Tile):
    return jax.tree.map(jnp.add, acc, d_local)

  def initial_carry(self, part, q_t):
    """A `carries` Term's carry entering a query tile's nearest key tile, for its queries q_t (B, bq, H, D)."""
    return None

  def carry(self, part, local, q_t, k_t, carry, tile: Tile):
    """A `carries` Term's step on a tile, before its `content`: (its share with what the carry gives the tile,
    the carry into the next farther key tile)."""
    return local, carry

  def content(self, part, local, content_q, k_t, scores, tile: Tile, valid=None, query=None):
    """(the content scores, replaced or None to keep q . k, a bias or None): a remap merges its sets here.
    `valid`: the tile's mask (None: nothing masked); `query`: the queries without a query bias u."""
    return scores, None

  def scores(self, part, local, q_t, tile: Tile):
    """Unscaled position scores (B, H, bq, bk) float32 from the queries q_t (B, bq, H, D), or None."""
    return None

  def bias(self, part, local, tile: Tile):
    """(B or 1, H, bq, bk) float32 added to the scaled scores, or None."""
    return None

  def transform(self, part, local, s, tile: Tile):
    """The tile's logits after every score and bias (a temperature scales them per row)."""
    return s

  def values(self, part, local, p_t, tile: Tile):
    """The output term (B, bq, H, D) float32 of the weights p_t (B, H, bq, bk), or None."""
    return None


@dataclasses.dataclass(frozen=True)
class Contextual(Term):
  """A contextual part (FoX, CoPE, PaTH): it reads the content, and per-token features of the layer input x
  that the layer computes for the tokens it sees and keeps in its KV cache (`token_features`)."""

  stage = Stage.CONTENT
  reads_content = True

  def num_features(self, part, dims_) -> int:
    return part.num_features(dims_)

  def token_features(self, part, params, x):
    return part.token_features(params, x)


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
  configuration, blockwise.TileConfig; `aux`: its positions, offsets and masks)."""
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
    m = jax.lax.dynamic_slice(m, start(0, 0, tile.qs, tile.ks), m.shape[:2] + (cfg.bq, tile.bk))
    valid = m if valid is None else valid & m
  if cfg.has_segments:  # packed documents: a query sees the keys of its own document only
    q_seg = jax.lax.dynamic_slice_in_dim(aux['q_segment_ids'], tile.qs, cfg.bq, axis=1)
    k_seg = jax.lax.dynamic_slice_in_dim(aux['k_segment_ids'], tile.ks, tile.bk, axis=1)
    same = (q_seg[:, :, None] == k_seg[:, None, :])[:, None]  # (B, 1, bq, bk): the tile's ids, O(bq + bk) read
    valid = same if valid is None else valid & same
  return valid
