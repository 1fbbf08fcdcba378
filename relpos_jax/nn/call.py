"""What one attention call takes, as values: where its tokens sit, its inputs and its settings.

    positions = Positions(offset, query, key, query_segments, key_segments)   # 1-D: an offset, explicit
              | Grid(shape, class_token, segments)                         # positions, document ids; a grid
              | Coordinates(values, segments)                              # or each token's coordinates
    inputs    = AttentionInputs.checked(query, key, value, positions, key_mask, mask, features, bias)
    settings  = AttentionSettings.checked(implementation, block_size, window, causal, debug_checks, dtype)
    out       = functional.attend(inputs, parts, params, settings)            # the kernel: settings.path(...)

Each value is checked once, where it is built (`checked`: a ValueError naming the bad value and what is
allowed); the paths after it (`functional`, `blockwise`, `explicit`, `pallas_attention`) read its fields and never
check them again. `functional.attend` hands each path a derived `AttentionInputs` (the sliding window and the
document mask folded into `mask`, non-finite masked keys zeroed) built with `dataclasses.replace`, not re-checked.

Why values and not keywords: `attend` took 19 keywords and the tile loop's `prepare` 18, the same list copied
through every path. The positions' type is part of the call: `terms.select.term_for` chooses each part's Term by
its kind and by whether the tokens sit at 1-D `Positions`, on a `Grid` (a grid bias then gathers from its table of
distinct offsets, the Term's `prepare`) or at `Coordinates` (each pair evaluated), so a grid goes through the same
Terms and paths as a sequence. The value types live in `terms.where` (below `select`, which compares them) and are
re-exported here; `position_value` turns a layer's keywords into one of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from relpos_jax import checks
from relpos_jax import validation
from relpos_jax.nn import blockwise, terms
from relpos_jax.nn.terms.where import Coordinates, Grid, Positions

IMPLEMENTATIONS = (None, 'xla', 'cudnn', 'einsum', 'blockwise', 'pallas')
# The implementations that run in tiles and take a `block_size`.
TILED_IMPLEMENTATIONS = ('blockwise', 'pallas')
# What `AttentionSettings.path` returns: the one place that chooses the kernel.
PATHS = ('dot_product', 'explicit', 'blockwise', 'pallas')


def check_implementation(implementation) -> None:
  validation.choice('attention', 'implementation', implementation, IMPLEMENTATIONS)


def check_block_size(implementation, block_size) -> None:
  """block_size is None, or valid for a tiled implementation (ValueError otherwise)."""
  if block_size is None:
    return
  if implementation not in TILED_IMPLEMENTATIONS:
    raise ValueError(
        f'block_size={block_size!r} is only used by the tiled attention implementations '
        f'{TILED_IMPLEMENTATIONS}; implementation={implementation!r} has no tiles (drop block_size).'
    )
  blockwise.block_sizes(block_size)


@dataclasses.dataclass(frozen=True)
class AttentionInputs:
  """query (B, Lq, H, D), already rotated if a part is rotary; key, value (B, Lk, H, D); `positions` (a
  `Positions`, or a `Grid` / `Coordinates` of self-attention: the grid parts' Terms read it); `key_mask` (B, Lk) bool, True = a real key (padding, or the filled part of a cache); `mask` any
  further bool mask broadcastable to (B, H, Lq, Lk), True = attend; `features` per part, the contextual parts'
  token features of the keys (B, Lk, F) or None; `bias` a precomputed scalar bias (H or B, H, Lq, Lk) (e.g.
  shared across layers) replacing the scalar parts' own."""

  query: jax.Array
  key: jax.Array
  value: jax.Array
  positions: Positions = Positions()
  key_mask: jax.Array | None = None
  mask: jax.Array | None = None
  features: Any = None
  bias: jax.Array | None = None

  @classmethod
  def checked(
      cls, query, key, value, positions=None, key_mask=None, mask=None, features=None, bias=None
  ) -> AttentionInputs:
    """The inputs, checked once: shapes, both-or-neither positions and segment ids, their shapes and ranges,
    the offset (a grid: its count of tokens, the coordinates' shape), the key mask and the bias's shape (the features are checked against the parts by `attend`).
    """
    positions = Positions() if positions is None else positions
    checks.assert_qkv_shapes(query, key, value)
    b, q_len, num_heads, _ = query.shape
    k_len = key.shape[1]
    if isinstance(positions, Positions):
      shapes = ((b, q_len), (b, k_len))
      names = ('q_positions', 'k_positions')
      q_pos, k_pos = _pair(positions.query, positions.key, names, shapes, 'explicit positions')
      offset = validation.offset('attend', positions.offset)
      names = ('q_segment_ids', 'k_segment_ids')
      q_seg, k_seg = _pair(positions.query_segments, positions.key_segments, names, shapes, 'packed documents')
      positions = Positions(offset, q_pos, k_pos, q_seg, k_seg)
    else:
      positions = _checked_grid(positions, b, q_len, k_len)
    if key_mask is not None:
      key_mask = validation.mask('attend', key_mask, (b, k_len), 'key_mask')
    if bias is not None:
      checks.assert_bias_shape(bias, q_len=q_len, k_len=k_len, num_heads=num_heads)
    return cls(query, key, value, positions, key_mask, mask, features, bias)

  @property
  def q_len(self) -> int:
    return self.query.shape[1]

  @property
  def k_len(self) -> int:
    return self.key.shape[1]


def _checked_grid(positions, batch: int, q_len: int, k_len: int):
  """A `Grid` or `Coordinates` of self-attention: its tokens are the queries and the keys (a grid's count of them,
  coordinates (batch, L, axes)), its segment ids (batch, L) int32. Else ValueError naming what differs."""
  validation.require(
      isinstance(positions, (Grid, Coordinates)),
      'attend',
      'positions',
      type(positions).__name__,
      'a Positions (1-D), a Grid or Coordinates',
  )
  validation.require(
      q_len == k_len,
      'attend',
      'positions',
      f'<{type(positions).__name__} with Lq={q_len}, Lk={k_len}>',
      'self-attention on a grid: its tokens are the queries and the keys (Lq = Lk)',
  )
  if isinstance(positions, Grid):
    validation.require(
        positions.num_tokens == q_len,
        'attend',
        'positions',
        f'<Grid {tuple(positions.shape)}, class_token={positions.class_token}>',
        f'queries and keys that are the {positions.num_tokens} tokens of the grid in raster order (got Lq={q_len})',
    )
  else:
    shape = tuple(np.shape(positions.values))
    validation.require(
        len(shape) == 3 and shape[:2] == (batch, q_len),
        'attend',
        'positions',
        f'<Coordinates of shape {shape}>',
        f'coordinates (batch, length, axes) = ({batch}, {q_len}, axes)',
    )
  if positions.segments is None:
    return positions
  segments = validation.positions('attend', positions.segments, (batch, q_len), 'segment_ids')
  return dataclasses.replace(positions, segments=segments)


def position_value(who: str, positions, grid_shape, class_token, segment_ids=None):
  """A layer's position keywords as one value: `Grid(grid_shape, class_token)`, `Coordinates(positions)` for
  coordinates (batch, length, axes), else 1-D `Positions` of self-attention (explicit `positions` (batch, length)
  or None), each with the tokens' document ids `segment_ids`. `positions` may be that value already (`Grid`,
  `Coordinates`: what a model hands each of its blocks, as `vit.ViT` does). Both a grid shape and positions are
  refused by name; the values are checked against the layer's parts where it attends (`select.check_positions`)."""
  if isinstance(positions, Grid):
    validation.require(grid_shape is None, who, 'grid_shape', grid_shape, 'None when positions is a Grid')
    return Grid(positions.shape, positions.class_token, segment_ids)
  if isinstance(positions, Coordinates):
    positions = positions.values
  validation.require(
      positions is None or grid_shape is None,
      who,
      'grid_shape',
      grid_shape,
      'None when positions are given (coordinates (batch, length, axes) or a grid shape, not both)',
  )
  if grid_shape is not None:
    return Grid(grid_shape, class_token, segment_ids)
  if positions is not None and np.ndim(positions) == 3:
    return Coordinates(positions, segment_ids)
  return Positions(0, positions, positions, segment_ids, segment_ids)


def _pair(query_side, key_side, names, shapes, meaning):
  """Int arrays of the queries and the keys given both or neither (a ValueError naming the missing one), each
  checked against its shape: (int32 query side, int32 key side) or (None, None)."""
  validation.require(
      (query_side is None) == (key_side is None),
      'attend',
      names[1],
      '<given>' if query_side is None else None,
      f'both {names[0]} and {names[1]} ({meaning}), or neither',
  )
  if query_side is None:
    return None, None
  return tuple(
      validation.positions('attend', x, shape, name) for x, shape, name in zip((query_side, key_side), shapes, names)
  )


@dataclasses.dataclass(frozen=True)
class AttentionSettings:
  """How to attend: `implementation` None (dot_product_attention on accelerators; on a CPU the explicit path,
  the blockwise one beyond a default tile) | 'xla' | 'cudnn' | 'einsum' | 'blockwise' | 'pallas'; `block_size`
  the tiles of 'blockwise' / 'pallas' (None, an int or (block_q, block_k)); `window` sliding-window attention
  (query i sees keys at distance i - j < window, |i - j| < window when not causal; None: global); `causal`;
  `debug_checks` (the realised bias of Toeplitz encoders checked with `checks.assert_toeplitz`); `dtype` the
  layer's compute dtype (attend computes in its inputs' dtype; None: theirs)."""

  implementation: str | None = None
  block_size: Any = None
  window: int | None = None
  causal: bool = False
  debug_checks: bool = False
  dtype: Any = None

  @classmethod
  def checked(
      cls, implementation=None, block_size=None, window=None, causal=False, debug_checks=False, dtype=None
  ) -> AttentionSettings:
    check_implementation(implementation)
    check_block_size(implementation, block_size)
    if window is not None:
      window = validation.positive_int('attend', 'window', window)
    causal = validation.boolean('attend', 'causal', causal)
    debug_checks = validation.boolean('attend', 'debug_checks', debug_checks)
    return cls(implementation, block_size, window, causal, debug_checks, dtype)

  def path(self, parts, query, value) -> str:
    """The kernel of a call (one of PATHS), chosen here only. 'pallas' and 'blockwise' as asked (both accumulate
    in the query's head size: refused when the values' differs, PoPE); None on a CPU tiles beyond one default
    tile (`default_is_tiled`); dot_product_attention ('xla', 'cudnn', or None on an accelerator) when every Term
    has its form and q, k, v share one head size; the explicit path otherwise."""
    implementation = self.implementation
    if implementation is None and default_is_tiled(parts, query, value):
      implementation = 'blockwise'
    if implementation in TILED_IMPLEMENTATIONS:
      validation.require(
          query.shape[-1] == value.shape[-1],
          'attend',
          'implementation',
          implementation,
          f'"einsum" or None when queries and keys (head size {query.shape[-1]}) and values '
          f"(head size {value.shape[-1]}) differ in size (pope's polar q and k): the tiled paths "
          f"accumulate in the query's size",
      )
      return implementation
    use_dot_product_attention = implementation in ('xla', 'cudnn') or (
        implementation is None and jax.default_backend() != 'cpu'
    )
    # dot_product_attention takes a scalar bias and a mask only, and one head size for q, k and v (PoPE's polar
    # q and k are twice v's).
    plain = all(terms.select.term_for(part).dot_product_form for part in parts)
    if plain and query.shape[-1] == value.shape[-1] and use_dot_product_attention:
      return 'dot_product'
    return 'explicit'


def default_is_tiled(parts, query, value) -> bool:
  """implementation=None on a CPU: the blockwise path once queries and keys span more than one default tile (measured
  faster than the explicit path at L = 2,048 for every kind, docs/benchmarks.md 4b-4h, and O(L) memory), the
  explicit path below (one tile either way, without the recomputing backward). Not for a part with no per-tile
  form or q, k and v of different head sizes (PoPE); on accelerators None keeps dot_product_attention or the
  explicit path."""
  return (
      jax.default_backend() == 'cpu'
      and query.shape[1] > blockwise.DEFAULT_BLOCK_SIZE[0]
      and value.shape[1] > blockwise.DEFAULT_BLOCK_SIZE[1]
      and query.shape[-1] == value.shape[-1]
      and all(terms.select.term_for(part).tiles for part in parts)
  )
