"""The training configuration: its keys, and `validate`, which rejects a bad config before anything runs.

Configs are `ml_collections.ConfigDict`s returned by `get_config()` in `configs/*.py` (the big_vision
style) and overridden from the command line (`--config.model.num_layers=4`). Every key a run reads is
listed in `SCHEMA` below with what it allows; `validate(config)` checks:

  * unknown keys and missing keys (a typo would otherwise silently train the default),
  * each value (type and range), the encoder spec string (parsed with `relpos_jax.encoders.spec`),
  * combinations that cannot work: a learned absolute position table shorter than the longest sequence
    the run trains or evaluates on, a global batch size the devices cannot split evenly, warmup longer
    than training, `model_dim` not divisible by `num_heads`,

and raises one ValueError whose message names the key (`config.model.num_heads=3: ...`). A combination
that runs but is usually a mistake (NoPE in a bidirectional model, which is then blind to
token order) is a warning, not an error: it is a legitimate control for order-free tasks such as parity.

Layout of a config (see configs/lm.py and configs/algorithmic.py for complete examples):

  seed                 int: parameters, data stream, dropout and randomized positions all derive from it
  model.*              the transformer (everything of `relpos_jax.nn.models.ModelConfig` but the vocabulary
                       sizes, which come from the data); `model.encoder` is an encoder spec string
  data.source          'corpus' (byte-level LM, causal) or 'task' (algorithmic task; bidirectional, or
                       causal for count_copy), plus the keys of that source (SOURCE_KEYS)
  optim.*              AdamW with global-norm clipping and a warmup + cosine (or constant) schedule
  train.*              steps, global batch size, logging and checkpoint cadence
  eval.*               lengths evaluated during and after training
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import numbers
import os
import warnings
from typing import Any, Callable, Mapping

import ml_collections

SECTIONS = ('model', 'data', 'optim', 'train', 'eval')
TOP_LEVEL_KEYS = ('seed',) + SECTIONS
SOURCES = ('corpus', 'task')
SCHEDULES = ('warmup_cosine', 'warmup_constant')
LOSS_REDUCTIONS = ('token_mean', 'sequence_sum')
# The vocabulary sizes are fixed by the data (corpus bytes, task alphabet), never by the config.
DATA_DERIVED_MODEL_FIELDS = ('vocab_size', 'output_vocab_size')


# ----------------------------------------------------------------------------------------- value checks
def _is_int(v) -> bool:
  return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def int_at_least(minimum: int) -> tuple[Callable[[Any], bool], str]:
  return (lambda v: _is_int(v) and v >= minimum), f'an int >= {minimum}'


def number_in(low: float, high: float, *, low_open=False, high_open=False):
  def ok(v):
    if not _is_number(v):
      return False
    return (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
  text = f'a number in {"(" if low_open else "["}{low}, {high}{")" if high_open else "]"}'
  return ok, text


def one_of(*choices):
  return (lambda v: v in choices), f'one of {choices}'


def optional(check):
  ok, text = check
  return (lambda v: v is None or ok(v)), f'None or {text}'


BOOL = (lambda v: isinstance(v, bool)), 'True or False'
STRING = (lambda v: isinstance(v, str) and bool(v.strip())), 'a non-empty string'
POSITIVE_NUMBER = number_in(0.0, math.inf, low_open=True, high_open=True)
LENGTHS = ((lambda v: isinstance(v, (tuple, list)) and all(_is_int(x) and x >= 1 for x in v)),
           'a tuple of ints >= 1 (may be empty)')
MAPPING = (lambda v: isinstance(v, (Mapping, ml_collections.ConfigDict))), 'a dict of keyword arguments'

# Every key of every section but `model` (whose keys are ModelConfig's fields, see `_model_fields`).
SCHEMA: dict[str, dict[str, tuple]] = {
    'optim': {
        'learning_rate': POSITIVE_NUMBER,
        'schedule': one_of(*SCHEDULES),
        'warmup_steps': int_at_least(0),
        'end_lr_fraction': number_in(0.0, 1.0),     # cosine decays to learning_rate * end_lr_fraction
        'weight_decay': number_in(0.0, math.inf, high_open=True),
        'b1': number_in(0.0, 1.0, high_open=True),
        'b2': number_in(0.0, 1.0, high_open=True),
        'eps': POSITIVE_NUMBER,
        'grad_clip_norm': optional(POSITIVE_NUMBER),
    },
    'train': {
        'steps': int_at_least(1),
        'batch_size': int_at_least(1),              # global: split over every device of the mesh
        'log_every': int_at_least(1),
        'checkpoint_every': int_at_least(1),
        'keep_checkpoints': int_at_least(1),
        # Optional. TensorBoard scalars beside metrics.jsonl (relpos_jax.train.tensorboard); absent or None:
        # written if tensorboardX is installed.
        'tensorboard': optional(BOOL),
    },
    'eval': {
        'every': int_at_least(0),                   # 0: evaluate only at the end of training
        'lengths': LENGTHS,                         # corpus: window lengths; task: input lengths n
        'batch_size': int_at_least(1),
        'num_examples': int_at_least(1),            # per length (corpus: at most this many windows)
        # Tasks: pad each evaluation set to a multiple of this many tokens (keys masked), so many lengths
        # share few compiled shapes. 1: no padding (the only value for the corpus, whose windows are exact).
        'pad_multiple': int_at_least(1),
        'seed': int_at_least(0),                    # the eval sets do not depend on the training seed
        # Optional. Corpus: evaluate every length on about this many scored tokens (windows = num_tokens //
        # length, overriding num_examples), so every length reads the same amount of validation text.
        'num_tokens': optional(int_at_least(1)),
        # Optional. Cap on tokens per evaluation batch: long lengths get proportionally fewer rows (at
        # least one per device), so evaluating far beyond the training length fits in memory.
        'max_tokens_per_batch': optional(int_at_least(1)),
    },
}
# Keys a section may leave out (read with .get, None when absent).
OPTIONAL_KEYS: dict[str, tuple[str, ...]] = {'eval': ('num_tokens', 'max_tokens_per_batch'),
                                              'train': ('tensorboard',)}
SOURCE_KEYS: dict[str, dict[str, tuple]] = {
    'corpus': {
        'source': one_of(*SOURCES),
        # 'stdlib' (the built-in corpus) or a path: a directory of text files, one file, or a glob pattern.
        'corpus': STRING,
        'max_train_bytes': optional(int_at_least(1)),
        'train_length': int_at_least(1),
    },
    'task': {
        'source': one_of(*SOURCES),
        'task': STRING,
        'task_kwargs': MAPPING,
        'min_length': int_at_least(1),
        'max_length': int_at_least(1),
        'num_buckets': int_at_least(1),
        # token_mean: mean cross-entropy over the scored positions; sequence_sum: per example, the sum
        # over its output positions, averaged over the batch (the reference code of Ruoss et al. 2023).
        'loss_reduction': one_of(*LOSS_REDUCTIONS),
    },
}
# Model keys whose values are checked here rather than left to ModelConfig (friendlier messages).
MODEL_CHECKS: dict[str, tuple] = {
    'encoder': STRING,
    'num_layers': int_at_least(1),
    'model_dim': int_at_least(1),
    'num_heads': int_at_least(1),
    'mlp_ratio': POSITIVE_NUMBER,
    'dropout_rate': number_in(0.0, 1.0, high_open=True),
}


def _model_fields() -> dict[str, dataclasses.Field]:
  """ModelConfig's fields a config sets (all but the vocabulary sizes)."""
  from relpos_jax.nn.models import ModelConfig  # Late: the config module loads without the model stack.
  return {f.name: f for f in dataclasses.fields(ModelConfig)
          if f.init and f.name not in DATA_DERIVED_MODEL_FIELDS}


