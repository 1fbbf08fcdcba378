"""The data of a run, built from its config: training batches by step, evaluation sets by length.

Training batch `step` is a pure function of (seed, step): it is drawn from
`np.random.default_rng((TRAIN_STREAM, seed, step))`, never from a generator carried across steps, so a run
resumed from a checkpoint at step k sees exactly the batches k, k+1, ... of an uninterrupted run.
Evaluation sets depend only on (eval.seed, length), not on the training seed, so runs of different seeds
are scored on the same examples.

In a run over several processes each one builds only its rows of every training batch
(`train_batch(step, rows)`), equal to those rows of the whole batch; every process reads the corpus (up to
`data.max_train_bytes`, 8 MB by default) and builds the (small) evaluation sets whole.

Batches follow the format of `relpos_jax.train.objectives` (inputs, targets, loss_mask, accuracy_mask,
padding_mask; numpy, on the host). An evaluation set is cut into batches of `eval.batch_size`; the last one
is filled with copies of a real row whose masks are zero (so shapes stay fixed and the filler counts for
nothing).
"""

from __future__ import annotations

import functools
import warnings
from typing import Protocol

import jax
import numpy as np

from relpos_jax import data as data_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train.objectives import BATCH_KEYS, Objective

TRAIN_STREAM = 0
EVAL_STREAM = 1
# Evaluation sets kept in memory (reused by every in-training evaluation); a sweep over hundreds of
# lengths (the published protocol) regenerates them instead of holding gigabytes.
EVAL_SETS_CACHED = 32

Batch = dict[str, np.ndarray]


class Data(Protocol):
  """What the training loop needs from a data source."""

  objective: Objective
  architecture: str  # 'causal' or 'bidirectional'
  uses_padding: bool  # whether batches can hold padding (then the model gets padding_mask)
  vocab_size: int  # input embedding rows
  num_classes: int  # output logits

  def train_batch(self, step: int, rows: slice | None = None) -> Batch:
    """Training batch `step` (a pure function of (seed, step)); `rows`: only those rows of it."""

  def eval_set(self, length: int) -> list[Batch]:
    ...

  def describe(self) -> dict:
    ...


def train_rng(seed: int, step: int) -> np.random.Generator:
  return np.random.default_rng((TRAIN_STREAM, int(seed), int(step)))


def eval_rng(eval_seed: int, length: int) -> np.random.Generator:
  return np.random.default_rng((EVAL_STREAM, int(eval_seed), int(length)))


def batches_of(arrays: Batch, batch_size: int) -> list[Batch]:
  """Cuts (N, T) arrays into batches of `batch_size` rows; the last is filled with masked-out copies."""
  n = arrays['inputs'].shape[0]
  if n == 0:
    raise ValueError('an evaluation set needs at least one example, got none.')
  fill = (-n) % batch_size
  if fill:
    filler = {k: np.repeat(v[:1], fill, axis=0) for k, v in arrays.items()}
    filler['loss_mask'] = np.zeros_like(filler['loss_mask'])
    filler['accuracy_mask'] = np.zeros_like(filler['accuracy_mask'])
    arrays = {k: np.concatenate([v, filler[k]]) for k, v in arrays.items()}
  return [{k: v[i : i + batch_size] for k, v in arrays.items()} for i in range(0, n + fill, batch_size)]


