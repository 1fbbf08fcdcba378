"""The registry of encoders by name: `make(name, **hparams)` and `names()`; and `to_spec`, the spec that names a
registered encoder (every registered encoder's repr). Reading specs (`relpos_jax.encoders.spec.from_spec`) builds on
this module, so the writer lives here, below the reader: no import runs back up."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.combine import Combined

_REGISTRY: dict[str, type[contract.Encoder]] = {}


def register(name: str):
  """Class decorator: registers a frozen-dataclass encoder under `name`."""

  def wrap(cls):
    if name in _REGISTRY and _REGISTRY[name] is not cls:
      raise ValueError(f'encoder name {name!r} is registered twice ({_REGISTRY[name].__name__}, ' f'{cls.__name__}).')
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
      raise TypeError(f'{cls.__name__} must be a frozen dataclass to be registered.')
    cls.name = name
    _check_types_on_init(cls)
    _DATACLASS_REPR[cls] = cls.__repr__
    cls.__repr__ = spec_repr
    _REGISTRY[name] = cls
    return cls

  return wrap


def spec_repr(encoder: contract.Encoder) -> str:
  """An encoder's repr is its spec string ('rope(base=500.0)', 'rerope(rope) + alibi'), not the dataclass's
  every field: error messages that embed an encoder stay one readable line, and the text can be pasted back
  into a config. An encoder no spec can name (a non-literal hyperparameter) keeps the dataclass repr."""
  try:
    return to_spec(encoder)
  except ValueError:
    return _DATACLASS_REPR[type(encoder)](encoder)


_DATACLASS_REPR: dict[type, object] = {}


def _check_types_on_init(cls) -> None:
  """Every hyperparameter is checked against its annotation (`validation.typed_fields`) and the upper bound
  of every number (`validation.bounded_fields`) before the encoder's own `__post_init__` sees it."""
  init = cls.__init__
  signature = inspect.signature(init)
  annotations = {f.name: f.type for f in dataclasses.fields(cls)}

  @functools.wraps(init)
  def checked_init(self, *args, **kwargs):
    try:
      bound = signature.bind(self, *args, **kwargs)
    except TypeError:
      bound = signature.bind_partial(self, *args, **kwargs)  # Unknown arguments: init's own TypeError.
      missing = [
          f.name
          for f in dataclasses.fields(cls)
          if f.init
          and f.default is dataclasses.MISSING
          and f.default_factory is dataclasses.MISSING
          and f.name not in bound.arguments
      ]
      validation.require(
          not missing,
          cls.name,
          missing[0] if missing else '',
          None,
          f'a value: {missing} has no default (a wrapper needs the encoder it wraps: '
          f'{cls.name}(rope) in a spec, make({cls.name!r}, {missing[0] if missing else ""}='
          f'make("rope")) in Python)',
      )
      raise
    given = dict(list(bound.arguments.items())[1:])
    validation.typed_fields(cls.name, given, annotations)
    validation.bounded_fields(cls.name, given)
    init(self, *args, **kwargs)

  cls.__init__ = checked_init


def names() -> list[str]:
  """Every registered encoder name, sorted."""
  return sorted(_REGISTRY)


def encoder_class(name: str) -> type[contract.Encoder]:
  if name not in _REGISTRY:
    raise ValueError(f'unknown encoder {name!r}; allowed: {", ".join(names())}.')
  return _REGISTRY[name]


def make(name: str, **hparams) -> contract.Encoder:
  """Builds the encoder registered as `name` with the given hyperparameters (the rest: paper defaults).

  Raises ValueError for an unknown name, an unknown hyperparameter, or an invalid value.
  """
  cls = encoder_class(name)
  fields = {f.name for f in dataclasses.fields(cls) if f.init}
  unknown = sorted(set(hparams) - fields)
  if unknown:
    raise ValueError(f'{name}: unknown hyperparameter(s) {unknown}; allowed: {sorted(fields) or "none"}.')
  return cls(**hparams)


