"""`RelativeMultiHeadAttention`: Flax NNX multi-head attention built with any registered encoder.

    layer = RelativeMultiHeadAttention(num_heads=4, model_dim=64, encoder=encoders.make('t5'),
                                       causal=True, rngs=nnx.Rngs(0))
    y = layer(x)                                   # x (B, L, model_dim) -> (B, L, model_dim)
    y = layer(x, positions=p, padding_mask=m)      # explicit int positions (B, L); m (B, L) True = real

    cache = layer.init_cache(batch, max_length)    # cached autoregressive decoding (causal layers)
    y, cache = layer.decode(x_new, cache)          # x_new (B, C, model_dim) at q_offset = cache.index
    decode = jit_decode(layer)                     # the same, compiled, the cache room checked first

The layer owns the q/k/v/output projections and, unless told otherwise, the encoder's parameters
(`position_params`, one pytree per attention part). A model that shares one position encoding across its
layers (T5) builds its layers with `own_position_params=False` and passes `position_params` (and the
precomputed `position_bias`) to every call. Absolute parts (x + p_i) are ignored here: the model adds them
at its input. The attention itself is `functional.attend`, shared with the Linen twin.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

import einops
import flax.struct

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from relpos_jax import grid as grid_lib
from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.nn import call, functional
from relpos_jax.nn import terms as terms_lib

DTYPES = {'float32': jnp.float32, 'bfloat16': jnp.bfloat16}


def canonical_dtype(dtype):
  """'float32' / 'bfloat16' (or the jnp dtypes) -> the jnp dtype; anything else is a ValueError."""
  for name, value in DTYPES.items():
    if isinstance(dtype, str):
      if dtype == name:
        return value
      continue
    try:
      if jnp.dtype(dtype) == jnp.dtype(value):
        return value
    except TypeError:
      break
  raise ValueError(f'dtype={dtype!r} is invalid; allowed: {tuple(DTYPES)}.')


def as_variables(tree):
  """Wraps every array leaf of an encoder's params in nnx.Param (the static Dims node has no leaves)."""
  return nnx.data(jax.tree.map(nnx.Param, tree))


def variable_values(tree):
  """The inverse of `as_variables`: the plain params pytree an encoder's functions expect."""
  return jax.tree.map(lambda v: v[...], tree, is_leaf=lambda x: isinstance(x, nnx.Variable))


@flax.struct.dataclass
class KVCache:
  """Keys and values of the tokens decoded so far, for one attention layer.

  key, value: (B, max_length, H, D); keys unrotated (rotary parts rotate them at `positions` when read).
  positions: (B, max_length) int32, each cached token's position (for explicit / randomized positions).
  mask: (B, max_length) bool, True where a real token was written.
  index: int32 scalar, the number of tokens cached: the next queries sit at q_offset = index.
  segment_ids: (B, max_length) int32, each cached token's document id (packed sequences, `decode(segment_ids=)`;
    0 where decode was given none), or None in a cache built before segment ids existed.
  features: per attention part, the contextual part's token features (B, max_length, F) (FoX's gate
    logits, PaTH's directions), or None.
  """

  key: jax.Array
  value: jax.Array
  positions: jax.Array
  mask: jax.Array
  index: jax.Array
  features: tuple = ()
  segment_ids: jax.Array | None = None

  @property
  def max_length(self) -> int:
    return self.key.shape[1]


def _overflow_error(chunk: int, max_length: int, index=None) -> ValueError:
  where = f'at positions {index}..{index + chunk - 1}' if index is not None else 'in one call'
  needed = (index or 0) + chunk
  return ValueError(
      f'decode: {chunk} new token(s) {where} exceed the cache of max_length={max_length} '
      f'(positions 0..{max_length - 1}); init_cache with max_length >= {needed}.'
  )


def check_cache_room(index, chunk: int, max_length: int) -> None:
  """ValueError when `chunk` new tokens at cache `index` do not fit a cache of `max_length`.

  The chunk and the cache size are static shapes: always checked, also under jit. The index is checked
  when it is concrete (eager calls, `jit_decode`); under the caller's own jit it is traced and cannot be
  checked without a host callback, so `overflow_mask` makes that chunk's outputs NaN instead of letting the
  write clamp silently onto the last cached tokens."""
  if chunk > max_length:
    raise _overflow_error(chunk, max_length)
  if not isinstance(index, jax.core.Tracer):
    index = int(index)
    if index + chunk > max_length:
      raise _overflow_error(chunk, max_length, index)


def split_heads(x: jax.Array, num_heads: int) -> jax.Array:
  """(batch, length, heads * head_dim) -> (batch, length, heads, head_dim): the layout `functional.attend`
  takes (queries, keys and values all have it)."""
  return einops.rearrange(x, 'b l (h d) -> b l h d', h=num_heads)


