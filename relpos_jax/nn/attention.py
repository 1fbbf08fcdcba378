"""`RelativeMultiHeadAttention`: Flax NNX multi-head attention built with any registered encoder.

    layer = RelativeMultiHeadAttention(num_heads=4, model_dim=64, encoder=encoders.make('t5'),
                                       causal=True, rngs=nnx.Rngs(0))
    y = layer(x)                                   # x (B, L, model_dim) -> (B, L, model_dim)
    y = layer(x, positions=p, padding_mask=m)      # explicit int positions (B, L); m (B, L) True = real

    cache = layer.init_cache(batch, max_length)    # cached autoregressive decoding (causal layers)
    y, cache = layer.decode(x_new, cache)          # x_new (B, C, model_dim) at q_offset = cache.index

The layer owns the q/k/v/output projections and, unless told otherwise, the encoder's parameters
(`position_params`, one pytree per attention part). A model that shares one position encoding across its
layers (T5) builds its layers with `own_position_params=False` and passes `position_params` (and the
precomputed `position_bias`) to every call. Absolute parts (x + p_i) are ignored here: the model adds them
at its input. The attention itself is `functional.attend`, shared with the Linen twin.
"""

from __future__ import annotations

import warnings

import flax.struct

import jax
import jax.numpy as jnp
from flax import nnx