def make_default(name: str, wrapped: contract.Encoder | None = None) -> contract.Encoder:
  """The encoder `name` with every default (what a sweep over `names()` builds).

  A wrapper's required encoder field (randomized's `base`) gets `wrapped`, by default a small learnable
  scalar bias, `shaw(max_distance=4)`.
  """
  cls = encoder_class(name)
  filled = {}
  for field in dataclasses.fields(cls):
    if field.init and field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
      if 'Encoder' not in str(field.type):
        raise ValueError(
            f'{name}.{field.name} has no default and takes no encoder; make({name!r}, ' f'{field.name}=...) needs it.'
        )
      filled[field.name] = make('shaw', max_distance=4) if wrapped is None else wrapped
  return make(name, **filled)


# Spec literals: the hyperparameter values a spec can hold (`relpos_jax.encoders.spec` reads them).
LITERAL_TYPES = (bool, int, float, str, type(None))


def to_spec(encoder: contract.Encoder) -> str:
  """The shortest spec naming `encoder`: its registered name and only its non-default hyperparameters.

  Sums print as 'a + b'; a wrapper's nested encoders print positionally. Raises ValueError for an encoder
  no spec can name (an unregistered class, a non-literal hyperparameter).
  """
  if isinstance(encoder, Combined):
    return ' + '.join(to_spec(part) for part in encoder.parts)
  if not isinstance(encoder, contract.Encoder):
    raise ValueError(f'to_spec needs an encoder, got {encoder!r}.')
  cls = type(encoder)
  name = cls.name
  if not name or encoder_class(name) is not cls:
    raise ValueError(
        f'{cls.__name__} is not a registered encoder; a spec can only name registered ' f'ones ({", ".join(names())}).'
    )
  fields = [f for f in dataclasses.fields(cls) if f.init]
  leading = 0  # Nested encoders must be a prefix of the fields: they print positionally.
  while leading < len(fields) and isinstance(getattr(encoder, fields[leading].name), contract.Encoder):
    leading += 1
  positional = list(fields[:leading])
  while positional and _is_default(encoder, positional[-1]):
    positional.pop()  # Trailing default encoders can go; earlier ones hold their place.
  args = [to_spec(getattr(encoder, f.name)) for f in positional]
  for f in fields[leading:]:
    if _is_default(encoder, f):
      continue
    args.append(f'{f.name}={_write_literal(encoder, f.name, getattr(encoder, f.name))}')
  return f'{name}({", ".join(args)})' if args else name


def _is_default(encoder, field: dataclasses.Field) -> bool:
  if field.default is not dataclasses.MISSING:
    default = field.default
  elif field.default_factory is not dataclasses.MISSING:
    default = field.default_factory()
  else:
    return False
  value = getattr(encoder, field.name)
  # True == 1 == 1.0 in Python: a bool only counts as default where the default is a bool too.
  return value == default and isinstance(value, bool) == isinstance(default, bool)


def _write_literal(encoder, field: str, value) -> str:
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, tuple):
    items = [_write_literal(encoder, field, v) for v in value]
    return f'({items[0]},)' if len(items) == 1 else f'({", ".join(items)})'
  if isinstance(value, float) and math.isinf(value):
    return '1e999' if value > 0 else '-1e999'  # literal_eval reads 1e999 as inf; 'inf' is a name.
  if isinstance(value, contract.Encoder):
    raise ValueError(
        f'{type(encoder).__name__}.{field} holds an encoder after a hyperparameter field; '
        f'a spec can only pass nested encoders as the leading positional arguments.'
    )
  if not isinstance(value, LITERAL_TYPES) or (isinstance(value, float) and math.isnan(value)):
    raise ValueError(f'{type(encoder).__name__}.{field}={value!r} cannot be written as a spec literal.')
  return repr(value)