def merge_heads(x: jax.Array) -> jax.Array:
  """(batch, length, heads, head_dim) -> (batch, length, heads * head_dim), the inverse of `split_heads`."""
  return einops.rearrange(x, 'b l h d -> b l (h d)')


def poison_overflow(y: jax.Array, index, chunk: int, max_length: int) -> jax.Array:
  """`y` where the chunk fits the cache, NaN where it overflows (a traced index; see check_cache_room)."""
  if not isinstance(index, jax.core.Tracer):
    return y
  return jnp.where(index + chunk > max_length, jnp.asarray(jnp.nan, y.dtype), y)


def jit_decode(module):
  """`decode(inputs, cache, **kwargs) -> (outputs, cache)`: `module.decode` (a causal layer or DecoderLM)
  compiled with nnx.jit, checking on the host first that the chunk fits the cache, so that decoding past
  the cache is a ValueError naming the cache size and the positions asked for (reading the cache index
  waits for the previous call to finish)."""
  compiled = nnx.jit(lambda m, inputs, cache, kwargs: m.decode(inputs, cache, **kwargs))

  def decode(inputs, cache, **kwargs):
    first = cache[0] if isinstance(cache, (tuple, list)) else cache
    check_cache_room(jax.device_get(first.index), jnp.shape(inputs)[1], first.max_length)
    return compiled(module, inputs, cache, kwargs)

  return decode


def on_grid(parts, positions, grid_shape) -> bool:
  """Whether a layer with these attention parts takes its grid path: a grid shape, a grid encoder, or coordinates
  (batch, length, axes) given."""
  return (
      grid_shape is not None
      or any(grid_lib.is_grid(p) for p in parts)
      or (positions is not None and jnp.ndim(positions) == 3)
  )


@dataclasses.dataclass(frozen=True)
class GridLayer:
  """What the grid path asks of the layer that calls it (the NNX layer or its Linen twin): `who` names it in the
  refusals, `get_params()` gives its parts' params and `project(x)` the heads (q, k, v), each called once, after
  the checks on the inputs (the NNX layer reads its variables, the Linen twin declares its params there);
  `model_dim` None reads it from x (the Linen twin)."""

  who: str
  encoder: contract.Encoder
  parts: tuple
  get_params: Callable
  project: Callable
  head_dim: int
  model_dim: int | None = None


def grid_position_value(who, positions, grid_shape, class_token):
  """The layer's grid keywords as one position value: `call.Grid(grid_shape, class_token)` (checked by the grid
  path), `call.Coordinates(positions)` or None; both a grid shape and positions are refused by name."""
  validation.require(
      positions is None or grid_shape is None,
      who,
      'grid_shape',
      grid_shape,
      'None when positions are given (coordinates (batch, length, axes) or a grid shape, not both)',
  )
  if grid_shape is not None:
    return call.Grid(grid_shape, class_token)
  return None if positions is None else call.Coordinates(positions)


def position_keywords(positions, grid_shape, class_token):
  """(positions, grid_shape, class_token) with a position value given as `positions` read as the keywords it
  stands for: `call.Grid(shape, class_token)` as grid_shape and class_token, `call.Coordinates(values)` as the
  coordinates (a model hands every block the same value, as `vit.ViT` does)."""
  if isinstance(positions, call.Grid):
    validation.require(
        grid_shape is None, 'RelativeMultiHeadAttention', 'grid_shape', grid_shape, 'None when positions is a Grid'
    )
    return None, positions.shape, positions.class_token
  if isinstance(positions, call.Coordinates):
    return positions.values, grid_shape, class_token
  return positions, grid_shape, class_token