# ---------------------------------------------------------------------------------------------- errors
class ConfigError(ValueError):
  """A config that cannot run; the message names the offending key."""


def _fail(key: str, value, allowed: str) -> ConfigError:
  return ConfigError(f'config.{key}={value!r} is invalid: {allowed}.')


def _keys(section) -> list[str]:
  if isinstance(section, ml_collections.ConfigDict):
    return list(section.keys())
  if isinstance(section, Mapping):
    return list(section)
  return []


def _get(config, path: str):
  node = config
  for part in path.split('.'):
    node = node[part]
  return node


def _check_keys(section_name: str, section, allowed, required) -> None:
  """Unknown and missing keys of `config.<section_name>` ('' for the top level), named in the error."""
  where = f'config.{section_name}' if section_name else 'config'
  if not isinstance(section, (ml_collections.ConfigDict, Mapping)):
    raise ConfigError(f'{where} must be a ConfigDict, got {type(section).__name__}.')
  present = set(_keys(section))
  unknown = sorted(present - set(allowed))
  if unknown:
    raise ConfigError(f'unknown key(s) {", ".join(f"{where}.{k}" for k in unknown)}; '
                      f'allowed in {where}: {", ".join(sorted(allowed))}.')
  missing = sorted(set(required) - present)
  if missing:
    raise ConfigError(f'missing key(s) {", ".join(f"{where}.{k}" for k in missing)}.')


