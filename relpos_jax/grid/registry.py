"""The grid encoders' registry and spec strings: `make(name, **hparams)`, `names()`, `from_spec`, `to_spec`.

Separate from `relpos_jax.encoders`' registry on purpose: the 1-D sweeps (every encoder at 1-D positions, the
study suite, the registry tests) iterate `relpos_jax.encoders.names()` and must not meet encoders that read
coordinates. The spec language is the 1-D one (relpos_jax.encoders.spec): a name, a call with literal keyword
hyperparameters, or a sum with +:

    alibi2d
    irpe(method='product', mode='bias')          (bare words are read as strings too: irpe(method=product))
    swin_v2_cpb(pretrained_window=7) + rope_axial
    augment_coords(rope_axial, rescale=2.0)      (a wrapper: positional arguments are nested grid specs filling
                                                  its encoder fields in order, as the 1-D spec's randomized(rope))

and round-trips: from_spec(to_spec(e)) == e. Parsing never evaluates anything (ast.literal_eval on values).

The families register themselves here when imported (`register`); the package (`relpos_jax.grid`) imports them
all once this module is loaded, so this module never imports them (that edge would be a circle: each family
imports `register` from here).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math

import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import registry as registry_1d
from relpos_jax.encoders import spec as spec_1d
from relpos_jax.encoders.combine import Combined, combine

_REGISTRY: dict[str, type] = {}

ALLOWED = (
    "a grid encoder name (alibi2d), a call with literal keyword hyperparameters (irpe(method='product')), a "
    'wrapper with nested grid specs as positional arguments (augment_coords(rope_axial, rescale=2.0)), or a sum of '
    'them (alibi2d + rope_axial)'
)


def register(name: str):
  """Class decorator: registers a frozen-dataclass grid encoder under `name` (names distinct from the 1-D ones)."""

  def wrap(cls):
    if name in _REGISTRY and _REGISTRY[name] is not cls:
      raise ValueError(f'grid encoder name {name!r} is registered twice.')
    if name in registry_1d.names():
      raise ValueError(f'grid encoder name {name!r} is a 1-D encoder name already.')
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
      raise TypeError(f'{cls.__name__} must be a frozen dataclass to be registered.')
    cls.name = name
    _check_types_on_init(cls)
    cls.__repr__ = _repr
    _REGISTRY[name] = cls
    return cls

  return wrap


def _check_types_on_init(cls) -> None:
  """Every hyperparameter checked against its annotation and the package's bounds (`validation.typed_fields`,
  `validation.bounded_fields`, as the 1-D registry does) before the encoder's own `__post_init__`."""
  init = cls.__init__
  signature = inspect.signature(init)
  annotations = {f.name: f.type for f in dataclasses.fields(cls)}

  @functools.wraps(init)
  def checked_init(self, *args, **kwargs):
    given = dict(list(signature.bind(self, *args, **kwargs).arguments.items())[1:])
    validation.typed_fields(cls.name, given, annotations)
    validation.bounded_fields(cls.name, given)
    init(self, *args, **kwargs)

  cls.__init__ = checked_init


def _repr(encoder) -> str:
  return to_spec(encoder)


def names() -> list[str]:
  """Every registered grid encoder name, sorted."""
  return sorted(_REGISTRY)


def encoder_class(name: str) -> type:
  if name not in _REGISTRY:
    raise ValueError(f'unknown grid encoder {name!r}; allowed: {", ".join(sorted(_REGISTRY))}.')
  return _REGISTRY[name]


def is_grid_name(name: str) -> bool:
  return name in _REGISTRY


def make(name: str, **hparams):
  """The grid encoder `name` with the given hyperparameters (the rest: the reference's defaults)."""
  cls = encoder_class(name)
  fields = {f.name for f in dataclasses.fields(cls) if f.init}
  unknown = sorted(set(hparams) - fields)
  if unknown:
    raise ValueError(f'{name}: unknown hyperparameter(s) {unknown}; allowed: {sorted(fields) or "none"}.')
  return cls(**hparams)


