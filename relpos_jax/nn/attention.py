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
from flax import nnx

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.nn import call, explicit, functional
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


def check_tokens(who: str, x, model_dim=None) -> tuple[int, int]:
  """(batch, length) of a layer input x (B, L, model_dim) (None: any), at least one sequence of one token."""
  validation.shaped(who, 'x', x, ('batch', 'length', 'model_dim' if model_dim is None else model_dim))
  shape = tuple(x.shape[:2])
  validation.require(
      min(shape) > 0,
      who,
      'x',
      f'<shape {tuple(x.shape)}>',
      'at least one sequence of at least one token (batch >= 1, length >= 1)',
  )
  return shape


@dataclasses.dataclass(frozen=True)
class Layer:
  """What `self_attention_inputs` asks of the layer that calls it (the NNX layer or its Linen twin): `who` names
  it in the refusals, `get_params()` gives its parts' params and `project(x)` the heads (q, k, v), each called
  once, after the checks on the inputs (the NNX layer reads its variables, the Linen twin declares its params
  there); `model_dim` None reads it from x (the Linen twin)."""

  who: str
  encoder: contract.Encoder
  parts: tuple
  get_params: Callable
  project: Callable
  model_dim: int | None = None


def self_attention_inputs(layer: Layer, x, where, padding_mask, position_bias, settings):
  """(`call.AttentionInputs`, the parts' params as attend reads them) of a layer's self-attention over x
  (B, L, model_dim) at `where` (`call.position_value`: 1-D `Positions`, a `Grid` or `Coordinates`), for the NNX
  layer and its Linen twin alike, 1-D and grid: the positions checked against the parts and `settings`
  (`terms.select.check_positions`), the params bound to the positions (`Term.bind`: a grid part's coordinates, or
  PaPE's features of x), q and k rotated by the rotary parts (at the 1-D positions, the padding at 0, or at the
  coordinates), the contextual parts' token features of x. A grid's scalar biases are Terms like any other: on
  a `Grid` each tile gathers its block from the table of distinct offsets (`terms.grid.GridTableBias`, memory
  O(P + tile)), at `Coordinates` each tile evaluates its pairs; `position_bias` replaces the scalar parts' own."""
  who, parts = layer.who, layer.parts
  b, length = check_tokens(who, x, layer.model_dim)
  where = terms_lib.select.check_positions(who, layer.encoder, parts, where, settings, (b, length))
  if padding_mask is not None:
    padding_mask = validation.mask(who, padding_mask, (b, length))
  params = layer.get_params()
  q, k, v = layer.project(x)
  params = terms_lib.parts.bind(parts, params, where, x)
  if terms_lib.parts.rotates(parts):
    rot = where.for_rotation(b, length, padding_mask)
    q, k = terms_lib.parts.rotate(parts, params, q, k, rot, rot)
  features = terms_lib.parts.token_features(parts, params, x)
  inputs = call.AttentionInputs.checked(q, k, v, where, key_mask=padding_mask, features=features, bias=position_bias)
  return inputs, params


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
    shape = check_tokens('RelativeMultiHeadAttention', x, self.model_dim)
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
    first when `class_token`), the grid's counterpart of contiguous positions (see `self_attention_inputs`); or the
    same as one value, positions=`call.Grid(shape, class_token)` or `call.Coordinates(values)`.
    """
    layer, where = self._layer(position_params), self._where(x, positions, grid_shape, class_token, segment_ids)
    inputs, params = self_attention_inputs(layer, x, where, padding_mask, position_bias, self.settings)
    out = functional.attend(inputs, self.parts, params, self.settings)
    return self.out(merge_heads(out).astype(self.dtype))

  def _where(self, x, positions, grid_shape, class_token, segment_ids):
    """The call's position keywords as one value (`call.position_value`), its segment ids checked."""
    segment_ids = self._check_segments(x, segment_ids)
    return call.position_value('RelativeMultiHeadAttention', positions, grid_shape, class_token, segment_ids)

  @property
  def settings(self) -> call.AttentionSettings:
    """This layer's attention settings (checked when the layer was built)."""
    return call.AttentionSettings(
        self.implementation, self.block_size, self.window, self.causal, self.debug_checks, self.dtype
    )

  def _layer(self, position_params) -> Layer:
    who = 'RelativeMultiHeadAttention'
    return Layer(who, self.encoder, self.parts, lambda: self._params(position_params), self._project, self.model_dim)

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
    """The attention distribution (B, H, L, L) float32 this layer's __call__ uses, built explicitly
    (`explicit.weights`): softmax of q . k / sqrt(D) + the scalar bias (and a grid's score terms), masked. For
    diagnostics (attention entropy); the parts must be rotary, scalar biases, a grid's score terms or
    position-free (NoPE, absolute parts), else a ValueError naming the part (`Term.weights_form`)."""
    where = self._where(x, positions, grid_shape, class_token, segment_ids)
    settings = call.AttentionSettings(causal=self.causal)
    inputs, params = self_attention_inputs(self._layer(position_params), x, where, padding_mask, None, settings)
    return explicit.weights(inputs, self.parts, params, settings)

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
    grid_parts = terms_lib.select.coordinate_parts(self.parts)
    validation.require(
        not grid_parts,
        'decode',
        'encoder',
        self.encoder,
        f'an encoder of 1-D positions: cached decoding of grid encoders ({grid_parts}) is not built',
    )
    given, padding_mask = self._check_input(x, positions, padding_mask)
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
    new_positions = given if given is not None else terms_lib.parts.contiguous_positions(b, chunk, index)
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
            given,
            None if given is None else cache.positions,
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
