"""Config files and command-line overrides: where a run config comes from, before `relpos_jax.train.config.parse`.

A config file is a Python module whose `get_config(arg)` returns an `ml_collections.ConfigDict` (the big_vision
style: `--config=configs/algorithmic.py:published` passes 'published' to `get_config`, see `parse_variants`),
overridden by dotted keys (`--config.model.num_layers=4`, or `load_config(path, {'model.num_layers': 4})`).
The ConfigDict stays here and at the command line; everything below them reads the typed `Config`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from typing import Any, Mapping

import ml_collections

from relpos_jax.train import config as config_lib
from relpos_jax.train import schema
from relpos_jax.train.schema import ConfigError


def parse_variants(arg: str | None, allowed) -> set[str]:
  """The variants named by a config's `get_config(arg)`: 'published,study' -> {'published', 'study'}.

  `--config=configs/algorithmic.py:published` calls `get_config('published')` (big_vision's style).
  """
  names = {a.strip() for a in (arg or '').split(',') if a.strip()}
  unknown = sorted(names - set(allowed))
  if unknown:
    raise ConfigError(
        f'unknown config variant(s) {unknown}; allowed: {sorted(allowed)} (comma-separated, '
        "after the path: 'configs/x.py:variant')."
    )
  return names


def config_from_file(path: str | os.PathLike) -> ml_collections.ConfigDict:
  """`get_config(arg)` of the file of `path` ('configs/algorithmic.py:published'), locked as the
  command line locks it; a file that does not exist is named."""
  path = os.fspath(path)
  filename, sep, arg = path.partition(':')
  if not os.path.isfile(filename):
    raise ConfigError(f'config file {filename!r} not found (from {path!r}; working directory {os.getcwd()}).')
  module_spec = importlib.util.spec_from_file_location(f'_relpos_config_{abs(hash(filename))}', filename)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  config = module.get_config(arg) if sep else module.get_config()
  config.lock()
  return config


def override(config: ml_collections.ConfigDict, key: str, value) -> None:
  """`config.<key> = value` for a dotted key that exists; an unknown key is named with the allowed keys."""
  *parents, leaf = key.split('.')
  node = config
  for i, part in enumerate(parents + [leaf]):
    if part not in schema.keys_of(node) or (i < len(parents) and not isinstance(node[part], ml_collections.ConfigDict)):
      where = '.'.join(['config'] + parents[:i])
      unknown = '' if i == len(parents) else f' {where}.{part}'
      raise ConfigError(
          f'override config.{key}: unknown key{unknown}; allowed in {where}: '
          f'{", ".join(sorted(schema.keys_of(node)))}.'
      )
    if i < len(parents):
      node = node[part]
  if value is not dataclasses.MISSING:
    node[leaf] = value


def load_config(
    path: str | os.PathLike, overrides: Mapping[str, Any] | None = None, *, validate_config: bool = True
) -> ml_collections.ConfigDict:
  """`get_config()` of a config file, with dotted-key overrides: what `--config=... --config.a.b=v` does.

  For notebooks and tests: `load_config('configs/lm.py', {'model.num_layers': 4})`, and variants:
  `load_config('configs/algorithmic.py:published')`. Unknown override keys raise (the config is locked,
  as config_flags locks it). A study config (with a `study` section) is validated by
  `relpos_jax.study.load_study_config`.
  """
  config = config_from_file(path)
  for name, value in (overrides or {}).items():
    override(config, name, value)
  if validate_config:
    config_lib.validate(config)
  return config


def as_dict(config) -> dict:
  """A config as a plain nested dict: a ConfigDict's `to_dict()` (files, flags), or a mapping copied (config.json,
  `Config.to_dict`). What the entry points that take the user's config hand to the parsers."""
  if isinstance(config, ml_collections.ConfigDict):
    return config.to_dict()
  if not isinstance(config, Mapping):
    raise ConfigError(f'config must be a ConfigDict or a dict of its keys, got {type(config).__name__}.')
  return {k: dict(v) if isinstance(v, Mapping) else v for k, v in config.items()}