def from_spec(spec):
  """The grid encoder a spec names (an encoder is returned as it is); a bad spec is a ValueError."""
  if isinstance(spec, contract.Encoder):
    return spec
  validation.require(isinstance(spec, str), 'grid spec', 'spec', spec, ALLOWED)
  text = spec.strip()
  try:
    tree = ast.parse(text, mode='eval')
  except SyntaxError as e:
    raise ValueError(f'grid encoder spec {spec!r} is not valid syntax ({e.msg}); allowed: {ALLOWED}.') from None
  return _build(tree.body, text)


def _build(node, text):
  if isinstance(node, ast.Name):
    return make(node.id)
  if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
    return combine(_build(node.left, text), _build(node.right, text))
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
    hparams = _nested(node, text)
    for keyword in node.keywords:
      if keyword.arg is None or keyword.arg in hparams:
        raise ValueError(f'grid encoder spec {text!r}: each hyperparameter once, as name=value; allowed: {ALLOWED}.')
      value = keyword.value
      # A bare word is a string value (irpe(method=product)): grid hyperparameters never name variables.
      hparams[keyword.arg] = value.id if isinstance(value, ast.Name) else _literal(value, keyword.arg, text)
    return make(node.func.id, **hparams)
  piece = ast.get_source_segment(text, node) or ast.dump(node)
  raise ValueError(f'grid encoder spec {text!r}: {piece!r} is not a grid encoder spec; allowed: {ALLOWED}.')


def _nested(node, text) -> dict:
  """A wrapper's positional arguments: nested grid specs for its leading encoder fields (those without a default)."""
  if not node.args:
    return {}
  cls = encoder_class(node.func.id)
  fields = [f for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING]
  if len(node.args) > len(fields):
    raise ValueError(
        f'grid encoder spec {text!r}: {node.func.id} takes {len(fields)} nested encoder(s) positionally, got '
        f'{len(node.args)}; give hyperparameters as keywords (name=value). Allowed: {ALLOWED}.'
    )
  return {field.name: _build(arg, text) for field, arg in zip(fields, node.args)}


def _literal(node, field, text):
  try:
    value = ast.literal_eval(node)
  except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
    raise ValueError(f'grid encoder spec {text!r}: {field} is not a literal value; allowed: {ALLOWED}.') from None
  as_tuple = lambda v: tuple(as_tuple(x) for x in v) if isinstance(v, (list, tuple)) else v
  return as_tuple(value)  # lists read as tuples: encoders are hashable


def _write_literal(value) -> str:
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, tuple):
    items = [_write_literal(v) for v in value]
    return f'({items[0]},)' if len(items) == 1 else f'({", ".join(items)})'
  if isinstance(value, float) and math.isinf(value):
    return '1e999' if value > 0 else '-1e999'
  return repr(value)


def _is_default(encoder, field) -> bool:
  value = getattr(encoder, field.name)
  if field.default is dataclasses.MISSING:
    return False
  return value == field.default and isinstance(value, bool) == isinstance(field.default, bool)


def to_spec(encoder) -> str:
  """The shortest spec naming `encoder` (non-default hyperparameters only); round-trips through from_spec."""
  if isinstance(encoder, Combined):
    return ' + '.join(to_spec(part) for part in encoder.parts)
  cls = type(encoder)
  name = getattr(cls, 'name', '')
  if not name or _REGISTRY.get(name) is not cls:
    return spec_1d.to_spec(encoder)  # a 1-D encoder (beside a grid one in a sum)
  fields = [f for f in dataclasses.fields(cls) if f.init]
  # A wrapper's encoder fields come first and print positionally (nested specs), the rest as keywords.
  nested = [f for f in fields if isinstance(getattr(encoder, f.name), contract.Encoder)]
  args = [to_spec(getattr(encoder, f.name)) for f in nested] + [
      f'{f.name}={_write_literal(getattr(encoder, f.name))}'
      for f in fields
      if f not in nested and not _is_default(encoder, f)
  ]
  return f'{name}({", ".join(args)})' if args else name
