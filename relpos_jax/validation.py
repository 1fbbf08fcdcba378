"""The one set of input checks: every public constructor and function validates its arguments with these.

User input is validated once, where it enters (config loading, public constructors, public functions); past
that point invariants are plain asserts or nothing. Every failure is a ValueError that names the bad value
and what is allowed, in one format:

    ValueError: t5: bidirectional='no' is invalid; allowed: True or False.

Supported positions (docs/guide, "The library"): integers p with |p| <= MAX_POSITION = 2^30 - 1, so
that every relative position j - i of two of them, and its negation, fits in int32. Concrete arrays are checked
here; traced ones (under `jax.jit`) can only be checked for their dtype, and values outside the range then
wrap around silently, as int32 arithmetic does.
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

# |position| <= MAX_POSITION keeps every j - i (and -(j - i)) inside int32.
MAX_POSITION = 2**30 - 1
# Relative positions |j - i| <= MAX_RELATIVE: every int32 but -2^31, whose negation does not exist.
MAX_RELATIVE = 2**31 - 1
# The most rows a learned table (or the number of positions a wrapper draws from) may have: 2^20 rows of a
# few hundred float32 features is already a gigabyte; anything beyond is a typo, not an experiment.
MAX_TABLE_ROWS = 2**20
# The largest magnitude of any float hyperparameter (a base, a slope, a scale, an initial value): a million
# times any published value, and small enough that it times every supported distance (2^31) stays finite in
# float32 (3.4e38). A larger value is a typo whose results would overflow.
MAX_SCALE = 1e12
# The most taps of a convolution an encoder unrolls (DAPE's kernel over keys, PaTH's short convolution over
# tokens): the papers use 3 or 4, and each tap is one more product in the compiled program.
MAX_KERNEL = 63


class InvalidValue(ValueError):
  """A bad argument. `who`, `field`, `value`, `allowed` and `depends_on` (the other fields the rule involves)
  let a caller such as the config loader name its own keys (`config.model.<field>`) without parsing the text."""

  def __init__(
      self, who: str, field: str, value, allowed: str, depends_on: tuple[str, ...] = (), message: str | None = None
  ):
    super().__init__(message or f'{who}: {field}={value!r} is invalid; allowed: {allowed}.')
    self.who, self.field, self.value, self.allowed, self.depends_on = who, field, value, allowed, depends_on


def invalid(who: str, field: str, value, allowed: str, depends_on: tuple[str, ...] = ()) -> InvalidValue:
  """The one error for a bad argument: names the value and what is allowed."""
  return InvalidValue(who, field, value, allowed, depends_on)


def require(ok: bool, who: str, field: str, value, allowed: str, depends_on: tuple[str, ...] = ()) -> None:
  if not ok:
    raise invalid(who, field, value, allowed, depends_on)


def is_int(value) -> bool:
  """A Python or numpy integer, not a bool."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(who: str, field: str, value, minimum: int = 1, maximum: int | None = None) -> int:
  """An int (not bool) in [minimum, maximum]; returns it as a Python int."""
  ok = is_int(value) and value >= minimum and (maximum is None or value <= maximum)
  require(ok, who, field, value, f'an int >= {minimum}' + ('' if maximum is None else f' and <= {maximum}'))
  return int(value)


def generator(who: str, rng) -> None:
  """A numpy Generator (the data pipeline's randomness); anything else is a TypeError."""
  if not isinstance(rng, np.random.Generator):
    raise TypeError(
        f'{who}: rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed)), got ' f'{type(rng).__name__}.'
    )


def boolean(who: str, field: str, value) -> bool:
  """True or False exactly: 'no', 0 and None are refused (they would otherwise read as truthy or falsy)."""
  require(isinstance(value, (bool, np.bool_)), who, field, value, 'True or False')
  return bool(value)


_FIELD_TYPES = {
    'bool': ('True or False', lambda v: isinstance(v, (bool, np.bool_))),
    'int': ('an int', is_int),
    'float': ('a number', lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)),
    'str': ('a string', lambda v: isinstance(v, str)),
}