def grid_inputs(layer: GridLayer, x, positions, padding_mask, position_bias, settings, by_table: bool = False):
  """What the grid path of `RelativeMultiHeadAttention` and of its Linen twin (relpos_jax.nn.linen) attends with:
  (q, k, v rotated by the grid rotary parts, the summed grid bias, the remaining parts and their params, the
  padding mask).

  A grid bias is a scalar bias and a grid rotary a rotation (DESIGN.md): the rotary parts rotate q and k at
  their coordinates, the bias parts are summed into one bias handed to `functional.attend` as a precomputed
  `position_bias`. With `grid_shape` a relative bias is a function of the prod(2n - 1) distinct offsets: with
  `by_table` (the layer's call) the biases' tables (grid.grid_bias_table, (H, P)) are summed into a
  `terms.GridTable`, from which 'blockwise' gathers each tile's block (memory O(P + tile), not O(L^2)) and the
  untiled paths take the (H, L, L) expansion; without it (attention_weights) the (H, L, L) matrix
  (grid.grid_bias_matrix). A query-dependent bias (fire2d: no table of offsets) joins the `GridTable` as a pair
  part, which each tile evaluates on its own (bq, bk) pairs. A grid vector part (iRPE's contextual mode) joins the
  remaining parts with the coordinates (`terms.grid.with_coordinates`): `functional.attend` computes its q, k and
  v terms per tile; PaPE's term of the layer input joins them as the tokens' features of x and the coordinates
  (`terms.grid.with_features`, computed once here), whose products each tile adds (without `by_table`, for
  attention_weights, both are realised whole). At explicit coordinates (no table) a scalar grid bias on the tiled path
  ('blockwise', or None where attend tiles) joins the remaining parts with the coordinates
  (`terms.grid.GridCoordinateBias`): each tile evaluates its (B, H, bq, bk) pairs with the encoder's `pair_bias`.
  Any other bias (a given position_bias; explicit coordinates off the tiled path or for attention_weights, where
  every pair is evaluated, (B, H, L, L)) is realised whole, and the GridTable's expansion is added to it. Refused by name: a 1-D encoder that reads positions given coordinates, a grid encoder without them (or given 1-D positions), both positions and
  grid_shape, coordinates of the wrong rank or trailing axis, non-finite coordinates, a grid beyond a learned
  table, sliding windows and the Pallas kernel.

  `positions` is a `call.Grid`, a `call.Coordinates` or None (`grid_position_value`); `settings` the layer's
  `call.AttentionSettings` (its window, implementation and debug checks).
  """
  who, encoder, parts, head_dim, model_dim = layer.who, layer.encoder, layer.parts, layer.head_dim, layer.model_dim
  window, implementation, debug_checks = settings.window, settings.implementation, settings.debug_checks
  grid_shape = positions.shape if isinstance(positions, call.Grid) else None
  class_token = positions.class_token if isinstance(positions, call.Grid) else False
  positions = positions.values if isinstance(positions, call.Coordinates) else None

  validation.shaped(who, 'x', x, ('batch', 'length', 'model_dim' if model_dim is None else model_dim))
  b, length, _ = x.shape
  grid_parts = [p for p in parts if grid_lib.is_grid(p)]
  one_d = [p.name or type(p).__name__ for p in parts if not grid_lib.is_grid(p) and p.reads_positions]
  where = f'grid_shape={grid_shape}' if grid_shape is not None else f'positions of shape {tuple(np.shape(positions))}'
  validation.require(
      not one_d,
      who,
      'encoder',
      encoder,
      f'grid encoders only when the layer is given coordinates ({where}): {one_d} read 1-D positions (batch, '
      'length); give them positions (batch, length), or use a grid encoder (relpos_jax.grid.names())',
  )
  names = [p.name for p in grid_parts]
  if positions is None and grid_shape is None:
    raise ValueError(
        f'{who}: the grid encoder(s) {names} read coordinates: pass positions (batch, length, axes) or '
        f'grid_shape=(H, W) / (T, H, W); got neither.'
    )
  validation.require(window is None, who, 'window', window, 'None with grid encoders (a window is 1-D)')
  validation.require(
      implementation != 'pallas',
      who,
      'implementation',
      implementation,
      'not "pallas" with grid encoders (its kernel builds 1-D Toeplitz biases); None, "einsum", "xla", "cudnn" or '
      '"blockwise"',
  )
  if padding_mask is not None:
    padding_mask = validation.mask(who, padding_mask, (b, length))
  if grid_shape is not None:
    grid_shape, class_token = dataclasses.astuple(call.Grid.checked(who, grid_shape, class_token))
    expected = int(np.prod(grid_shape)) + int(class_token)
    validation.require(
        expected == length,
        who,
        'grid_shape',
        grid_shape,
        f'a grid of length - class token = {length - int(class_token)} tokens (x has length {length})',
    )
    coords = jnp.broadcast_to(
        grid_lib.grid_positions(grid_shape, class_token=class_token), (b, length, len(grid_shape))
    )
  else:
    shape = tuple(jnp.shape(positions))
    if len(shape) != 3 or shape[:2] != (b, length):
      raise ValueError(
          f'{who}: the grid encoder(s) {names} read coordinates (batch, length, axes) = ({b}, {length}, axes); got '
          f'positions of shape {shape}.'
      )
    coords = positions
  params = layer.get_params()
  q, k, v = layer.project(x)
  # At explicit coordinates no table of offsets exists: on the tiled path each tile evaluates its own pairs of a
  # scalar grid bias (`terms.grid.GridCoordinateBias`); dot_product_attention and the explicit path take it whole.
  tiled = by_table and (
      implementation == 'blockwise' or (implementation is None and call.default_is_tiled(parts, q, v))
  )
  bias, rest, rest_params, table, pair_parts, pair_params = position_bias, [], [], None, [], []
  for part, p in zip(parts, params):  # rotations first: a contextual term reads the rotated q and k
    if grid_lib.is_grid(part) and terms_lib.select.term_for(part).stage is terms_lib.Stage.ROTATE:
      c = part.coordinates(coords)
      if grid_shape is not None:
        part.check_grid(grid_shape)
      q = part.rotate_queries(p, q.astype(jnp.float32), c).astype(q.dtype)
      k = part.rotate_keys(p, k.astype(jnp.float32), c).astype(k.dtype)
  for part, p in zip(parts, params):
    if not grid_lib.is_grid(part):
      rest.append(part)
      rest_params.append(p)
      continue
    c = part.coordinates(coords)
    if grid_shape is not None:
      part.check_grid(grid_shape)
    part_term = terms_lib.select.term_for(part)
    if part_term.stage is terms_lib.Stage.SCORES and by_table:  # iRPE's contextual mode, PaPE: per tile in attend
      rest.append(part)  # from the coordinates (GridScores' buckets) or the tokens' features of x (GridFeatureScores)
      rest_params.append(part_term.grid_params(part, p, c, x, grid_shape=grid_shape))
    elif part_term.stage is terms_lib.Stage.SCORES:  # attention_weights: the q and k terms (PaPE's term of x) whole
      term = part.contextual_scores(p, q, k, c, c, 1.0 / np.sqrt(head_dim), inputs=x)
      bias = term if bias is None else bias + term
    elif part_term.scalar_bias and position_bias is None:
      if grid_shape is not None and part.is_toeplitz and by_table:
        term = grid_lib.grid_bias_table(part, p, grid_shape, class_token=class_token)
        table = term if table is None else table + term
        continue
      if grid_shape is not None and by_table:  # query-dependent (fire2d): each tile evaluates its own pairs
        pair_parts.append(part)
        pair_params.append(p)
        continue
      if grid_shape is None and tiled:  # explicit coordinates: each tile its pairs, from their coordinates
        rest.append(part)
        rest_params.append(part_term.grid_params(part, p, c, x))
        continue
      if grid_shape is not None:
        term = grid_lib.grid_bias_matrix(part, p, grid_shape, class_token=class_token)
        if debug_checks and part.is_toeplitz:
          jax.debug.callback(
              lambda t, shape=grid_shape, cls=class_token: grid_lib.assert_block_toeplitz(t, shape, class_token=cls),
              term,
          )
      else:
        term = grid_lib.grid_bias_at_positions(part, p, c, c)
      bias = term if bias is None else bias + term
  if table is not None or pair_parts:  # the grid biases in their tileable form: tiles gather or evaluate blocks
    debug_table = table
    table = terms_lib.grid.GridTable(table, grid_shape, class_token, tuple(pair_parts), tuple(pair_params))
    if debug_checks and debug_table is not None:
      debug_table = terms_lib.grid.GridTable(debug_table, grid_shape, class_token)
      jax.debug.callback(
          lambda t, shape=grid_shape, cls=class_token: grid_lib.assert_block_toeplitz(t, shape, class_token=cls),
          debug_table.dense(),
      )
    bias = table if bias is None else bias + table.dense()
  return q, k, v, bias, tuple(rest), rest_params, padding_mask