def eval_batch_size(eval_config, length: int, num_devices: int | None = None) -> int:
  """Rows per evaluation batch at `length` tokens: `eval.batch_size`, or fewer under
  `eval.max_tokens_per_batch`, but always a multiple of the device count (at least one row per device)."""
  size = int(eval_config.batch_size)
  budget = getattr(eval_config, 'max_tokens_per_batch', None)
  if budget is None:
    return size
  if num_devices is None:
    num_devices = jax.device_count()
  fitting = (int(budget) // max(int(length), 1)) // num_devices * num_devices
  return max(num_devices, min(size, fitting))


def lm_batch(tokens: np.ndarray) -> Batch:
  """(B, L + 1) corpus windows -> next-token inputs and targets of length L, every position scored."""
  tokens = np.asarray(tokens, np.int32)
  ones = np.ones(tokens[:, 1:].shape, np.float32)
  return {
      'inputs': tokens[:, :-1],
      'targets': tokens[:, 1:],
      'loss_mask': ones,
      'accuracy_mask': ones.copy(),
      'padding_mask': np.ones(ones.shape, bool),
  }


def task_batch(batch: Batch) -> Batch:
  """A task's batch in the common format (adds an all-True padding mask when it was not bucketed)."""
  out = {k: batch[k] for k in BATCH_KEYS if k in batch}
  if 'padding_mask' not in out:
    out['padding_mask'] = np.ones(batch['inputs'].shape, bool)
  out['loss_mask'] = out['loss_mask'].astype(np.float32)
  out['accuracy_mask'] = out['accuracy_mask'].astype(np.float32)
  return out


class CorpusData:
  """Byte-level language modelling (a causal decoder) on `config.data.corpus`: 'stdlib' (the built-in
  corpus) or a path to a directory of text files, one text file, or a glob pattern (`Corpus.load`)."""

  architecture = 'causal'
  uses_padding = False  # windows are cut at full length; a causal model needs no padding mask

  def __init__(self, config, corpus: data_lib.Corpus | None = None):
    self.seed = int(config.seed)
    self.batch_size = int(config.train.batch_size)
    self.train_length = int(config.data.train_length)
    self.eval_config = config.eval
    if corpus is None:
      try:
        corpus = data_lib.Corpus.load(config.data.corpus, max_train_bytes=config.data.max_train_bytes)
      except (TypeError, ValueError) as e:
        raise config_lib.ConfigError(f'config.data.corpus={config.data.corpus!r} is invalid: {e}') from None
    self.corpus = corpus
    self.objective = Objective('language_model')
    self.vocab_size = self.num_classes = self.corpus.vocab_size
    longest = max([0] + [int(n) for n in config.eval.lengths])
    if longest + 1 > self.corpus.num_val_tokens:
      raise config_lib.ConfigError(
          f'config.eval.lengths={tuple(config.eval.lengths)!r} is invalid: a window of {longest} scored '
          f'bytes needs {longest + 1} validation bytes, but the corpus of config.data.max_train_bytes='
          f'{config.data.max_train_bytes} has {self.corpus.num_val_tokens}; shorten the lengths or load '
          'more of the corpus.'
      )
    self._warn_if_eval_is_short([int(n) for n in config.eval.lengths], config.data.max_train_bytes)

  def _windows_asked(self, length: int) -> int:
    num_tokens = getattr(self.eval_config, 'num_tokens', None)
    return int(self.eval_config.num_examples) if num_tokens is None else max(1, int(num_tokens) // length)

  def _warn_if_eval_is_short(self, lengths: list[int], max_train_bytes) -> None:
    """Warns when the validation split holds fewer windows than eval.num_tokens / eval.num_examples ask
    for: the evaluation then scores fewer tokens than the config says (a small corpus load can leave
    validation a single short file)."""
    available = self.corpus.num_val_tokens
    short = []
    for n in lengths:
      asked = self._windows_asked(n)
      fits = (available - 1) // n
      if fits < asked:
        short.append(f'{fits * n} tokens instead of {asked * n} at length {n}')
    if short:
      num_tokens = getattr(self.eval_config, 'num_tokens', None)
      what = (
          f'config.eval.num_tokens={num_tokens}'
          if num_tokens is not None
          else f'config.eval.num_examples={self.eval_config.num_examples}'
      )
      warnings.warn(
          f'{what} asks for more validation text than the corpus has: its validation split '
          f'(config.data.max_train_bytes={max_train_bytes}) is {available} bytes in '
          f'{self.corpus.num_val_files} file(s), so evaluation scores {"; ".join(short)}. Load more '
          'of the corpus (a larger max_train_bytes) for a meaningful evaluation.',
          UserWarning,
          stacklevel=3,
      )

  def train_batch(self, step: int, rows: slice | None = None) -> Batch:
    return lm_batch(self.corpus.sample_batch(train_rng(self.seed, step), self.batch_size, self.train_length, rows=rows))

  @functools.lru_cache(maxsize=EVAL_SETS_CACHED)
  def eval_set(self, length: int) -> list[Batch]:
    """Disjoint validation windows of `length` scored tokens: `eval.num_examples` of them, or about
    `eval.num_tokens` tokens' worth when that is set (the same amount of text at every length)."""
    windows = self.corpus.eval_windows(int(length), self._windows_asked(int(length)))
    return batches_of(lm_batch(windows), eval_batch_size(self.eval_config, length))

  def describe(self) -> dict:
    return {'source': 'corpus', **self.corpus.describe()}


class TaskData:
  """An algorithmic task: training lengths n ~ U{min_length..max_length}, one per batch, bucketed."""

  uses_padding = True

  def __init__(self, config):
    self.seed = int(config.seed)
    self.eval_config = config.eval
    self.task = config_lib.resolve_task(config)
    self.spec = data_lib.BatchSpec(
        batch_size=int(config.train.batch_size),
        max_length=int(config.data.max_length),
        num_buckets=int(config.data.num_buckets),
        min_length=int(config.data.min_length),
    )
    self.architecture = self.task.kind
    self.objective = Objective('task', reduction=config.data.loss_reduction)
    self.vocab_size = self.task.vocab_size
    self.num_classes = self.task.num_classes

  @property
  def buckets(self) -> tuple[int, ...]:
    """The padded training lengths (one compilation each)."""
    return self.spec.buckets(self.task)

  def train_batch(self, step: int, rows: slice | None = None) -> Batch:
    # A task draws its rows one after another from one generator: the whole batch is drawn (cheap), then cut.
    batch = task_batch(data_lib.sample_bucketed(self.task, train_rng(self.seed, step), self.spec))
    return batch if rows is None else {k: v[rows] for k, v in batch.items()}

  @functools.lru_cache(maxsize=EVAL_SETS_CACHED)
  def eval_set(self, length: int) -> list[Batch]:
    """`eval.num_examples` examples of input length `length`, right-padded (masked) to a multiple of
    `eval.pad_multiple` tokens."""
    rng = eval_rng(self.eval_config.seed, length)
    batch = self.task.sample(rng, int(self.eval_config.num_examples), int(length))
    multiple = int(self.eval_config.pad_multiple)
    total = batch['inputs'].shape[1]
    batch = data_lib.pad_batch(batch, -(-total // multiple) * multiple, self.task.pad_id)
    return batches_of(task_batch(batch), eval_batch_size(self.eval_config, batch['inputs'].shape[1]))

  def describe(self) -> dict:
    return {
        'source': 'task',
        **self.task.metadata,
        'train_lengths': [self.spec.min_length, self.spec.max_length],
        'buckets': list(self.buckets),
    }


def build_data(config) -> CorpusData | TaskData:
  """The data of `config` (`config.data.source` picks the corpus or an algorithmic task)."""
  if config.data.source == 'corpus':
    return CorpusData(config)
  if config.data.source == 'task':
    return TaskData(config)
  raise config_lib.ConfigError(
      f'config.data.source={config.data.source!r} is invalid; allowed: ' f'{tuple(config_lib.SOURCES)}.'
  )