def typed_fields(who: str, fields: dict, annotations: dict) -> None:
  """Each value against its field's annotation ('bool', 'int', 'float', 'str', 'X | None'); others unchecked.

  The one type check of every hyperparameter of every registered encoder (`registry.register` runs it before
  the encoder's own checks): `t5(bidirectional='no')` and `shaw_vector(use_value_embeddings=0)` are refused
  instead of being read as truthy or falsy.
  """
  for field, value in fields.items():
    annotation = str(annotations.get(field, '')).replace(' ', '')
    optional = annotation.endswith('|None')
    allowed, ok = _FIELD_TYPES.get(annotation.removesuffix('|None'), (None, None))
    if ok is None or (optional and value is None):
      continue
    require(ok(value), who, field, value, allowed + (' or None' if optional else ''))


def _numbers_in(value):
  """The ints and floats of a hyperparameter value (itself, or the items of a tuple), bools excluded."""
  items = value if isinstance(value, tuple) else (value,)
  return [v for v in items if isinstance(v, numbers.Real) and not isinstance(v, bool)]


def bounded_fields(who: str, fields: dict) -> None:
  """Every int hyperparameter (or int in a tuple) within +-MAX_POSITION, every float finite and within
  +-MAX_SCALE: the one upper bound of every size, count, window and scale of every registered encoder
  (`registry.register` runs it; encoders add tighter bounds where a size allocates, e.g. table rows).

  `rerope(rope, window=10**12)` is refused here with a message, not by JAX's OverflowError later, and
  `monotone(t5, init_slope=1e30)` before its parameters are non-finite.
  """
  for field, value in fields.items():
    for v in _numbers_in(value):
      if is_int(v):
        require(
            abs(v) <= MAX_POSITION,
            who,
            field,
            value,
            f'ints of magnitude <= {MAX_POSITION} (2^30 - 1: sizes, counts and windows must fit int32 with room for '
            'the positions they meet)',
        )
      else:
        require(
            math.isfinite(v) and abs(v) <= MAX_SCALE,
            who,
            field,
            value,
            f'finite numbers of magnitude <= {MAX_SCALE:g} (larger scales overflow float32 once multiplied by a '
            'distance or a score)',
        )


def choice(who: str, field: str, value, choices) -> None:
  require(value in tuple(choices), who, field, value, f'one of {tuple(choices)}')


def number(who: str, field: str, value, *, above=None, at_least=None, above_name=None, at_most=None) -> float:
  """A finite real (not bool) > above / >= at_least (and <= at_most); `above_name` names the field the bound
  comes from."""
  ok = (
      isinstance(value, numbers.Real)
      and not isinstance(value, bool)
      and math.isfinite(value)
      and (above is None or value > above)
      and (at_least is None or value >= at_least)
      and (at_most is None or value <= at_most)
  )
  bound = ''
  if above is not None:
    bound = f' > {above_name}={above!r}' if above_name else f' > {above}'
  elif at_least is not None:
    bound = f' >= {at_least}'
  if at_most is not None:
    bound += f' and <= {at_most:g}'
  require(ok, who, field, value, f'a finite number{bound}')
  return float(value)


def head_dim(who: str, model_dim: int, num_heads: int, head_dim_=None) -> int:
  """The per-head size: head_dim when given (an int >= 1), else model_dim // num_heads, which must be exact.

  The one `model_dim % num_heads` check (ModelConfig, the NNX layer and its Linen twin call it).
  """
  if head_dim_ is not None:
    return positive_int(who, 'head_dim', head_dim_)
  if model_dim % num_heads:
    raise InvalidValue(
        who,
        'model_dim',
        model_dim,
        f'a multiple of num_heads={num_heads}',
        ('num_heads',),
        f'{who}: model_dim={model_dim} is not divisible by num_heads={num_heads}; allowed: a '
        f'multiple of num_heads (or an explicit head_dim where the layer takes one).',
    )
  return model_dim // num_heads


def shaped(who: str, field: str, x, expected: tuple) -> None:
  """x has len(expected) axes and, where `expected` holds an int, exactly that size; strings name free axes.

  shaped('decode', 'x', x, ('batch', 'length', 64))   # -> "x must be (batch, length, 64), got shape ..."
  """
  shape = tuple(getattr(x, 'shape', np.shape(x)))
  ok = len(shape) == len(expected) and all(isinstance(e, str) or s == e for s, e in zip(shape, expected))
  if not ok:
    raise ValueError(f'{who}: {field} must be ({", ".join(str(e) for e in expected)}), got shape {shape}.')