def _check_values(section_name: str, section, checks: Mapping[str, tuple]) -> None:
  for key, (ok, allowed) in checks.items():
    if key in _keys(section):
      value = section[key]
      if not ok(value):
        raise _fail(f'{section_name}.{key}', value, f'allowed: {allowed}')


# -------------------------------------------------------------------------------------------- validate
def validate(config, *, num_devices: int | None = None) -> list[str]:
  """Raises ConfigError (a ValueError) naming the key if `config` cannot run; returns the warnings.

  Args:
    config: the ConfigDict of a run.
    num_devices: devices the global batch is split over (default: `jax.device_count()`).

  Returns:
    Warnings (also issued with `warnings.warn`): combinations that run but are usually mistakes.
  """
  _check_keys('', config, TOP_LEVEL_KEYS, TOP_LEVEL_KEYS)
  ok, allowed = int_at_least(0)
  if not ok(config.seed):
    raise _fail('seed', config.seed, f'allowed: {allowed}')

  for name in ('optim', 'train', 'eval'):
    required = [k for k in SCHEMA[name] if k not in OPTIONAL_KEYS.get(name, ())]
    _check_keys(name, config[name], SCHEMA[name], required)
    _check_values(name, config[name], SCHEMA[name])

  data = config.data
  if not isinstance(data, (ml_collections.ConfigDict, Mapping)) or 'source' not in _keys(data):
    raise ConfigError(f'missing key config.data.source; allowed: {SOURCES}.')
  if data.source not in SOURCES:
    raise _fail('data.source', data.source, f'allowed: one of {SOURCES}')
  source_keys = SOURCE_KEYS[data.source]
  _check_keys('data', data, source_keys, source_keys)
  _check_values('data', data, source_keys)

  model_fields = _model_fields()
  required_model = [n for n, f in model_fields.items()
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
  _check_keys('model', config.model, model_fields, required_model)
  _check_values('model', config.model, MODEL_CHECKS)
  present = _keys(config.model)
  if {'model_dim', 'num_heads'} <= set(present) and config.model.model_dim % config.model.num_heads:
    raise _fail('model.num_heads', config.model.num_heads,
                f'config.model.model_dim={config.model.model_dim} must be divisible by the number of heads')
  _check_model_config(config)

  _check_combinations(config, num_devices)
  return _warnings(config)


def _check_model_config(config) -> None:
  """Lets ModelConfig judge the fields it owns (dtype, attention_implementation, norm, ...)."""
  from relpos_jax.nn.models import ModelConfig
  fields = {k: config.model[k] for k in _keys(config.model) if k != 'encoder'}
  try:
    ModelConfig(vocab_size=1, encoder=resolve_encoder(config), **fields)
  except (TypeError, ValueError) as e:
    if isinstance(e, ConfigError):
      raise
    message = str(e)
    # ModelConfig names its field ('ModelConfig: dtype=...'): name the config key instead.
    if message.startswith('ModelConfig: '):
      raise ConfigError('config.model.' + message[len('ModelConfig: '):]) from None
    raise ConfigError(f'config.model is invalid: {message}') from None


def _check_combinations(config, num_devices: int | None) -> None:
  model, data, optim, train, eval_ = config.model, config.data, config.optim, config.train, config.eval
  encoder = resolve_encoder(config)
  if data.source == 'task':
    task = resolve_task(config)
    if data.min_length > data.max_length:
      raise _fail('data.min_length', data.min_length,
                  f'must be <= config.data.max_length={data.max_length}')
  if data.source == 'corpus':
    from relpos_jax.data import corpus as corpus_lib
    try:
      corpus_lib.check_source(data.corpus)
    except (TypeError, ValueError) as e:
      raise _fail('data.corpus', data.corpus, str(e)) from None
  if data.source == 'corpus' and eval_.pad_multiple != 1:
    raise _fail('eval.pad_multiple', eval_.pad_multiple,
                "corpus windows have exact lengths and are never padded; allowed: 1 with data.source='corpus'")
  if train.get('tensorboard'):
    from relpos_jax.train import tensorboard
    if not tensorboard.available():
      raise _fail('train.tensorboard', True,
                  f'TensorBoard event files need tensorboardX: {tensorboard.INSTALL_HINT}; or set it to False')
  if optim.warmup_steps > train.steps:
    raise _fail('optim.warmup_steps', optim.warmup_steps,
                f'warmup must not be longer than training (config.train.steps={train.steps})')

  if num_devices is None:
    import jax
    num_devices = jax.device_count()
  for key in ('train.batch_size', 'eval.batch_size'):
    value = _get(config, key)
    if value % num_devices:
      raise _fail(key, value, f'a global batch must split evenly over the {num_devices} devices '
                              f'(data parallel); use a multiple of {num_devices}')

  longest_train = longest_training_sequence(config)
  for part in sub_encoders(encoder):
    max_position = getattr(part, 'max_position', None)
    if part.name == 'randomized' and max_position is not None and longest_train > max_position:
      raise ConfigError(f'config.model.encoder={model.encoder!r} is invalid for this run: training batches '
                        f'hold up to {longest_train} tokens but randomized positions are drawn from only '
                        f'max_position={max_position} positions; raise max_position.')
  longest = longest_sequence(config)
  for part in absolute_parts(encoder):
    try:
      part.check_positions(longest)
    except ValueError as e:
      raise ConfigError(f'config.model.encoder={model.encoder!r} is invalid for this run: it trains or '
                        f'evaluates sequences of up to {longest} tokens (config.data / config.eval.lengths)'
                        f' but {e}') from None


def _warnings(config) -> list[str]:
  found = []
  encoder = resolve_encoder(config)
  if architecture(config) == 'bidirectional' and not carries_position(encoder):
    found.append(
        f'config.model.encoder={config.model.encoder!r} carries no position information, and '
        f'config.data.task={config.data.task!r} trains a bidirectional model: such a model is '
        'invariant to permuting its input, so it can only learn order-free tasks (parity_check); on '
        'others expect chance accuracy.')
  longest_eval = longest_sequence(config)
  for part in sub_encoders(encoder):
    max_position = getattr(part, 'max_position', None)
    if part.name == 'randomized' and max_position is not None and longest_eval > max_position:
      found.append(
          f'config.model.encoder={config.model.encoder!r}: evaluation reaches {longest_eval} tokens, beyond '
          f'max_position={max_position}, the positions randomized training covers (Ruoss et al. choose it '
          'at least as large as the longest test length).')
  for message in found:
    warnings.warn(message, UserWarning, stacklevel=3)
  return found


# ---------------------------------------------------------------------------------- derived quantities
def resolve_encoder(config):
  """The Encoder object of `config.model.encoder` (a spec string); errors name the key."""
  from relpos_jax.encoders import spec
  try:
    return spec.from_spec(config.model.encoder)
  except (ValueError, TypeError, SyntaxError) as e:
    raise ConfigError(f'config.model.encoder={config.model.encoder!r} is invalid: {e}') from None


def resolve_task(config):
  """The Task object of an algorithmic-task config; errors name the key."""
  from relpos_jax.data import make_task
  kwargs = dict(config.data.task_kwargs)
  try:
    return make_task(config.data.task, **kwargs)
  except ValueError as e:
    key = 'data.task' if not kwargs else 'data.task_kwargs'
    raise ConfigError(f'config.{key} is invalid: {e}') from None


def architecture(config) -> str:
  """'causal' (a causal LM: the corpus, causal tasks such as count_copy) or 'bidirectional' (a classifier)."""
  if config.data.source == 'corpus':
    return 'causal'
  return resolve_task(config).kind


def longest_training_sequence(config) -> int:
  """The most tokens a training batch holds (the largest bucket for tasks)."""
  data = config.data
  if data.source == 'corpus':
    return int(data.train_length)
  return int(resolve_task(config).total_length(data.max_length))


def longest_sequence(config) -> int:
  """The most tokens any training or evaluation sequence of the run holds (what position tables must cover)."""
  data = config.data
  lengths = list(config.eval.lengths)
  if data.source == 'corpus':
    return max([data.train_length] + lengths)
  task = resolve_task(config)
  multiple = int(config.eval.pad_multiple)
  padded = [-(-task.total_length(n) // multiple) * multiple for n in lengths]
  return max([task.total_length(data.max_length)] + padded)


def sub_encoders(encoder):
  """The encoder and every encoder inside it (parts of a sum, the base of a wrapper), depth first."""
  yield encoder
  children = []
  for f in dataclasses.fields(encoder):
    value = getattr(encoder, f.name)
    values = value if isinstance(value, (tuple, list)) else (value,)
    children.extend(v for v in values if _is_encoder(v))
  for name in ('parts',):  # COMBINED encoders may expose their parts as a property.
    value = getattr(encoder, name, ())
    children.extend(v for v in (value or ()) if _is_encoder(v) and v not in children)
  for child in children:
    yield from sub_encoders(child)


def _is_encoder(value) -> bool:
  from relpos_jax.encoders.contract import Encoder
  return isinstance(value, Encoder)


def absolute_parts(encoder) -> list:
  from relpos_jax.encoders.contract import Kind
  return [e for e in sub_encoders(encoder) if e.kind is Kind.ABSOLUTE]


def carries_position(encoder) -> bool:
  """Whether any part of the encoder lets the model tell positions apart (NoPE alone does not)."""
  from relpos_jax.encoders.contract import Kind
  leaves = [e for e in sub_encoders(encoder) if e.kind is not Kind.COMBINED]
  return any(e.carries_position for e in leaves)


# ------------------------------------------------------------------------------------- loading configs
def load_config(path: str | os.PathLike, overrides: Mapping[str, Any] | None = None,
                *, validate_config: bool = True) -> ml_collections.ConfigDict:
  """`get_config()` of a config file, with dotted-key overrides: what `--config=... --config.a.b=v` does.

  For notebooks and the study: `load_config('configs/lm.py', {'model.num_layers': 4})`. Unknown override
  keys raise (the config is locked, as config_flags locks it).
  """
  path = os.fspath(path)
  module_spec = importlib.util.spec_from_file_location(f'_relpos_config_{abs(hash(path))}', path)
  if module_spec is None or not os.path.isfile(path):
    raise ValueError(f'config file {path!r} not found')
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  config = module.get_config()
  config.lock()
  for key, value in (overrides or {}).items():
    parent, _, leaf = key.rpartition('.')
    node = _get(config, parent) if parent else config
    if leaf not in _keys(node):
      raise ConfigError(f'override config.{key}: unknown key; allowed in config{"." if parent else ""}'
                        f'{parent}: {", ".join(sorted(_keys(node)))}.')
    node[leaf] = value
  if validate_config:
    if 'study' in _keys(config):  # A study config: a training config plus its `study` section.
      from relpos_jax.study import runner
      runner.validate_study(config)
    else:
      validate(config)
  return config