def attend_on_grid(layer: GridLayer, x, positions, padding_mask, position_bias, segment_ids, settings):
  """The grid path of `RelativeMultiHeadAttention` and of its Linen twin: `grid_inputs` in their tileable form
  (`by_table`), then `functional.attend` with the remaining parts; the heads (B, L, H, D) before the output
  projection."""
  q, k, v, bias, rest, rest_params, padding_mask = grid_inputs(
      layer, x, positions, padding_mask, position_bias, settings, by_table=True
  )
  inputs = call.AttentionInputs.checked(
      q,
      k,
      v,
      call.Positions(query_segments=segment_ids, key_segments=segment_ids),
      key_mask=padding_mask,
      features=terms_lib.parts.token_features(rest, rest_params, x),
      bias=bias,
  )
  # A grid's debug checks are its own (block-Toeplitz, in grid_inputs); attend's are 1-D.
  return functional.attend(inputs, rest, rest_params, dataclasses.replace(settings, debug_checks=False))


class RelativeMultiHeadAttention(nnx.Module):
  """Multi-head self-attention with a relative (or any) position encoding, dispatched on encoder kind.

  Args:
    num_heads: attention heads H.
    model_dim: input and output features.
    encoder: any `relpos_jax.encoders` encoder (a COMBINED one contributes each part's term).
    head_dim: per-head size D; default model_dim // num_heads.
    causal: mask keys after the query (decoder); required for `decode`.
    dtype: compute dtype, 'float32' or 'bfloat16'; params, softmax and position terms stay float32.
    implementation: None | 'xla' | 'cudnn' (jax.nn.dot_product_attention) | 'einsum' | 'blockwise' (tiles,
      an online softmax, O(L) memory; see relpos_jax.nn.blockwise) | 'pallas' (its Pallas kernel, Toeplitz
      biases, rotary and none); vector-relative encoders take the einsum path unless 'blockwise'.
    block_size: the tiles of 'blockwise': None (default), an int or (block_q, block_k).
    own_position_params: False when the model owns (shares) the encoder's params and passes them in.
    debug_checks: check the realised bias of Toeplitz encoders with checks.assert_toeplitz at run time.
    model_adds_absolute: the surrounding model adds the absolute parts' embeddings to its input (else a
      warning says they are ignored here).
    window: sliding-window local attention, each query sees the keys less than `window` positions back
      (None: global attention).
    rngs: nnx.Rngs with a 'params' stream.
  """

  def __init__(
      self,
      num_heads: int,
      model_dim: int,
      encoder: contract.Encoder,
      *,
      head_dim: int | None = None,
      causal: bool = False,
      dtype='float32',
      implementation: str | None = None,
      block_size=None,
      own_position_params: bool = True,
      debug_checks: bool = False,
      model_adds_absolute: bool = False,
      window: int | None = None,
      rngs: nnx.Rngs,
  ):
    who = 'RelativeMultiHeadAttention'
    num_heads = validation.positive_int(who, 'num_heads', num_heads)
    model_dim = validation.positive_int(who, 'model_dim', model_dim)
    head_dim = validation.head_dim(who, model_dim, num_heads, head_dim)
    validation.require(
        isinstance(encoder, contract.Encoder), who, 'encoder', encoder, 'an Encoder (relpos_jax.encoders.make(...))'
    )
    functional.check_implementation(implementation)
    functional.check_block_size(implementation, block_size)
    if window is not None:
      window = validation.positive_int(who, 'window', window, maximum=validation.MAX_POSITION)
    flags = dict(
        causal=causal,
        own_position_params=own_position_params,
        debug_checks=debug_checks,
        model_adds_absolute=model_adds_absolute,
    )
    causal, own_position_params, debug_checks, model_adds_absolute = (
        validation.boolean(who, field, value) for field, value in flags.items()
    )
    terms_lib.parts.check_causal(who, encoder, causal)
    absolute = [p.name for p in terms_lib.parts.input_parts(encoder)]
    if absolute and not model_adds_absolute:
      warnings.warn(
          f'RelativeMultiHeadAttention: the absolute part(s) {absolute} of encoder {encoder!r} act at the '
          'model input (x + p_i), not in attention, so this layer ignores them. Add '
          'relpos_jax.nn.terms.parts.input_embedding(...) to the layer input as DecoderLM / BidirectionalModel '
          'do (and pass model_adds_absolute=True), or use the absolute_score encoder for a score-level term.',
          UserWarning,
          stacklevel=2,
      )
    self.num_heads = num_heads
    self.model_dim = model_dim
    self.head_dim = head_dim
    self.encoder = encoder
    self.causal = causal
    self.dtype = canonical_dtype(dtype)
    self.implementation = implementation
    self.block_size = block_size
    self.debug_checks = debug_checks
    self.window = window
    self.parts = terms_lib.parts.attention_parts(encoder)
    inner = num_heads * head_dim
    linear = dict(use_bias=False, dtype=self.dtype, param_dtype=jnp.float32, rngs=rngs)
    self.query = nnx.Linear(model_dim, inner, **linear)
    self.key = nnx.Linear(model_dim, inner, **linear)
    self.value = nnx.Linear(model_dim, inner, **linear)
    self.out = nnx.Linear(inner, model_dim, **linear)
    self.own_position_params = own_position_params
    if self.own_position_params:
      params = terms_lib.parts.init_params(
          self.parts, rngs.params(), num_heads=num_heads, head_dim=head_dim, model_dim=model_dim
      )
      self.position_params = nnx.List([as_variables(p) for p in params])
    else:
      self.position_params = None

  # --------------------------------------------------------------------------------------------------------

  def init_position_params(self, rng: jax.Array) -> list:
    """Fresh params for this layer's attention parts (what a sharing model owns on its layers' behalf)."""
    return terms_lib.parts.init_params(
        self.parts, rng, num_heads=self.num_heads, head_dim=self.head_dim, model_dim=self.model_dim
    )

  def _params(self, position_params):
    if position_params is None and self.position_params is not None:
      return [variable_values(p) for p in self.position_params]
    validation.require(
        position_params is not None,
        'RelativeMultiHeadAttention',
        'position_params',
        None,
        'the model-owned encoder params, passed to every call of a layer built with ' 'own_position_params=False',
    )
    params = list(position_params)
    terms_lib.parts.check_params(self.parts, params, self.num_heads)
    return params

  def _project(self, x):
    return tuple(split_heads(proj(x), self.num_heads) for proj in (self.query, self.key, self.value))

  def _check_segments(self, x, segment_ids):
    """segment_ids (B, L) int (the document id of each token of packed sequences) -> int32, or None."""
    if segment_ids is None:
      return None
    return validation.positions('RelativeMultiHeadAttention', segment_ids, tuple(x.shape[:2]), 'segment_ids')

  def _check_input(self, x, positions, padding_mask):
    """x (B, L, model_dim), and positions / padding_mask (B, L) when given: the layer's input boundary."""
    validation.shaped('RelativeMultiHeadAttention', 'x', x, ('batch', 'length', self.model_dim))
    shape = x.shape[:2]
    validation.require(
        min(shape) > 0,
        'RelativeMultiHeadAttention',
        'x',
        f'<shape {tuple(x.shape)}>',
        'at least one sequence of at least one token (batch >= 1, length >= 1)',
    )
    if positions is not None:
      positions = validation.positions('RelativeMultiHeadAttention', positions, shape)
    if padding_mask is not None:
      padding_mask = validation.mask('RelativeMultiHeadAttention', padding_mask, shape)
    return positions, padding_mask

  def __call__(
      self,
      x: jax.Array,
      *,
      positions: jax.Array | None = None,
      padding_mask: jax.Array | None = None,
      position_bias: jax.Array | None = None,
      position_params=None,
      grid_shape=None,
      class_token: bool = False,
      segment_ids: jax.Array | None = None,
  ) -> jax.Array:
    """x (B, L, model_dim) -> (B, L, model_dim).

    positions: explicit int positions (B, L), None for 0 .. L-1. padding_mask: (B, L) bool, True = real
    token (padded keys are masked). position_bias: a precomputed scalar bias of the scalar parts, shared
    across layers. position_params: the encoder params when the layer does not own them.
    segment_ids: (B, L) int document ids of packed sequences: a token attends to its own document's tokens only
    (pass per-document `positions` too for positions that restart at each document).

    Grid encoders (relpos_jax.grid) read coordinates instead: positions (B, L, axes), int or float, or
    `grid_shape` (a static (H, W) or (T, H, W): the tokens are that grid in raster order, after a class token
    first when `class_token`), the grid's counterpart of contiguous positions (see `grid_inputs`); or the same
    as one value, positions=`call.Grid(shape, class_token)` or `call.Coordinates(values)`.
    """
    segment_ids = self._check_segments(x, segment_ids)
    positions, grid_shape, class_token = position_keywords(positions, grid_shape, class_token)
    if self._on_grid(positions, grid_shape):
      where = grid_position_value('RelativeMultiHeadAttention', positions, grid_shape, class_token)
      out = attend_on_grid(
          self._grid_layer(position_params), x, where, padding_mask, position_bias, segment_ids, self.settings
      )
      return self.out(merge_heads(out).astype(self.dtype))
    positions, padding_mask = self._check_input(x, positions, padding_mask)
    b, length, _ = x.shape
    params = self._params(position_params)
    q, k, v = self._project(x)
    if terms_lib.parts.rotates(self.parts):
      rot = positions if positions is not None else terms_lib.parts.contiguous_positions(b, length)
      rot = rot if padding_mask is None else jnp.where(padding_mask, rot, 0)  # Padding counts in no length.
      q, k = terms_lib.parts.rotate(self.parts, params, q, k, rot, rot)
    inputs = call.AttentionInputs.checked(
        q,
        k,
        v,
        call.Positions(0, positions, positions, segment_ids, segment_ids),
        key_mask=padding_mask,
        features=terms_lib.parts.token_features(self.parts, params, x),
        bias=position_bias,
    )
    out = functional.attend(inputs, self.parts, params, self.settings)
    return self.out(merge_heads(out).astype(self.dtype))

  # --------------------------------------------------------------------------------------------------------
  # Positions on a grid (relpos_jax.grid): coordinates (B, L, axes) or a static grid shape.

  def _on_grid(self, positions, grid_shape) -> bool:
    return on_grid(self.parts, positions, grid_shape)

  @property
  def settings(self) -> call.AttentionSettings:
    """This layer's attention settings (checked when the layer was built)."""
    return call.AttentionSettings(
        self.implementation, self.block_size, self.window, self.causal, self.debug_checks, self.dtype
    )

  def _grid_layer(self, position_params) -> GridLayer:
    return GridLayer(
        'RelativeMultiHeadAttention',
        self.encoder,
        self.parts,
        lambda: self._params(position_params),
        self._project,
        self.head_dim,
        self.model_dim,
    )

  def attention_weights(
      self,
      x,
      *,
      positions=None,
      padding_mask=None,
      position_params=None,
      grid_shape=None,
      class_token: bool = False,
      segment_ids=None,
  ) -> jax.Array:
    """The attention distribution (B, H, L, L) float32 this layer's __call__ uses, built explicitly: softmax of
    q . k / sqrt(D) + the scalar bias, masked. For diagnostics (attention entropy); the parts must be rotary,
    scalar biases or position-free (NoPE, absolute parts), else a ValueError naming the part."""
    other = [
        p.name
        for p in self.parts
        if not terms_lib.select.term_for(p).dot_product_form and p.reads_positions and not getattr(p, 'is_grid', False)
    ]
    validation.require(
        not other,
        'attention_weights',
        'encoder',
        self.encoder,
        f'rotary, scalar-bias or position-free parts only (the weights are rebuilt explicitly); {other} are not',
    )
    b, length = x.shape[:2]
    segment_ids = self._check_segments(x, segment_ids)
    positions, grid_shape, class_token = position_keywords(positions, grid_shape, class_token)
    if self._on_grid(positions, grid_shape):
      where = grid_position_value('RelativeMultiHeadAttention', positions, grid_shape, class_token)
      q, k, _, bias, _, _, padding_mask = grid_inputs(
          self._grid_layer(position_params), x, where, padding_mask, None, self.settings
      )
    else:
      positions, padding_mask = self._check_input(x, positions, padding_mask)
      params = self._params(position_params)
      q, k, _ = self._project(x)
      rot = positions if positions is not None else terms_lib.parts.contiguous_positions(b, length)
      if terms_lib.parts.rotates(self.parts):
        q, k = terms_lib.parts.rotate(self.parts, params, q, k, rot, rot)
      bias = terms_lib.parts.scalar_bias(
          self.parts, params, length, length, q_positions=positions, k_positions=positions
      )
    logits = jnp.einsum('bihd,bjhd->bhij', q, k, preferred_element_type=jnp.float32) / np.sqrt(self.head_dim)
    if bias is not None:
      logits = logits + jnp.asarray(bias, jnp.float32)
    mask = functional.attention_mask(
        length,
        length,
        causal=self.causal,
        key_mask=padding_mask,
        q_segment_ids=segment_ids,
        k_segment_ids=segment_ids,
    )
    if mask is not None:
      logits = jnp.where(mask, logits, -1e30)
    return jax.nn.softmax(logits, axis=-1)

  # --------------------------------------------------------------------------------------------------------
  # Cached decoding.

  def _cached_features(self, cache: KVCache) -> tuple:
    features = tuple(cache.features) if cache.features else (None,) * len(self.parts)
    sizes = terms_lib.parts.feature_sizes(self.parts, contract.Dims(self.num_heads, self.head_dim, self.model_dim))
    if len(features) != len(self.parts) or any((f is None) != (n == 0) for f, n in zip(features, sizes)):
      raise ValueError(
          "decode: the cache holds no token features for this layer's contextual parts; build it "
          "with this layer's init_cache."
      )
    return features

  def init_cache(self, batch: int, max_length: int) -> KVCache:
    """An empty cache for `batch` sequences of up to `max_length` tokens."""
    batch = validation.positive_int('init_cache', 'batch', batch)
    max_length = validation.positive_int('init_cache', 'max_length', max_length)
    shape = (batch, max_length, self.num_heads, self.head_dim)
    sizes = terms_lib.parts.feature_sizes(self.parts, contract.Dims(self.num_heads, self.head_dim, self.model_dim))
    features = tuple(jnp.zeros((batch, max_length, n), jnp.float32) if n else None for n in sizes)
    return KVCache(
        key=jnp.zeros(shape, self.dtype),
        value=jnp.zeros(shape, self.dtype),
        positions=jnp.zeros((batch, max_length), jnp.int32),
        mask=jnp.zeros((batch, max_length), bool),
        index=jnp.zeros((), jnp.int32),
        features=features,
        segment_ids=jnp.zeros((batch, max_length), jnp.int32),
    )

  def decode(
      self,
      x: jax.Array,
      cache: KVCache,
      *,
      positions: jax.Array | None = None,
      padding_mask: jax.Array | None = None,
      position_bias: jax.Array | None = None,
      position_params=None,
      segment_ids: jax.Array | None = None,
  ) -> tuple[jax.Array, KVCache]:
    """Attends C new tokens x (B, C, model_dim) to the cache and themselves; returns (y, updated cache).

    The new queries sit at q_offset = cache.index; with positions None their positions are index .. index +
    C - 1 and every cached token is assumed to have had its index as position (as in a full forward).
    Explicit `positions` (B, C) are stored in the cache, and the position terms then read positions from
    the cache. position_bias, if given, must be (H or B, H, C, max_length) for these queries.
    segment_ids: (B, C) int document ids of the new tokens (packed sequences), stored in the cache: a new token
    attends to the cached and new tokens of its own document only. Tokens decoded without them are stored as
    document 0, and a call without them attends across documents (as a forward without segment_ids).
    """
    validation.require(
        self.causal,
        'decode',
        'causal',
        self.causal,
        'True: decode needs a causal layer (a bidirectional one would let cached tokens attend '
        'to tokens that do not exist yet)',
    )
    grid_parts = [p.name for p in self.parts if getattr(p, 'is_grid', False)]
    validation.require(
        not grid_parts,
        'decode',
        'encoder',
        self.encoder,
        f'an encoder of 1-D positions: cached decoding of grid encoders ({grid_parts}) is not built',
    )
    explicit, padding_mask = self._check_input(x, positions, padding_mask)
    segment_ids = self._check_segments(x, segment_ids)
    b, chunk, _ = x.shape
    validation.require(cache.key.shape[0] == b, 'decode', 'x', f'<batch {b}>', f'the cache batch {cache.key.shape[0]}')
    validation.require(
        tuple(cache.key.shape[2:]) == (self.num_heads, self.head_dim),
        'decode',
        'cache',
        f'<heads x head_dim {tuple(cache.key.shape[2:])}>',
        f'a cache of this layer ({self.num_heads} heads x head_dim {self.head_dim}): build it with init_cache',
    )
    max_length = cache.max_length
    check_cache_room(cache.index, chunk, max_length)
    validation.require(
        segment_ids is None or cache.segment_ids is not None,
        'decode',
        'cache',
        '<a KVCache without segment_ids>',
        "a cache from this layer's init_cache (it stores each cached token's segment id) when segment_ids are given",
    )
    params = self._params(position_params)
    index = jnp.asarray(cache.index, jnp.int32)
    new_positions = explicit if explicit is not None else terms_lib.parts.contiguous_positions(b, chunk, index)
    q, k, v = self._project(x)
    new_mask = jnp.ones((b, chunk), bool) if padding_mask is None else padding_mask
    # All int32 (dynamic_update_slice wants one index type): a literal 0 is int64 under jax_enable_x64.
    zero = jnp.zeros((), jnp.int32)
    start = (zero, index)
    new_features = terms_lib.parts.token_features(self.parts, params, x)
    features = tuple(
        None if cached is None else jax.lax.dynamic_update_slice(cached, new, start + (zero,))
        for cached, new in zip(self._cached_features(cache), new_features)
    )
    cache = KVCache(
        key=jax.lax.dynamic_update_slice(cache.key, k.astype(cache.key.dtype), start + (zero, zero)),
        value=jax.lax.dynamic_update_slice(cache.value, v.astype(cache.value.dtype), start + (zero, zero)),
        positions=jax.lax.dynamic_update_slice(cache.positions, new_positions, start),
        mask=jax.lax.dynamic_update_slice(cache.mask, new_mask, start),
        index=index + chunk,
        features=features,
        segment_ids=None
        if cache.segment_ids is None
        else jax.lax.dynamic_update_slice(
            cache.segment_ids, jnp.zeros((b, chunk), jnp.int32) if segment_ids is None else segment_ids, start
        ),
    )
    keys = cache.key
    if terms_lib.parts.rotates(self.parts):
      # Keys are cached unrotated and rotated here with the cached positions: an encoder whose rotation
      # depends on the whole position array (xPos's centre, dynamic NTK's length) then sees queries and keys
      # exactly as a full forward over the tokens so far would.
      # Padding and unwritten slots count in no length (dynamic NTK / YaRN, LongRoPE): position 0 there.
      q, keys = terms_lib.parts.rotate(
          self.parts, params, q, keys, jnp.where(new_mask, new_positions, 0), jnp.where(cache.mask, cache.positions, 0)
      )
    # q_offset places the queries among the cached keys (the causal mask); explicit positions, when given,
    # are what the position terms read.
    inputs = call.AttentionInputs.checked(
        q,
        keys,
        cache.value,
        call.Positions(
            index,
            explicit,
            None if explicit is None else cache.positions,
            segment_ids,
            None if segment_ids is None else cache.segment_ids,
        ),
        key_mask=cache.mask,
        features=list(cache.features),
        bias=position_bias,
    )
    out = functional.attend(inputs, self.parts, params, dataclasses.replace(self.settings, causal=True))
    y = self.out(merge_heads(out).astype(self.dtype))
    return poison_overflow(y, index, chunk, max_length), cache