from relpos_jax.encoders import contract
from relpos_jax.nn import content_terms, functional, position_terms

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
  features: per attention part, the contextual part's token features (B, max_length, F) (FoX's gate
    logits, PaTH's directions), or None.
  """
  key: jax.Array
  value: jax.Array
  positions: jax.Array
  mask: jax.Array
  index: jax.Array
  features: tuple = ()

  @property
  def max_length(self) -> int:
    return self.key.shape[1]


def _raise_if_overflow(index, chunk, max_length):
  if int(index) + chunk > max_length:
    raise ValueError(f'decode: {chunk} new token(s) at cache index {int(index)} exceed the cache of '
                     f'max_length={max_length}; init_cache with a larger max_length.')


def check_cache_room(index, chunk: int, max_length: int) -> None:
  """ValueError when the chunk does not fit; checked now if index is concrete, else when it runs."""
  if isinstance(index, jax.core.Tracer):
    jax.debug.callback(_raise_if_overflow, index, chunk, max_length)
  else:
    _raise_if_overflow(index, chunk, max_length)


def check_positions_shape(positions, batch: int, length: int, what: str = 'positions') -> jax.Array | None:
  if positions is None:
    return None
  positions = jnp.asarray(positions)
  if positions.shape != (batch, length) or not jnp.issubdtype(positions.dtype, jnp.integer):
    raise ValueError(f'{what} must be an int array of shape (batch, length) = {(batch, length)}, got '
                     f'{positions.dtype} {positions.shape}.')
  return positions.astype(jnp.int32)


class RelativeMultiHeadAttention(nnx.Module):
  """Multi-head self-attention with a relative (or any) position encoding, dispatched on encoder kind.

  Args:
    num_heads: attention heads H.
    model_dim: input and output features.
    encoder: any `relpos_jax.encoders` encoder (a COMBINED one contributes each part's term).
    head_dim: per-head size D; default model_dim // num_heads.
    causal: mask keys after the query (decoder); required for `decode`.
    dtype: compute dtype, 'float32' or 'bfloat16'; params, softmax and position terms stay float32.
    implementation: None | 'xla' | 'cudnn' (jax.nn.dot_product_attention) | 'einsum'; vector-relative
      encoders always take the einsum path.
    own_position_params: False when the model owns (shares) the encoder's params and passes them in.
    debug_checks: check the realised bias of Toeplitz encoders with checks.assert_toeplitz at run time.
    model_adds_absolute: the surrounding model adds the absolute parts' embeddings to its input (else a
      warning says they are ignored here).
    rngs: nnx.Rngs with a 'params' stream.
  """

  def __init__(self, num_heads: int, model_dim: int, encoder: contract.Encoder, *, head_dim: int | None = None,
               causal: bool = False, dtype='float32', implementation: str | None = None,
               own_position_params: bool = True, debug_checks: bool = False, model_adds_absolute: bool = False,
               rngs: nnx.Rngs):
    for field, value in (('num_heads', num_heads), ('model_dim', model_dim)):
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'RelativeMultiHeadAttention: {field}={value!r} is invalid; allowed: an int >= 1.')
    if head_dim is None:
      if model_dim % num_heads:
        raise ValueError(f'RelativeMultiHeadAttention: model_dim={model_dim} is not divisible by '
                         f'num_heads={num_heads}; pass head_dim explicitly or change either.')
      head_dim = model_dim // num_heads
    elif isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
      raise ValueError(f'RelativeMultiHeadAttention: head_dim={head_dim!r} is invalid; allowed: an int >= 1.')
    if not isinstance(encoder, contract.Encoder):
      raise ValueError(f'RelativeMultiHeadAttention: encoder={encoder!r} is invalid; allowed: an Encoder '
                       f'(relpos_jax.encoders.make(...)).')
    functional.check_implementation(implementation)
    causal_only = [p.name or type(p).__name__ for p in position_terms.flatten(encoder)
                   if getattr(p, 'requires_causal', False)]
    if causal_only and not causal:
      raise ValueError(f'RelativeMultiHeadAttention: encoder {causal_only} is causal-only (requires_causal: '
                       f'keys ahead of the query would be scaled without bound); use causal=True.')
    absolute = [p.name for p in position_terms.input_parts(encoder)]
    if absolute and not model_adds_absolute:
      warnings.warn(
          f'RelativeMultiHeadAttention: the absolute part(s) {absolute} of encoder {encoder!r} act at the '
          'model input (x + p_i), not in attention, so this layer ignores them. Add '
          'relpos_jax.nn.position_terms.input_embedding(...) to the layer input as DecoderLM / BidirectionalModel '
          'do (and pass model_adds_absolute=True), or use the absolute_score encoder for a score-level term.',
          UserWarning, stacklevel=2)
    self.num_heads = num_heads
    self.model_dim = model_dim
    self.head_dim = head_dim
    self.encoder = encoder
    self.causal = bool(causal)
    self.dtype = canonical_dtype(dtype)
    self.implementation = implementation
    self.debug_checks = bool(debug_checks)
    self.parts = position_terms.attention_parts(encoder)
    inner = num_heads * head_dim
    linear = dict(use_bias=False, dtype=self.dtype, param_dtype=jnp.float32, rngs=rngs)
    self.query = nnx.Linear(model_dim, inner, **linear)
    self.key = nnx.Linear(model_dim, inner, **linear)
    self.value = nnx.Linear(model_dim, inner, **linear)
    self.out = nnx.Linear(inner, model_dim, **linear)
    self.own_position_params = bool(own_position_params)
    if self.own_position_params:
      params = position_terms.init_params(self.parts, rngs.params(), num_heads=num_heads, head_dim=head_dim,
                                          model_dim=model_dim)
      self.position_params = nnx.List([as_variables(p) for p in params])
    else:
      self.position_params = None

  # --------------------------------------------------------------------------------------------------------

  def init_position_params(self, rng: jax.Array) -> list:
    """Fresh params for this layer's attention parts (what a sharing model owns on its layers' behalf)."""
    return position_terms.init_params(self.parts, rng, num_heads=self.num_heads, head_dim=self.head_dim,
                                      model_dim=self.model_dim)

  def _params(self, position_params):
    if position_params is not None:
      params = list(position_params)
    elif self.position_params is not None:
      params = [variable_values(p) for p in self.position_params]
    else:
      raise ValueError('RelativeMultiHeadAttention was built with own_position_params=False: pass '
                       'position_params (the model-owned encoder params) to every call.')
    position_terms.check_params(self.parts, params)
    return params

  def _project(self, x):
    b, length, _ = x.shape
    shape = (b, length, self.num_heads, self.head_dim)
    return (self.query(x).reshape(shape), self.key(x).reshape(shape), self.value(x).reshape(shape))

  def _check_input(self, x):
    if x.ndim != 3 or x.shape[-1] != self.model_dim:
      raise ValueError(f'RelativeMultiHeadAttention: x must be (batch, length, {self.model_dim}), got '
                       f'shape {x.shape}.')

  def __call__(self, x: jax.Array, *, positions: jax.Array | None = None,
               padding_mask: jax.Array | None = None, position_bias: jax.Array | None = None,
               position_params=None) -> jax.Array:
    """x (B, L, model_dim) -> (B, L, model_dim).

    positions: explicit int positions (B, L), None for 0 .. L-1. padding_mask: (B, L) bool, True = real
    token (padded keys are masked). position_bias: a precomputed scalar bias of the scalar parts, shared
    across layers. position_params: the encoder params when the layer does not own them.
    """
    self._check_input(x)
    b, length, _ = x.shape
    params = self._params(position_params)
    positions = check_positions_shape(positions, b, length)
    q, k, v = self._project(x)
    if position_terms.has_kind(self.parts, contract.Kind.ROTARY):
      rot = positions if positions is not None else position_terms.contiguous_positions(b, length)
      q, k = position_terms.rotate(self.parts, params, q, k, rot, rot)
    out = functional.attend(q, k, v, parts=self.parts, params=params, causal=self.causal,
                            key_mask=padding_mask, q_positions=positions,
                            k_positions=positions, position_bias=position_bias,
                            implementation=self.implementation, debug_checks=self.debug_checks,
                            features=content_terms.token_features(self.parts, params, x))
    return self.out(out.reshape(b, length, self.num_heads * self.head_dim).astype(self.dtype))

  # --------------------------------------------------------------------------------------------------------
  # Cached decoding.

  def _cached_features(self, cache: KVCache) -> tuple:
    features = tuple(cache.features) if cache.features else (None,) * len(self.parts)
    sizes = content_terms.feature_sizes(self.parts, contract.Dims(self.num_heads, self.head_dim,
                                                                  self.model_dim))
    if len(features) != len(self.parts) or any((f is None) != (n == 0) for f, n in zip(features, sizes)):
      raise ValueError('decode: the cache holds no token features for this layer\'s contextual parts; build it '
                       'with this layer\'s init_cache.')
    return features

  def init_cache(self, batch: int, max_length: int) -> KVCache:
    """An empty cache for `batch` sequences of up to `max_length` tokens."""
    for field, value in (('batch', batch), ('max_length', max_length)):
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'init_cache: {field}={value!r} is invalid; allowed: an int >= 1.')
    shape = (batch, max_length, self.num_heads, self.head_dim)
    sizes = content_terms.feature_sizes(self.parts, contract.Dims(self.num_heads, self.head_dim,
                                                                  self.model_dim))
    features = tuple(jnp.zeros((batch, max_length, n), jnp.float32) if n else None for n in sizes)
    return KVCache(key=jnp.zeros(shape, self.dtype), value=jnp.zeros(shape, self.dtype),
                   positions=jnp.zeros((batch, max_length), jnp.int32),
                   mask=jnp.zeros((batch, max_length), bool), index=jnp.zeros((), jnp.int32),
                   features=features)

  def decode(self, x: jax.Array, cache: KVCache, *, positions: jax.Array | None = None,
             padding_mask: jax.Array | None = None, position_bias: jax.Array | None = None,
             position_params=None) -> tuple[jax.Array, KVCache]:
    """Attends C new tokens x (B, C, model_dim) to the cache and themselves; returns (y, updated cache).

    The new queries sit at q_offset = cache.index; with positions None their positions are index .. index +
    C - 1 and every cached token is assumed to have had its index as position (as in a full forward).
    Explicit `positions` (B, C) are stored in the cache, and the position terms then read positions from
    the cache. position_bias, if given, must be (H or B, H, C, max_length) for these queries.
    """
    if not self.causal:
      raise ValueError('decode needs a causal layer (causal=True): a bidirectional layer would let cached '
                       'tokens attend to tokens that do not exist yet.')
    self._check_input(x)
    b, chunk, _ = x.shape
    if cache.key.shape[0] != b:
      raise ValueError(f'decode: batch {b} does not match the cache batch {cache.key.shape[0]}.')
    max_length = cache.max_length
    check_cache_room(cache.index, chunk, max_length)
    params = self._params(position_params)
    explicit = check_positions_shape(positions, b, chunk)
    index = cache.index
    new_positions = explicit if explicit is not None else position_terms.contiguous_positions(b, chunk, index)
    q, k, v = self._project(x)
    new_mask = (jnp.ones((b, chunk), bool) if padding_mask is None
                else jnp.asarray(padding_mask, bool).reshape(b, chunk))
    start = (0, index)
    new_features = content_terms.token_features(self.parts, params, x)
    features = tuple(
        None if cached is None else jax.lax.dynamic_update_slice(cached, new, start + (0,))
        for cached, new in zip(self._cached_features(cache), new_features))
    cache = KVCache(
        key=jax.lax.dynamic_update_slice(cache.key, k.astype(cache.key.dtype), start + (0, 0)),
        value=jax.lax.dynamic_update_slice(cache.value, v.astype(cache.value.dtype), start + (0, 0)),
        positions=jax.lax.dynamic_update_slice(cache.positions, new_positions, start),
        mask=jax.lax.dynamic_update_slice(cache.mask, new_mask, start),
        index=index + chunk, features=features)
    keys = cache.key
    if position_terms.has_kind(self.parts, contract.Kind.ROTARY):
      # Keys are cached unrotated and rotated here with the cached positions: an encoder whose rotation
      # depends on the whole position array (xPos's centre, dynamic NTK's length) then sees queries and keys
      # exactly as a full forward over the tokens so far would.
      q, keys = position_terms.rotate(self.parts, params, q, keys, new_positions, cache.positions)
    # q_offset places the queries among the cached keys (the causal mask); explicit positions, when given,
    # are what the position terms read.
    out = functional.attend(q, keys, cache.value, parts=self.parts, params=params, causal=True,
                            key_mask=cache.mask, q_offset=index,
                            q_positions=explicit, k_positions=None if explicit is None else cache.positions,
                            position_bias=position_bias, implementation=self.implementation,
                            debug_checks=self.debug_checks, features=list(cache.features))
    y = self.out(out.reshape(b, chunk, self.num_heads * self.head_dim).astype(self.dtype))
    return y, cache
