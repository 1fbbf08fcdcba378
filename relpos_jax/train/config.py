"""The training configuration: one schema of typed, frozen sections, and the boundary that checks a config.

Configs come from files and flags as `ml_collections.ConfigDict`s (`relpos_jax.train.config_files`: `get_config(arg)`
of `configs/*.py`, dotted overrides) and from run directories as config.json; `parse(config)` converts one once
into the typed sections below, where each key is one annotated field (its type) with its range or choices
(`relpos_jax.train.schema.key(...)`). Adding a key is one line in its section. Below the entry points
everything reads the typed `Config`; `Config.to_dict()` is its ConfigDict layout (config.json, result records)
and `Config.derive(...)` a checked variant of it (another encoder, seed, learning rate, evaluation).

`validate(config)` = `parse` + the checks that need the whole run, and raises one ConfigError (a ValueError)
naming the key (`config.model.num_heads=3: ...`) for:

  * unknown and missing keys (a typo would otherwise silently train the default), wrong types, values out
    of range, an encoder spec that does not parse (`relpos_jax.encoders.spec`),
  * combinations that cannot work: a learned absolute position table shorter than the longest sequence
    the run trains or evaluates on, a global batch size the devices cannot split evenly, warmup longer
    than training, `model_dim` not divisible by `num_heads`.

A combination that runs but is usually a mistake (NoPE in a bidirectional model, which is then blind to
token order) is a warning, not an error: it is a legitimate control for order-free tasks such as parity.

Layout of a config (see configs/lm.py and configs/algorithmic.py for complete examples):

  seed                 int: parameters, data stream, dropout and randomized positions all derive from it
  model.*              the transformer: the fields of `relpos_jax.nn.models.ModelConfig` but the vocabulary
                       sizes, which come from the data (ModelConfig checks them); `model.encoder` is a spec
  data.source          'corpus' (byte-level LM, causal), 'task' (algorithmic task; bidirectional, or causal
                       for count_copy) or 'text' (one text file, cut by lines), plus the keys of that source
                       (`CorpusSource`, `TaskSource`, `TextSource`)
  optim.*              AdamW with global-norm clipping and a warmup + cosine (or constant) schedule
  train.*              steps, global batch size, logging and checkpoint cadence
  eval.*               lengths evaluated during and after training
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import json
import math
import os
import warnings
from typing import Any, Mapping

import jax

from relpos_jax import data as data_lib
from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.nn.models import ModelConfig, ModelConfigError
from relpos_jax.train import schema, tensorboard

# Raised by every check of a config; kept importable from here, where most callers catch it.
ConfigError = schema.ConfigError

SCHEDULES = ('warmup_cosine', 'warmup_constant')
LOSS_REDUCTIONS = ('token_mean', 'sequence_sum')
TOKENIZERS = ('byte', 'bpe')
# data.packing: the documents of a corpus training window (relpos_jax.train.inputs.packed_fields). 'none': a
# window is one sequence (no document ids); 'continue': a document mask, positions 0..L-1 across documents;
# 'reset': positions restart at 0 at each document start; 'reset_offset': at a random offset per document.
PACKING = ('none', 'continue', 'reset', 'reset_offset')
# The vocabulary sizes are fixed by the data (corpus bytes, task alphabet), never by the config.
DATA_DERIVED_MODEL_FIELDS = ('vocab_size', 'output_vocab_size')
# Seeds are below 2^32: a JAX key holds 32 bits of seed (without x64, jax.random.key(2**32) is key(0), so two
# runs told apart by their seed would be one run) and 2^63 overflows a C long only when the key is made.
SEED_LIMIT = 2**32
# Upper bounds of the sizes a run allocates: beyond them a typo segfaulted, aborted or failed to
# allocate, some only after training. Each is several times the largest published value, so no experiment is
# refused: 126 layers (Llama 3 405B; GPT-3 96), model_dim 16,384 (Llama 3 405B; GPT-3 12,288), an MLP ratio of
# 4 (8/3 with a gated MLP; 16 is the widest in the scaling studies), global batches of a few thousand
# sequences. What fits under the bounds but not in memory is refused by `check_memory`, with its estimate.
MAX_LAYERS = 512
MAX_MODEL_DIM = 65536
MAX_MLP_RATIO = 64
MAX_BATCH = 2**20
# Evaluation examples per length: a task's evaluation set is drawn whole (relpos_jax.train.inputs), so 10^12
# passed, trained and then asked for 14.6 TiB. Published protocols score hundreds to thousands per length.
MAX_EVAL_EXAMPLES = 2**24


# ------------------------------------------------------------------------------------------ the sections
@dataclasses.dataclass(frozen=True)
class Optim:
  learning_rate: float = schema.key(gt=0)
  schedule: str = schema.key(choices=SCHEDULES)
  warmup_steps: int = schema.key(ge=0)
  end_lr_fraction: float = schema.key(ge=0, le=1)  # cosine decays to learning_rate * end_lr_fraction
  weight_decay: float = schema.key(ge=0)
  b1: float = schema.key(ge=0, lt=1)
  b2: float = schema.key(ge=0, lt=1)
  eps: float = schema.key(gt=0)
  grad_clip_norm: float | None = schema.key(gt=0)


@dataclasses.dataclass(frozen=True)
class Train:
  steps: int = schema.key(ge=1)
  batch_size: int = schema.key(ge=1, le=MAX_BATCH)  # global: split over every device of the mesh
  log_every: int = schema.key(ge=1)
  checkpoint_every: int = schema.key(ge=1)
  keep_checkpoints: int = schema.key(ge=1)
  # TensorBoard scalars beside metrics.jsonl (relpos_jax.train.tensorboard); None: if tensorboardX is installed.
  tensorboard: bool | None = schema.key(None)
  # Updates with a non-finite loss, gradient norm or new state are skipped; this many in a row stop the
  # run with DivergedError (see relpos_jax.train.loop).
  max_nonfinite_steps: int = schema.key(1, ge=1)


@dataclasses.dataclass(frozen=True)
class Eval:
  every: int = schema.key(ge=0)  # 0: evaluate only at the end of training
  lengths: tuple[int, ...] = schema.key(ge=1)  # corpus: window lengths; task: input lengths n (may be empty)
  batch_size: int = schema.key(ge=1, le=MAX_BATCH)
  num_examples: int = schema.key(ge=1, le=MAX_EVAL_EXAMPLES)  # per length (corpus: at most this many windows)
  # Tasks: pad each evaluation set to a multiple of this many tokens (keys masked), so many lengths share
  # few compiled shapes. 1: no padding (the only value for the corpus, whose windows are exact).
  pad_multiple: int = schema.key(ge=1)
  seed: int = schema.key(ge=0, lt=SEED_LIMIT)  # the eval sets do not depend on the training seed
  # Corpus: evaluate every length on about this many scored tokens (windows = num_tokens // length,
  # overriding num_examples), so every length reads the same amount of validation text.
  num_tokens: int | None = schema.key(None, ge=1)
  # Cap on tokens per evaluation batch: long lengths get proportionally fewer rows (at least one per
  # device), so evaluating far beyond the training length fits in memory.
  max_tokens_per_batch: int | None = schema.key(None, ge=1)
  # Corpus: the scored tail T of every evaluation window (None: the shortest evaluation length). Windows of
  # every length end at the same anchors and score only their last T targets: the same text at every length
  # (relpos_jax.data.corpus, `anchored_windows`); num_tokens / num_examples then count T-token tails.
  scored_tail: int | None = schema.key(None, ge=1)
  # An encoder trained on random positions (randomized(...), Ruoss et al. 2023) is evaluated as published:
  # ordered random positions from [0, max_position), the metrics averaged over this many draws.
  position_draws: int = schema.key(4, ge=1)


# The data sources. Each section answers every question of the config that depends on the source (its checks,
# the model it trains, its lengths); its data class (train/data_sources.py: `DATA`) builds its data and answers
# what evaluation asks (its metric and direction, its protocol record), so no code switches on `data.source`.
# `run` is the whole parsed Config where an answer needs more than the section (the task, the eval lengths).
@dataclasses.dataclass(frozen=True)
class CorpusSource:
  """data.source='corpus': byte-level language modelling on the built-in corpus or your own text."""

  source: str = schema.key(choices=('corpus',))
  # 'stdlib' (built in), a named corpus ('austen': relpos_jax.data.corpora), or a path: a directory of text
  # files, one file, or a glob
  corpus: str = schema.key()
  max_train_bytes: int | None = schema.key(ge=1)
  train_length: int = schema.key(ge=1)
  # Subword tokens (relpos_jax.train.token_inputs; `configs/lm.py:bpe` sets them): 'byte' (the default) or 'bpe',
  # a byte-level BPE of `vocab_size` symbols trained on the training split, cached in `tokenizer_cache`.
  tokenizer: str = schema.key('byte', choices=TOKENIZERS)
  vocab_size: int | None = schema.key(None, ge=256)
  tokenizer_cache: str | None = schema.key(None)
  # Packed documents in training (PACKING above): each token attends to its own document only; evaluation
  # windows are unchanged. packing_max_offset: 'reset_offset' only, the largest random start position.
  packing: str = schema.key('none', choices=PACKING)
  packing_max_offset: int | None = schema.key(None, ge=1, le=validation.MAX_POSITION)

  def make_task(self) -> None:
    """No algorithmic task (`Config.task` is None)."""
    return None

  def check(self, run: Config) -> None:
    """The corpus path exists and holds text; a BPE tokenizer has its vocabulary size and its package."""
    try:
      data_lib.corpus.check_source(self.corpus)
    except (TypeError, ValueError) as e:
      raise schema.invalid_key('data.corpus', self.corpus, str(e)) from None
    if (self.tokenizer == 'bpe') != (self.vocab_size is not None):
      raise schema.invalid_key(
          'data.vocab_size',
          self.vocab_size,
          f"set with data.tokenizer='bpe' and only then (data.tokenizer={self.tokenizer!r})",
      )
    if self.tokenizer == 'bpe' and importlib.util.find_spec('tokenizers') is None:
      raise schema.invalid_key(
          'data.tokenizer', self.tokenizer, 'BPE needs the package tokenizers: `pip install tokenizers`'
      )
    self._check_packing(run)

  def _check_packing(self, run: Config) -> None:
    """packing_max_offset with 'reset_offset' and only then; positions per document never meet randomized
    positions (the batch's positions would replace the random ones, silently) and fit a learned table."""
    if (self.packing == 'reset_offset') != (self.packing_max_offset is not None):
      raise schema.invalid_key(
          'data.packing_max_offset',
          self.packing_max_offset,
          f"an int >= 1 with data.packing='reset_offset' and only then (data.packing={self.packing!r})",
      )
    if self.packing == 'none':
      return
    layers = run.encoder if isinstance(run.encoder, tuple) else (run.encoder,)
    if run.model.attention_implementation == 'pallas':
      raise schema.invalid_key(
          'data.packing',
          self.packing,
          "the Pallas kernel takes no document mask (model.attention_implementation='pallas'); allowed with it: 'none'",
      )
    replaced = sorted({p.name for e in layers for p in contract.leaves(e) if getattr(p, 'replaces_content', False)})
    if replaced:
      raise schema.invalid_key(
          'data.packing',
          self.packing,
          f'{replaced} of model.encoder={run.encoder_spec!r} take no document mask (their logit is a scan over every '
          "token between key and query); allowed with it: 'none'",
      )
    if self.packing not in ('reset', 'reset_offset'):
      return
    if train_position_limit(run.encoder) is not None:
      raise schema.invalid_key(
          'data.packing',
          self.packing,
          f'positions per document replace the random positions of model.encoder={run.encoder_spec!r} in training; '
          "allowed with it: 'none' or 'continue'",
      )
    furthest = self.train_length + (self.packing_max_offset or 0)
    for part in (p for e in layers for p in contract.leaves(e)):
      try:
        part.check_positions(furthest)
      except ValueError as e:
        raise schema.invalid_key(
            'data.packing_max_offset',
            self.packing_max_offset,
            f'positions reach train_length + packing_max_offset - 1 = {furthest - 1}, beyond the encoder: {e}',
        ) from None

  def check_eval(self, eval_: Eval) -> None:
    """`eval.scored_tail` fits the shortest length; windows have exact lengths, so `eval.pad_multiple` is 1."""
    if eval_.scored_tail is not None and eval_.lengths and eval_.scored_tail > min(eval_.lengths):
      raise schema.invalid_key(
          'eval.scored_tail',
          eval_.scored_tail,
          f'every window scores its last scored_tail targets, so it must be <= the shortest evaluation length '
          f'(config.eval.lengths={eval_.lengths})',
      )
    if eval_.pad_multiple != 1:
      raise schema.invalid_key(
          'eval.pad_multiple',
          eval_.pad_multiple,
          "corpus windows have exact lengths and are never padded; allowed: 1 with data.source='corpus'",
      )

  def architecture(self, run: Config) -> str:
    return 'causal'

  def vocab_sizes(self, run: Config) -> tuple[int, int | None]:
    return (data_lib.VOCAB_SIZE if self.vocab_size is None else self.vocab_size), None

  def longest_training_sequence(self, run: Config) -> int:
    return self.train_length

  def longest_sequence(self, run: Config) -> int:
    return max([self.train_length] + list(run.eval.lengths))


@dataclasses.dataclass(frozen=True)
class TaskSource:
  """data.source='task': an algorithmic task, training lengths n ~ U{min_length..max_length}."""

  source: str = schema.key(choices=('task',))
  task: str = schema.key()
  task_kwargs: dict = schema.key()
  min_length: int = schema.key(ge=1)
  max_length: int = schema.key(ge=1)
  num_buckets: int = schema.key(ge=1)
  # token_mean: mean cross-entropy over the scored positions; sequence_sum: per example, the sum over its
  # output positions, averaged over the batch (the reference code of Ruoss et al. 2023).
  loss_reduction: str = schema.key(choices=LOSS_REDUCTIONS)

  def make_task(self) -> data_lib.Task:
    """The Task object; a name or kwargs the task refuses raise ConfigError naming the key."""
    try:
      return data_lib.make_task(self.task, **self.task_kwargs)
    except (TypeError, ValueError) as e:
      name = 'data.task' if not self.task_kwargs else 'data.task_kwargs'
      raise ConfigError(f'config.{name} is invalid: {e}') from None

  def check(self, run: Config) -> None:
    task = run.task  # A task name or kwargs the task refuses fail here, naming the key.
    if self.min_length > self.max_length:
      raise schema.invalid_key(
          'data.min_length', self.min_length, f'must be <= config.data.max_length={self.max_length}'
      )
    # Lengths the task cannot draw at its sizes fail here, before training, naming the task's key and the
    # config key that asks for the length.
    lengths = [('data.max_length', task, int(self.max_length))]
    lengths += [('eval.lengths', task.for_evaluation(), int(n)) for n in run.eval.lengths]
    for key, drawn_by, n in lengths:
      try:
        drawn_by.check_length(n)
      except ValueError as e:
        raise ConfigError(f'config.data.task_kwargs is invalid for config.{key} (length {n}): {e}') from None

  def check_eval(self, eval_: Eval) -> None:
    if eval_.scored_tail is not None:
      raise schema.invalid_key(
          'eval.scored_tail', eval_.scored_tail, "a corpus setting; allowed: None with data.source='task'"
      )

  def architecture(self, run: Config) -> str:
    """The task's kind: 'bidirectional' (a classifier) or 'causal' (count_copy)."""
    return run.task.kind

  def vocab_sizes(self, run: Config) -> tuple[int, int | None]:
    task = run.task
    return task.vocab_size, (task.num_classes if task.kind == 'bidirectional' else None)

  @property
  def train_length(self) -> int:
    """The training length (a study's reference point; a corpus source's `train_length` key): the longest
    example length `max_length` (its tokens before the task's framing: `longest_training_sequence`)."""
    return self.max_length

  def longest_training_sequence(self, run: Config) -> int:
    return int(run.task.total_length(self.max_length))

  def longest_sequence(self, run: Config) -> int:
    multiple = run.eval.pad_multiple
    padded = [-(-run.task.total_length(n) // multiple) * multiple for n in run.eval.lengths]
    return max([self.longest_training_sequence(run)] + padded)


@dataclasses.dataclass(frozen=True)
class TextSource(CorpusSource):
  """data.source='text': byte-level language modelling on one plain text file (its path in `data.corpus`), cut
  by lines into train, validation and test (relpos_jax.train.text_inputs); the corpus's keys, bytes only."""

  source: str = schema.key(choices=('text',))

  def check(self, run: Config) -> None:
    """`data.corpus` is an existing file and the text is read as bytes."""
    if self.tokenizer != 'byte':
      raise schema.invalid_key('data.tokenizer', self.tokenizer, "data.source='text' reads bytes; allowed: 'byte'")
    if not isinstance(self.corpus, str) or not os.path.isfile(os.path.expanduser(self.corpus)):
      raise schema.invalid_key(
          'data.corpus', self.corpus, "data.source='text' reads one plain text file; allowed: the path of a file"
      )
    super().check(run)


SOURCES = {'corpus': CorpusSource, 'task': TaskSource, 'text': TextSource}
# The model section's keys: ModelConfig's fields but the vocabulary sizes (ModelConfig checks the values).
MODEL_KEYS = {f.name: f for f in dataclasses.fields(ModelConfig) if f.init and f.name not in DATA_DERIVED_MODEL_FIELDS}


@dataclasses.dataclass(frozen=True)
class Config:
  """A checked run config: `parse(config_dict)`. Its sections read like the ConfigDict's
  (`config.train.steps`); `model` is the ModelConfig of the run (vocab_size a placeholder until the data
  is known, see `model_config`), `encoder_spec` the spec string it was parsed from."""

  seed: int = schema.key(ge=0, lt=SEED_LIMIT)
  model: ModelConfig
  data: CorpusSource | TaskSource | TextSource
  optim: Optim
  train: Train
  eval: Eval
  encoder_spec: str

  @property
  def encoder(self) -> contract.Encoder:
    return self.model.encoder

  def to_dict(self) -> dict:
    """The config in the ConfigDict layout (`parse(c.to_dict()) == c`): every key of every section, the
    optional ones with their defaults, `model.encoder` the spec string. What config.json and a study's result
    records hold, and what `derive` re-parses."""
    model = {name: getattr(self.model, name) for name in MODEL_KEYS}
    model['encoder'] = self.encoder_spec
    return {
        'seed': self.seed,
        'model': model,
        **{name: section_dict(getattr(self, name)) for name in ('data', 'optim', 'train', 'eval')},
    }

  def derive(
      self,
      *,
      encoder: str | None = None,
      seed: int | None = None,
      learning_rate: float | None = None,
      eval: Eval | Mapping[str, Any] | None = None,
      data: Mapping[str, Any] | None = None,
      train: Mapping[str, Any] | None = None,
      implementation: str | None = None,
      block_size=None,
  ) -> Config:
    """This run with the named keys changed, parsed and checked again (a bad value raises ConfigError naming
    its key, as in a config file): `model.encoder` (a spec, parsed anew), `seed`, `optim.learning_rate`,
    the `eval` section (an Eval, or a dict of some of its keys over this run's), some keys of the `data` and
    `train` sections (a dict over this run's: the suite's per-task data and steps), and
    `model.attention_implementation` with `model.attention_block_size` (given together; block_size is only
    read with an implementation). None leaves a key as it is. The study derives every run from its base."""
    values = self.to_dict()
    for name, section in (('data', data), ('train', train)):
      if section is not None:
        values[name].update(section)
    if encoder is not None:
      values['model']['encoder'] = encoder
    if seed is not None:
      values['seed'] = seed
    if learning_rate is not None:
      values['optim']['learning_rate'] = learning_rate
    if isinstance(eval, Eval):
      values['eval'] = section_dict(eval)
    elif eval is not None:
      values['eval'].update(eval)
    if implementation is not None:
      values['model']['attention_implementation'] = implementation
      values['model']['attention_block_size'] = block_size
    return parse(values)

  @functools.cached_property
  def task(self) -> data_lib.Task | None:
    """The Task object of a task config (None for the corpus)."""
    return self.data.make_task()


def section_dict(section) -> dict:
  """{key: value} of a typed section (dict values copied, so the caller may change them)."""
  return {
      f.name: dict(v) if isinstance(v := getattr(section, f.name), Mapping) else v
      for f in dataclasses.fields(section)
      if f.init
  }


def with_defaults(config_json: Mapping) -> dict:
  """A config's dict (a config.json, a result's `config`) with every optional key it leaves out at its default,
  and `model.attention_window` as ModelConfig holds it: the layout `Config.to_dict` writes, so a record written
  before a key existed, or from a ConfigDict that left it out, compares equal to the same run's record now.
  No check: unknown keys stay, missing required keys stay missing (the comparison then names them)."""
  out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in config_json.items()}
  data = out.get('data')
  classes = {
      'model': MODEL_KEYS.values(),
      'optim': dataclasses.fields(Optim),
      'train': dataclasses.fields(Train),
      'eval': dataclasses.fields(Eval),
      'data': dataclasses.fields(SOURCES[data['source']])
      if isinstance(data, dict) and isinstance(data.get('source'), str) and data['source'] in SOURCES
      else (),
  }
  for name, fields in classes.items():
    section = out.get(name)
    if not isinstance(section, dict):
      continue
    for f in fields:
      if f.name in section or not f.init:
        continue
      if f.default is not dataclasses.MISSING:
        section[f.name] = f.default
      elif f.default_factory is not dataclasses.MISSING:
        section[f.name] = f.default_factory()
  model = out.get('model')
  window = model.get('attention_window') if isinstance(model, dict) else None
  if isinstance(window, str):
    try:
      model['attention_window'] = ast.literal_eval(window)
    except (ValueError, SyntaxError):
      pass  # ModelConfig refuses it; the comparison shows the string
  return json.loads(json.dumps(out))  # tuples as lists, as every JSON record holds them


TOP_LEVEL_KEYS = tuple(f.name for f in dataclasses.fields(Config) if f.name != 'encoder_spec')
_SEED = next(f for f in dataclasses.fields(Config) if f.name == 'seed')


def _parse_model(node) -> ModelConfig:
  """ModelConfig checks the model section's values; its errors name their config key."""
  required = [
      n for n, f in MODEL_KEYS.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
  ]
  schema.check_keys('config.model', node, MODEL_KEYS, required)
  fields = {k: node[k] for k in schema.keys_of(node)}
  if not isinstance(fields['encoder'], str) or not fields['encoder'].strip():
    raise schema.invalid_key('model.encoder', fields['encoder'], 'allowed: an encoder spec string, e.g. "alibi"')
  try:
    return ModelConfig(vocab_size=1, **fields)
  except ModelConfigError as e:
    with_ = ''.join(f' with config.model.{d}={fields[d]!r}' for d in e.depends_on if d in fields)
    raise ConfigError(f'config.model.{e.field}={e.value!r} is invalid{with_}: allowed: {e.allowed}.') from None


def _check_model_sizes(node) -> None:
  """The model's sizes within MAX_LAYERS / MAX_MODEL_DIM / MAX_MLP_RATIO (ModelConfig checks the lower bounds)."""
  for name, limit, kind in (
      ('num_layers', MAX_LAYERS, 'an int'),
      ('model_dim', MAX_MODEL_DIM, 'an int'),
      ('mlp_ratio', MAX_MLP_RATIO, 'a number'),
  ):
    value = node[name] if name in schema.keys_of(node) else None
    if schema.is_number(value) and value > limit:
      raise schema.invalid_key(
          f'model.{name}', value, f'allowed: {kind} <= {limit} (several times the largest published model)'
      )


def parse(config) -> Config:
  """The typed, frozen form of a config: a ConfigDict (files, flags, notebooks) or its dict (config.json,
  `Config.to_dict`); raises ConfigError naming the key for an unknown or missing key, a wrong type, a value out
  of range, or sections that contradict. A `Config` is returned as it is: `train`, `build_model`, `load_model`
  and `validate` are where a notebook hands its ConfigDict, and the study hands the Config it derived."""
  if isinstance(config, Config):
    return config
  schema.check_keys('config', config, TOP_LEVEL_KEYS, TOP_LEVEL_KEYS)
  sections = {
      'data': _parse_data(config['data']),
      'optim': schema.parse_section(Optim, 'optim', config['optim']),
      'train': schema.parse_section(Train, 'train', config['train']),
      'eval': schema.parse_section(Eval, 'eval', config['eval']),
  }
  seed = schema.typed_value(_SEED, int, config['seed'], 'seed')
  _check_model_sizes(config['model'])
  model = _parse_model(config['model'])
  run = Config(seed=seed, model=model, encoder_spec=config['model']['encoder'], **sections)
  _check_sections(run)
  return run


def _parse_data(node) -> CorpusSource | TaskSource | TextSource:
  """The typed data section of a config's `data` node, checked key by key."""
  if 'source' not in schema.keys_of(node):
    raise ConfigError(f'missing key config.data.source; allowed: {tuple(SOURCES)}.')
  if node['source'] not in SOURCES:
    raise schema.invalid_key('data.source', node['source'], f'allowed: one of {tuple(SOURCES)}')
  return schema.parse_section(SOURCES[node['source']], 'data', node)


def _check_sections(run: Config) -> None:
  """Combinations of keys that cannot work whatever the devices."""
  data, optim, train, eval_ = run.data, run.optim, run.train, run.eval
  data.check(run)
  if train.tensorboard:
    if not tensorboard.available():
      raise schema.invalid_key(
          'train.tensorboard',
          True,
          f'TensorBoard event files need tensorboardX: {tensorboard.INSTALL_HINT}; or set it to False',
      )
  data.check_eval(eval_)
  if any(later <= earlier for earlier, later in zip(eval_.lengths, eval_.lengths[1:])):
    # Reports and tables read the last length as the longest (relpos_jax.study.report, cross_corpus).
    raise schema.invalid_key(
        'eval.lengths', eval_.lengths, 'allowed: increasing lengths, each once (the last is read as the longest)'
    )
  if optim.warmup_steps > train.steps:
    raise schema.invalid_key(
        'optim.warmup_steps',
        optim.warmup_steps,
        f'warmup must not be longer than training (config.train.steps={train.steps})',
    )


# -------------------------------------------------------------------------------------------- validate
def validate(config, *, num_devices: int | None = None) -> list[str]:
  """Raises ConfigError (a ValueError) naming the key if `config` cannot run; returns the warnings.

  Args:
    config: the ConfigDict of a run (or its parsed `Config`).
    num_devices: devices the global batch is split over (default: `jax.device_count()`).

  Returns:
    Warnings (also issued with `warnings.warn`): combinations that run but are usually mistakes.
  """
  run = parse(config)
  num_devices = jax.device_count() if num_devices is None else num_devices
  for name, value in (('train.batch_size', run.train.batch_size), ('eval.batch_size', run.eval.batch_size)):
    if value % num_devices:
      raise schema.invalid_key(
          name,
          value,
          f'a global batch must split evenly over the {num_devices} devices '
          f'(data parallel); use a multiple of {num_devices}',
      )
  check_memory(run, num_devices)
  try:
    layers = run.encoder if isinstance(run.encoder, tuple) else (run.encoder,)
    contract.check_model_encoders(
        'config', 'model.encoder', run.encoder_spec, layers, causal=architecture(run) == 'causal'
    )
  except validation.InvalidValue as e:
    raise schema.invalid_key('model.encoder', run.encoder_spec, f'allowed: {e.allowed}') from None
  limit = train_position_limit(run.encoder)
  longest_train = longest_training_sequence(run)
  if limit is not None and longest_train > limit:
    raise ConfigError(
        f'config.model.encoder={run.encoder_spec!r} is invalid for this run: training batches '
        f'hold up to {longest_train} tokens but randomized positions are drawn from only '
        f'max_position={limit} positions; raise max_position.'
    )
  given_bound = task_position_bound(run)
  if limit is not None and given_bound is not None:
    # The task's positions replace the random ones in training and evaluation (train/step.py): the run was its
    # base exactly while its record said "random positions".
    raise ConfigError(
        f'config.model.encoder={run.encoder_spec!r} is invalid for this run: task {run.data.task!r} hands the '
        "model its own positions (batch['positions']), which replace randomized positions in training and "
        'evaluation, so it would run exactly as its base; allowed: the base encoder itself (e.g. '
        "'rope'), or a task that hands no positions (e.g. addition, or addition_abacus with as_input=True)."
    )
  longest = longest_sequence(run)
  input_bound = input_position_bound(run)
  leaves = layer_leaves(run.encoder)
  if input_bound is not None and not any(p.kind is contract.Kind.ABSOLUTE for p in leaves):
    raise ConfigError(
        f'config.model.encoder={run.encoder_spec!r} is invalid for this run: task {run.data.task!r} hands '
        'the model input positions (an absolute input embedding of them) and this encoder has no absolute '
        "part to embed them; allowed: one with it, e.g. 'learned(max_length=64) + fire'."
    )
  # A task's own positions replace 0..T-1 for every encoder: its tables must cover them (a learned
  # table read past its end ended as a DivergedError that said to lower the learning rate).
  for part in leaves:
    embeds_task_positions = input_bound is not None and part.kind is contract.Kind.ABSOLUTE
    reads_task_positions = given_bound is not None and given_bound > longest and not embeds_task_positions
    try:
      part.check_positions(input_bound if embeds_task_positions else given_bound if reads_task_positions else longest)
    except ValueError as e:
      reach = (
          f"embeds the task's input positions, up to {input_bound - 1}"
          if embeds_task_positions
          else f"reads the task's positions, up to {given_bound - 1} (config.data.task_kwargs)"
          if reads_task_positions
          else f'trains or evaluates sequences of up to {longest} tokens (config.data / config.eval.lengths)'
      )
      raise ConfigError(
          f'config.model.encoder={run.encoder_spec!r} is invalid for this run: it {reach} but {e}'
      ) from None
  return _warnings(run, limit, longest)


def _warnings(run: Config, limit: int | None, longest: int) -> list[str]:
  found = []
  if architecture(run) == 'bidirectional' and not carries_position(run.encoder):
    found.append(
        f'config.model.encoder={run.encoder_spec!r} carries no position information, and '
        f'config.data.task={run.data.task!r} trains a bidirectional model: such a model is '
        'invariant to permuting its input, so it can only learn order-free tasks (parity_check); on '
        'others expect chance accuracy.'
    )
  causal_form = sorted(
      {
          node.name or type(node).__name__
          for layer in (run.encoder if isinstance(run.encoder, tuple) else (run.encoder,))
          for node in contract.walk(layer)
          if getattr(node, 'bidirectional', None) is False
      }
  )
  if architecture(run) == 'bidirectional' and causal_form:
    found.append(
        f'config.model.encoder={run.encoder_spec!r}: {causal_form} in the causal form (bidirectional=False, some '
        f'by default) in the bidirectional model of config.data.task={run.data.task!r}: the bias then treats '
        'every key ahead of the query as at distance 0 (no penalty, no order); for a bidirectional model write '
        "the bidirectional form, e.g. 'alibi(bidirectional=True)'."
    )
  if limit is not None and longest > limit:
    found.append(
        f'config.model.encoder={run.encoder_spec!r}: evaluation reaches {longest} tokens, beyond '
        f'max_position={limit}, the positions randomized training covers (Ruoss et al. choose it '
        'at least as large as the longest test length).'
    )
  for message in found:
    warnings.warn(message, UserWarning, stacklevel=3)
  return found


# ------------------------------------------------------------------------------------------ memory
GIB = 2**30
# Attention implementations that build the (B, H, L, L) scores (the others tile them, or may: None).
FULL_SCORES = ('xla', 'einsum')


def available_memory(num_devices: int) -> int | None:
  """Bytes one device may hold: its own limit (GPU / TPU), or for CPU devices the machine's physical memory
  shared among them; None when unknown (no check then)."""
  device = jax.devices()[0]
  if device.platform != 'cpu':
    stats = device.memory_stats() or {}
    return int(stats['bytes_limit']) if 'bytes_limit' in stats else None
  try:
    return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // max(1, num_devices)
  except (ValueError, OSError, AttributeError):
    return None


def eval_batch_size(eval_section: Eval, length: int, num_devices: int | None = None) -> int:
  """Rows per evaluation batch at `length` tokens: `eval.batch_size`, or fewer under
  `eval.max_tokens_per_batch`, but always a multiple of the device count (at least one row per device)."""
  size = eval_section.batch_size
  budget = eval_section.max_tokens_per_batch
  if budget is None:
    return size
  if num_devices is None:
    num_devices = jax.device_count()
  fitting = (int(budget) // max(int(length), 1)) // num_devices * num_devices
  return max(num_devices, min(size, fitting))


def memory_estimate(run: Config, num_devices: int) -> dict[str, tuple[int, str]]:
  """A lower bound of what one device holds at once, per part: {what: (bytes, the keys that set it)}.

  Counted: the parameters of the blocks and embeddings with their gradient and Adam's two moments (16 bytes
  per float32 parameter, replicated on every device: data parallel), and per batch (training: its share of
  `train.batch_size` at the longest training sequence; evaluation: the rows of one batch at each length,
  `eval_batch_size`) the logits in float32 and the MLP's hidden activation of one layer (the
  activations of every layer for training, which keeps them for the backward pass), plus one layer's
  (rows, heads, L, L) attention scores for the implementations that build them. Left out: everything
  smaller or harder to bound (XLA's workspace), so a run refused here cannot fit. The position encoders'
  parameters are counted with the blocks' (`position_parameters`), and a task's evaluation set, drawn whole
  (int32 inputs and targets), per length."""
  model = run.model
  vocab, output_vocab = run.data.vocab_sizes(run)
  output_vocab = output_vocab or vocab
  dim, layers, heads = int(model.model_dim), int(model.num_layers), int(model.num_heads)
  hidden = max(1, int(round(dim * float(model.mlp_ratio))))
  item = 2 if model.dtype == 'bfloat16' else 4
  params = layers * (4 * dim * dim + 2 * dim * hidden) + (vocab + output_vocab) * dim + position_parameters(run)
  scores = model.attention_implementation in FULL_SCORES
  model_keys = (
      f'config.model.num_layers={model.num_layers}, model_dim={model.model_dim}, mlp_ratio={model.mlp_ratio}, '
      f'encoder={run.encoder_spec!r}'
  )
  found = {'parameters and optimizer state': (16 * params, model_keys)}

  def batch(rows: int, length: int, keep_layers: int) -> int:
    tokens = rows * length
    total = 4 * tokens * output_vocab + item * tokens * (hidden + 2 * dim) * keep_layers
    if scores:
      total += 4 * rows * heads * length * length
    return total

  rows = max(1, int(run.train.batch_size) // max(1, num_devices))
  longest = int(longest_training_sequence(run))
  found['activations of one training batch'] = (
      batch(rows, longest, layers),
      f'config.train.batch_size={run.train.batch_size} over {num_devices} device(s), sequences of up to {longest} '
      f'tokens (config.data), {model_keys}',
  )
  for n in run.eval.lengths:
    length = int(run.data.longest_sequence(dataclasses.replace(run, eval=dataclasses.replace(run.eval, lengths=(n,)))))
    rows = max(1, eval_batch_size(run.eval, length, num_devices) // max(1, num_devices))
    found[f'evaluation at length {n}'] = (
        batch(rows, length, 1),
        f'config.eval.lengths (its {n}: {length} tokens), eval.batch_size={run.eval.batch_size}, '
        f'eval.max_tokens_per_batch={run.eval.max_tokens_per_batch}',
    )
    if isinstance(run.data, TaskSource):  # drawn whole: int32 inputs and targets of every example
      found[f'evaluation set at length {n}'] = (
          8 * int(run.eval.num_examples) * length,
          f'config.eval.num_examples={run.eval.num_examples} at config.eval.lengths {n} ({length} tokens)',
      )
  return found


def position_parameters(run: Config) -> int:
  """The position encoders' parameters (a learned table of rows x model_dim, learned slopes and buckets), counted
  from their shapes (`jax.eval_shape` of each leaf's `init`: nothing is allocated); each distinct layer encoder
  once, so a shared encoder is counted as one (a lower bound either way)."""
  model = run.model
  heads, dim = int(model.num_heads), int(model.model_dim)
  distinct = []
  for encoder in run.encoder if isinstance(run.encoder, tuple) else (run.encoder,):
    if encoder not in distinct:
      distinct.append(encoder)
  total = 0
  for leaf in (leaf for encoder in distinct for leaf in contract.leaves(encoder)):
    shapes = jax.eval_shape(
        lambda leaf=leaf: {
            k: v
            for k, v in leaf.init(jax.random.key(0), heads, head_dim=dim // heads, model_dim=dim).items()
            if k != 'dims'  # the recorded sizes, not parameters
        }
    )
    total += sum(math.prod(x.shape) for x in jax.tree.leaves(shapes))
  return total


def check_memory(run: Config, num_devices: int) -> None:
  """Refuses a run whose `memory_estimate` (a lower bound) exceeds one device's memory, with the estimate:
  before any allocation, rather than an allocation error, an abort or a segfault, maybe after training."""
  available = available_memory(num_devices)
  if available is None:
    return
  found = memory_estimate(run, num_devices)
  what, (need, keys) = max(found.items(), key=lambda item: item[1][0])
  params = found['parameters and optimizer state'][0]
  total = params + need if what != 'parameters and optimizer state' else params  # the parameters counted once
  if total > available:
    raise ConfigError(
        f'this run needs at least {total / GIB:,.1f} GiB per device ({what}: {need / GIB:,.1f} GiB, set by {keys}; '
        f'parameters and optimizer state included) but each of the {num_devices} device(s) has '
        f'{available / GIB:,.1f} GiB; allowed: a run that fits: a smaller model, batch or length, '
        "config.eval.max_tokens_per_batch for long evaluations, or config.model.attention_implementation='blockwise'."
    )


# ---------------------------------------------------------------------------------- derived quantities
def architecture(run: Config) -> str:
  """'causal' (a causal LM: the corpus, causal tasks such as count_copy) or 'bidirectional' (a classifier)."""
  return run.data.architecture(run)


def vocab_sizes(run: Config) -> tuple[int, int | None]:
  """(vocab_size, output_vocab_size) of the run's model: the data fixes them, not the config."""
  return run.data.vocab_sizes(run)


def model_config(run: Config) -> ModelConfig:
  """The `relpos_jax.nn.models.ModelConfig` of a run, with the vocabulary sizes of its data."""
  vocab_size, output_vocab_size = vocab_sizes(run)
  return dataclasses.replace(run.model, vocab_size=vocab_size, output_vocab_size=output_vocab_size)


def longest_training_sequence(run: Config) -> int:
  """The most tokens a training batch holds (the largest bucket for tasks)."""
  return run.data.longest_training_sequence(run)


def longest_sequence(run: Config) -> int:
  """The most tokens any training or evaluation sequence of the run holds (what position tables must cover)."""
  return run.data.longest_sequence(run)


def input_position_bound(run: Config) -> int | None:
  """One past the largest input position (`batch['input_positions']`) the run's task hands the model at any
  training or evaluation length; None when it hands none (every corpus, most tasks)."""
  task = run.task
  if task is None:
    return None
  at = [task.max_input_position(int(run.data.max_length))]
  at += [task.for_evaluation().max_input_position(int(n)) for n in run.eval.lengths]
  return None if at[0] is None else max(at) + 1


def task_position_bound(run: Config) -> int | None:
  """One past the largest position (`batch['positions']`, read by every encoder in place of 0..T-1) the run's
  task hands the model at any training or evaluation length; None when it hands none."""
  task = run.task
  if task is None:
    return None
  at = [task.max_given_position(int(run.data.max_length))]
  at += [task.for_evaluation().max_given_position(int(n)) for n in run.eval.lengths]
  return None if at[0] is None else max(at) + 1


def layer_leaves(encoder) -> tuple[contract.Encoder, ...]:
  """The leaf encoders of an encoder, or of every layer of per-layer encoders (a tuple)."""
  layers = encoder if isinstance(encoder, tuple) else (encoder,)
  return tuple(leaf for e in dict.fromkeys(layers) for leaf in contract.leaves(e))


def train_position_limit(encoder) -> int | None:
  """The fewest positions any part of the encoder draws its training positions from (None: 0..L-1)."""
  limits = [
      p.train_position_limit
      for e in (encoder if isinstance(encoder, tuple) else (encoder,))
      for p in contract.walk(e)
      if p.train_position_limit is not None
  ]
  return min(limits) if limits else None


def carries_position(encoder) -> bool:
  """Whether any part of the encoder (of any layer) lets the model tell positions apart (NoPE does not)."""
  return any(e.carries_position for e in layer_leaves(encoder))
