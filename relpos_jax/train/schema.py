"""The schema engine of the run config: a section is a frozen dataclass whose fields are `key(...)`s (the annotation
is the key's type, the metadata its bounds or choices), and `parse_section` turns one node of a config (a
ConfigDict as files and flags give it, or a plain dict as config.json holds it) into that section, checking
unknown and missing keys, types and bounds, and raising ConfigError naming the key.

The sections of a run (`relpos_jax.train.config`), the study's and the suite's (`relpos_jax.study.plan`,
`relpos_jax.study.suite`) and the resolution study's are all written with it; nothing here knows a section.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from typing import Any, Mapping

import ml_collections


class ConfigError(ValueError):
  """A config that cannot run; the message names the offending key."""


def invalid_key(key: str, value, allowed: str) -> ConfigError:
  return ConfigError(f'config.{key}={value!r} is invalid: {allowed}.')


# ------------------------------------------------------------------------------------------ the schema
def key(default=dataclasses.MISSING, *, ge=None, gt=None, le=None, lt=None, choices=None):
  """A config key: a dataclass field whose annotation is its type, with the bounds or choices it meets.

  No default: the key is required. Bounds apply to a number, or to every element of a tuple of numbers.
  """
  return dataclasses.field(default=default, metadata={'ge': ge, 'gt': gt, 'le': le, 'lt': lt, 'choices': choices})


def is_section(node) -> bool:
  """Whether `node` holds keys: a ConfigDict (files, flags) or a mapping (config.json, `Config.to_dict`)."""
  return isinstance(node, (ml_collections.ConfigDict, Mapping))


def keys_of(node) -> list[str]:
  return list(node.keys()) if is_section(node) else []


def is_int(v) -> bool:
  return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def is_number(v) -> bool:
  return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _bounds_text(meta) -> str:
  parts = [
      f'{op} {meta[name] if isinstance(meta[name], int) else format(meta[name], "g")}'
      for name, op in (('ge', '>='), ('gt', '>'), ('le', '<='), ('lt', '<'))
      if meta[name] is not None
  ]
  return ' ' + ' and '.join(parts) if parts else ''


def _in_bounds(v, meta) -> bool:
  return (
      (meta['ge'] is None or v >= meta['ge'])
      and (meta['gt'] is None or v > meta['gt'])
      and (meta['le'] is None or v <= meta['le'])
      and (meta['lt'] is None or v < meta['lt'])
  )


def _conform(value, hint, meta) -> tuple[bool, Any, str]:
  """(ok, value as the field holds it, what is allowed) for a value of a field typed `hint`."""
  args = typing.get_args(hint)
  if isinstance(hint, types.UnionType) and type(None) in args:
    inner = next(a for a in args if a is not type(None))
    ok, value, allowed = (True, None, '') if value is None else _conform(value, inner, meta)
    return ok, value, 'None or ' + _conform(1, inner, meta)[2]
  if meta['choices'] is not None:
    return value in meta['choices'], value, f'one of {meta["choices"]}'
  if hint is int:
    return is_int(value) and _in_bounds(value, meta), value, 'an int' + _bounds_text(meta)
  if hint is float:
    return is_number(value) and _in_bounds(value, meta), value, 'a number' + _bounds_text(meta)
  if hint is bool:
    return isinstance(value, bool), value, 'True or False'
  if hint is str:
    return isinstance(value, str) and bool(value.strip()), value, 'a non-empty string'
  if hint is dict:
    ok = is_section(value)
    return ok, dict(value) if ok else value, 'a dict of keyword arguments'
  assert typing.get_origin(hint) is tuple, f'config schema: unsupported field type {hint!r}'
  ok = isinstance(value, (tuple, list)) and all(_conform(x, args[0], meta)[0] for x in value)
  return ok, tuple(value) if ok else value, f'a tuple (may be empty), each element {_conform(1, args[0], meta)[2]}'


def check_keys(where: str, node, allowed, required) -> None:
  """Unknown and missing keys of `where` ('config.model'), named in the error with the allowed keys."""
  if not is_section(node):
    raise ConfigError(f'{where} must be a ConfigDict, got {type(node).__name__}.')
  present = set(keys_of(node))
  unknown = sorted(present - set(allowed))
  if unknown:
    raise ConfigError(
        f'unknown key(s) {", ".join(f"{where}.{k}" for k in unknown)}; '
        f'allowed in {where}: {", ".join(sorted(allowed))}.'
    )
  missing = sorted(k for k in required if k not in present)
  if missing:
    raise ConfigError(f'missing key(s) {", ".join(f"{where}.{k}" for k in missing)}.')


def parse_section(cls, path: str, node, **given):
  """The frozen section `cls` from the ConfigDict `node` at `config.<path>`: keys, types and bounds checked.

  `given`: fields already converted by the caller (nested sections), not read from `node`.
  """
  fields = [f for f in dataclasses.fields(cls) if f.init]
  hints = typing.get_type_hints(cls)
  where = f'config.{path}' if path else 'config'
  required = [f.name for f in fields if f.default is dataclasses.MISSING and f.name not in given]
  check_keys(where, node, [f.name for f in fields], required)
  values = dict(given)
  for f in fields:
    if f.name not in given and f.name in keys_of(node):
      values[f.name] = typed_value(f, hints[f.name], node[f.name], f'{path}.{f.name}' if path else f.name)
  return cls(**values)


def typed_value(field: dataclasses.Field, hint, value, name: str):
  ok, converted, allowed = _conform(value, hint, field.metadata)
  if not ok:
    raise invalid_key(name, value, f'allowed: {allowed}')
  return converted