def concrete(x) -> np.ndarray | None:
  """The values of x when they are known now, None when traced (inside jit / grad / vmap)."""
  if isinstance(x, jax.core.Tracer):
    return None
  return np.asarray(x)


def check_range(who: str, field: str, values: np.ndarray, limit: int) -> None:
  """ValueError unless every value is in [-limit, limit]."""
  if values.size:
    low, high = int(values.min()), int(values.max())
    if low < -limit or high > limit:
      raise ValueError(
          f'{who}: {field} holds {low if low < -limit else high}, outside the supported range '
          f'[-{limit}, {limit}] (relative positions must fit in int32; see relpos_jax.validation).'
      )


def _describe(arr) -> str:
  return f'{arr.dtype} {tuple(arr.shape)}'


def int_array(who: str, field: str, x, *, limit: int = MAX_POSITION, hint: str = '') -> jax.Array:
  """An integer array (or int) -> int32, its values checked against +-limit when concrete.

  Refuses float and bool arrays (a position 1.5 would be truncated, True read as 1) and, when the values are
  known, anything outside [-limit, limit] (an int64 2^32 + k would be read as k, -2^31 negated as itself).
  Traced arrays (under jit) are checked for their dtype only.
  """
  arr = x if isinstance(x, jax.Array) else np.asarray(x)
  if not jnp.issubdtype(arr.dtype, jnp.integer):
    raise ValueError(
        f'{who}: {field} must be an int array (integer positions), got {_describe(arr)}'
        + (f' = {arr.tolist()!r}' if arr.size <= 4 and not isinstance(arr, jax.core.Tracer) else '')
        + '.'
        + (f' {hint}' if hint else '')
    )
  values = concrete(arr)
  if values is not None:
    check_range(who, field, values, limit)
  return jnp.asarray(arr, jnp.int32)


def positions(who: str, x, shape, field: str = 'positions') -> jax.Array:
  """Integer positions (batch, length) of exactly `shape` -> int32; see `int_array` for what is refused."""
  arr = x if isinstance(x, jax.Array) else np.asarray(x)
  if tuple(arr.shape) != tuple(shape) or not jnp.issubdtype(arr.dtype, jnp.integer):
    raise ValueError(
        f'{who}: {field} must be an int array of shape (batch, length) = {tuple(shape)}, got ' f'{_describe(arr)}.'
    )
  return int_array(who, field, arr)


def offset(who: str, value, field: str = 'q_offset'):
  """An integer offset: a Python int stays one (static), an int scalar array (possibly traced) -> int32."""
  if is_int(value):
    check_range(who, field, np.asarray(value), MAX_POSITION)
    return int(value)
  return int_array(who, field, value)


def mask(who: str, x, shape, field: str = 'padding_mask') -> jax.Array:
  """A bool array of exactly `shape`, True = a real token; ints and floats are refused, never cast."""
  arr = x if isinstance(x, jax.Array) else np.asarray(x)
  if tuple(arr.shape) != tuple(shape) or arr.dtype != np.bool_:
    raise ValueError(
        f'{who}: {field} must be bool of shape (batch, length) = {tuple(shape)} with True = real '
        f'token (the padding/key mask), got {_describe(arr)}.'
    )
  return jnp.asarray(arr)


def tokens(who: str, x, vocab_size: int) -> jax.Array:
  """Int token ids (batch, length), in [0, vocab_size) when concrete.

  Under jit the ids cannot be inspected: an id outside the range reads a clipped (or NaN) embedding row and
  gives meaningless logits, so validate data before it reaches a jitted step (the data pipeline does).
  """
  arr = x if isinstance(x, jax.Array) else np.asarray(x)
  if arr.ndim != 2 or not jnp.issubdtype(arr.dtype, jnp.integer):
    raise ValueError(f'{who}: tokens must be an int array (batch, length), got {_describe(arr)}.')
  values = concrete(arr)
  if values is not None and values.size:
    low, high = int(values.min()), int(values.max())
    require(
        low >= 0 and high < vocab_size,
        who,
        'tokens',
        low if low < 0 else high,
        f'token ids in [0, vocab_size={vocab_size})',
    )
  return jnp.asarray(arr)
