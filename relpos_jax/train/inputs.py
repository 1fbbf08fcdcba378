"""The data of a run, built from its config: training batches by step, evaluation sets by length.

Training batch `step` is a pure function of (seed, step): it is drawn from
`np.random.default_rng((streams.DATA_TRAIN, seed, step))`, never from a generator carried across steps, so a run
resumed from a checkpoint at step k sees exactly the batches k, k+1, ... of an uninterrupted run.
Evaluation sets depend only on (eval.seed, length, split), not on the training seed, so runs of different
seeds are scored on the same examples. Splits: 'validation' (where choices are made, and what training
evaluates) and 'test' (held out for what a study reports). The corpus splits its files three ways
(`relpos_jax.data.corpus`); a task draws its test examples from another random stream than validation.

Corpus evaluation scores the same target bytes at every length: the windows of every length end at common
anchors of the split and only their last `eval.scored_tail` targets (default: the shortest evaluation
length) count in the metrics (`loss_mask`); a `position_mask` marks every position of a real window, for
the loss-against-position curve, which scores the whole window.

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
import hashlib
import warnings
from typing import Protocol

import numpy as np

from relpos_jax import data as data_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train import streams
from relpos_jax.train.objectives import BATCH_KEYS, Objective

EVAL_SPLITS = ('validation', 'test')
# A scored set's scoring rule, recorded under its key 'protocol' (the part of the protocol that says which targets
# are scored; committed results read the key).
SAME_TARGETS = 'same_targets: windows ending at common anchors, scored tail T'
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

  def eval_set(self, length: int, split: str = 'validation') -> list[Batch]:
    ...

  def scored_set(self, length: int, split: str = 'validation') -> dict:
    """What the evaluation set of `length` scores: split, count, fingerprint (and its scoring rule, 'protocol')."""

  def describe(self) -> dict:
    ...

  def require_split(self, split: str, lengths) -> None:
    """ConfigError unless evaluation `split` can serve every one of `lengths` (checked before any training)."""

  # What a study and the training loop read of the source. Each data class answers these itself, so no code
  # outside it asks which source a run has (a new source is its data class and its config section).
  metric: str  # the headline metric, a key of the objective's metrics: the study's tables, the progress line
  lower_is_better: bool  # the metric's direction (the study's tables and comparisons)
  # A loss beyond chance at any evaluation length marks a run diverged (True), or only at the training length
  # (False: longer lengths are harder problems, and failing them is the finding, not a divergence).
  diverged_at_every_length: bool
  # Per-document totals for the study's document bootstrap (`relpos_jax.study.documents`: needs `corpus` and
  # `target_positions`).
  has_documents: bool
  # The loss-against-position curve carries the loss in bits too ('bits_per_char' beside 'loss').
  position_curve_in_bits: bool

  def protocol_record(self, lengths, split: str) -> dict:
    """What the source adds to a study's protocol record (results.json 'protocol'), evaluated at `lengths`."""


def train_rng(seed: int, step: int) -> np.random.Generator:
  return np.random.default_rng((streams.DATA_TRAIN, int(seed), int(step)))


def eval_rng(eval_seed: int, length: int, split: str = 'validation') -> np.random.Generator:
  stream = {'validation': streams.DATA_VALIDATION, 'test': streams.DATA_TEST}[check_eval_split(split)]
  return np.random.default_rng((stream, int(eval_seed), int(length)))


def check_eval_split(split: str) -> str:
  if split not in EVAL_SPLITS:
    raise ValueError(f'evaluation split={split!r} is invalid; allowed: one of {EVAL_SPLITS}.')
  return split


def batches_of(arrays: Batch, batch_size: int) -> list[Batch]:
  """Cuts (N, T) arrays into batches of `batch_size` rows; the last is filled with masked-out copies."""
  n = arrays['inputs'].shape[0]
  if n == 0:
    raise ValueError('an evaluation set needs at least one example, got none.')
  fill = (-n) % batch_size
  if fill:
    filler = {k: np.repeat(v[:1], fill, axis=0) for k, v in arrays.items()}
    for mask in ('loss_mask', 'accuracy_mask', 'position_mask'):
      if mask in filler:
        filler[mask] = np.zeros_like(filler[mask])
    arrays = {k: np.concatenate([v, filler[k]]) for k, v in arrays.items()}
  return [{k: v[i : i + batch_size] for k, v in arrays.items()} for i in range(0, n + fill, batch_size)]


# Rows per evaluation batch: a property of the config (config.py computes it for the memory estimate too).
eval_batch_size = config_lib.eval_batch_size


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


def packed_fields(
    segment_ids: np.ndarray, packing: str, *, seed: int, step: int, max_offset=None, batch_size=None, rows=None
) -> Batch:
  """What `data.packing` adds to a training batch, from each window's document ids (B, L) (0 at the window's
  first token, one more at each document start: `window_documents`).

  'none': nothing (the batch is today's). 'continue': 'segment_ids' (the model masks attention across
  documents; positions stay 0..L-1). 'reset': also 'positions', restarting at 0 at each document start (the
  document the window starts inside begins at 0 too: its earlier text is not in the window). 'reset_offset':
  each document's positions start at an offset drawn uniformly from [0, max_offset], per (row, document) from
  `np.random.default_rng((streams.DATA_PACKING, seed, step))` over the whole batch of `batch_size` rows (`rows`: this
  process's rows of it, as the windows are), so positions reach max_offset + L - 1 at most.
  """
  if packing not in config_lib.PACKING:
    raise config_lib.ConfigError(f'config.data.packing={packing!r} is invalid: allowed: one of {config_lib.PACKING}.')
  if packing == 'none':
    return {}
  segment_ids = np.asarray(segment_ids, np.int32)
  out = {'segment_ids': segment_ids}
  if packing == 'continue':
    return out
  index = np.arange(segment_ids.shape[1], dtype=np.int32)
  starts = np.ones(segment_ids.shape, bool)
  starts[:, 1:] = segment_ids[:, 1:] != segment_ids[:, :-1]
  first = np.maximum.accumulate(np.where(starts, index, 0), axis=1)  # each token's document start in the window
  positions = index - first
  if packing == 'reset_offset':
    rng = np.random.default_rng((streams.DATA_PACKING, int(seed), int(step)))
    offsets = rng.integers(0, int(max_offset) + 1, size=(int(batch_size), segment_ids.shape[1]), dtype=np.int32)
    if rows is not None:
      offsets = offsets[rows]
    positions = positions + np.take_along_axis(offsets, segment_ids, axis=1)
  out['positions'] = positions.astype(np.int32)
  return out


def window_documents(inputs: np.ndarray) -> np.ndarray:
  """int32 (B, L): the document of each input byte of corpus windows, counted from the window's first (0): a
  DOC_SEPARATOR byte ends the document before it (as `relpos_jax.data.bpe.document_ids`), so the next one
  starts after it."""
  separators = (np.asarray(inputs) == data_lib.corpus.DOC_SEPARATOR).astype(np.int32)
  return np.cumsum(separators, axis=1, dtype=np.int32) - separators


class CorpusData:
  """Byte-level language modelling (a causal decoder) on `config.data.corpus`: 'stdlib' (the built-in
  corpus) or a path to a directory of text files, one text file, or a glob pattern (`Corpus.load`)."""

  architecture = 'causal'
  uses_padding = False  # windows are cut at full length; a causal model needs no padding mask
  metric = 'bits_per_char'
  lower_is_better = True
  diverged_at_every_length = True  # every length predicts the same kind of text: beyond chance anywhere is broken
  has_documents = True
  position_curve_in_bits = True  # a byte's loss in bits is its bits per character

  def __init__(self, config, corpus: data_lib.Corpus | None = None):
    self.seed = int(config.seed)
    self.batch_size = int(config.train.batch_size)
    self.train_length = int(config.data.train_length)
    self.eval_section = config.eval
    section = config.data  # the typed keys, defaults included, each checked
    self.packing, self.packing_max_offset = section.packing, section.packing_max_offset
    if corpus is None:
      try:
        corpus = data_lib.Corpus.load(config.data.corpus, max_train_bytes=config.data.max_train_bytes)
      except (TypeError, ValueError) as e:
        raise config_lib.ConfigError(f'config.data.corpus={config.data.corpus!r} is invalid: {e}') from None
    self.corpus = corpus
    self.objective = Objective('language_model')
    self.vocab_size = self.num_classes = self.corpus.vocab_size
    self.eval_lengths = tuple(int(n) for n in config.eval.lengths)
    self.max_train_bytes = config.data.max_train_bytes
    train_bytes = self.corpus.tokens('train').size
    if self.train_length + 1 > train_bytes:  # else the first batch fails, with no key named
      raise config_lib.ConfigError(
          f'config.data.train_length={self.train_length} is invalid: a training window needs train_length + 1 '
          f'bytes, but the train split of config.data.corpus={config.data.corpus!r} '
          f'(config.data.max_train_bytes={self.max_train_bytes}) has {train_bytes}; allowed: <= {train_bytes - 1}, '
          'or load more of the corpus.'
      )
    if self.eval_lengths:
      self.require_split('validation', self.eval_lengths)
      self._warn_if_eval_is_short('validation')

  # ---------------------------------------------------------------- the same targets at every length
  @property
  def scored_tail(self) -> int:
    """T: the targets scored per window (`eval.scored_tail`, default the shortest evaluation length)."""
    tail = self.eval_section.scored_tail
    if tail is not None:
      return int(tail)
    return min(self.eval_lengths) if self.eval_lengths else self.train_length

  def _window_plan(self, length: int) -> tuple[int, int, int]:
    """(reach, tail, count) of the windows of `length`: anchors for the longest evaluation length, so every
    configured length ends at the same anchors. A length outside [tail, longest] is still evaluated (its
    own anchors or a shorter tail), and its fingerprint then shows that it scores other targets."""
    tail = min(self.scored_tail, length)
    reach = max(self.eval_lengths + (length,))
    num_tokens = self.eval_section.num_tokens
    count = int(self.eval_section.num_examples) if num_tokens is None else max(1, -(-int(num_tokens) // tail))
    return reach, tail, count

  def require_split(self, split: str, lengths) -> None:
    """ConfigError unless `split` holds a window of the longest of `lengths` (before any training)."""
    longest = max(int(n) for n in lengths)
    available = self.corpus.tokens(check_eval_split(split)).size
    if not available and self.corpus.num_files == 1:
      raise config_lib.ConfigError(
          f'config.data.corpus={self.corpus.source.split(": ", 1)[-1]!r} is one file: a corpus is split into '
          'train, validation and test by whole files (a hash of each path), so one file is all training and '
          f'nothing is held out for the {split} split; allowed: a directory or a glob of several text files '
          '(split a long text into files), or no evaluation (config.eval.lengths=()).'
      )
    if longest + 1 > available:
      raise config_lib.ConfigError(
          f'config.eval.lengths={tuple(lengths)!r} is invalid: a window of {longest} bytes needs {longest + 1} '
          f'{split} bytes, but the corpus of config.data.max_train_bytes={self.max_train_bytes} has '
          f'{available} ({len(self.corpus.split_files(split))} file(s)); shorten the lengths or load more of '
          'the corpus.'
      )

  def _warn_if_eval_is_short(self, split: str) -> None:
    """Warns when the split holds fewer anchors than eval.num_tokens / eval.num_examples ask for: the
    evaluation then scores fewer tokens than the config says (a small corpus load can leave a split a
    single short file)."""
    reach, tail, count = self._window_plan(max(self.eval_lengths))
    available = len(self.corpus.anchors(reach, tail, count, split))
    if available < count:
      num_tokens = self.eval_section.num_tokens
      what = (
          f'config.eval.num_tokens={num_tokens}'
          if num_tokens is not None
          else f'config.eval.num_examples={self.eval_section.num_examples}'
      )
      warnings.warn(
          f'{what} asks for more {split} text than the corpus has: its {split} split '
          f'(config.data.max_train_bytes={self.max_train_bytes}) is {self.corpus.tokens(split).size} bytes, so '
          f'evaluation scores {available * tail} tokens ({available} windows ending {tail} targets apart) '
          f'instead of {count * tail}. Load more of the corpus (a larger max_train_bytes) for a meaningful '
          'evaluation.',
          UserWarning,
          stacklevel=3,
      )

  def train_batch(self, step: int, rows: slice | None = None) -> Batch:
    batch = lm_batch(
        self.corpus.sample_batch(train_rng(self.seed, step), self.batch_size, self.train_length, rows=rows)
    )
    if self.packing != 'none':
      batch.update(self._packed(window_documents(batch['inputs']), step, rows))
    return batch

  def _packed(self, segment_ids: np.ndarray, step: int, rows) -> Batch:
    return packed_fields(
        segment_ids,
        self.packing,
        seed=self.seed,
        step=step,
        max_offset=self.packing_max_offset,
        batch_size=self.batch_size,
        rows=rows,
    )

  @functools.lru_cache(maxsize=EVAL_SETS_CACHED)
  def eval_set(self, length: int, split: str = 'validation') -> list[Batch]:
    """The windows of `length` inputs ending at the split's common anchors; only their last `scored_tail`
    targets are scored (about `eval.num_tokens` of them, or `eval.num_examples` windows), the same bytes at
    every evaluation length."""
    reach, tail, count = self._window_plan(int(length))
    batch = lm_batch(self.corpus.anchored_windows(int(length), reach, tail, count, check_eval_split(split)))
    batch['position_mask'] = batch['loss_mask'].copy()  # every position, for the loss-against-position curve
    for mask in ('loss_mask', 'accuracy_mask'):
      batch[mask][:, : int(length) - tail] = 0.0
    return batches_of(batch, eval_batch_size(self.eval_section, length))

  def target_positions(self, length: int, split: str = 'validation') -> np.ndarray:
    """int64 (N, length): the split byte position of every target of the windows of `length`, in the rows
    of `eval_set(length, split)` (for per-document totals: `relpos_jax.data.bpe.document_ids`)."""
    reach, tail, count = self._window_plan(int(length))
    starts = self.corpus.anchors(reach, tail, count, check_eval_split(split)) - int(length)
    return starts[:, None] + 1 + np.arange(int(length))

  def scored_set(self, length: int, split: str = 'validation') -> dict:
    reach, tail, count = self._window_plan(int(length))
    described = self.corpus.scored_set(int(length), reach, tail, count, check_eval_split(split))
    return {**described, 'protocol': SAME_TARGETS, 'scored_tail': tail, 'reach': reach}

  def protocol_record(self, lengths, split: str) -> dict:
    """The scored windows: the same targets at every length, how many at the longest, where the curve is read."""
    longest = max(int(n) for n in lengths)
    return {
        'windows': SAME_TARGETS,
        'scored_tail': self.scored_tail,
        'num_scored': self.scored_set(longest, split)['num_scored'],
        'position_curve_length': longest,
    }

  def describe(self) -> dict:
    packing = {} if self.packing == 'none' else {'packing': self.packing, 'packing_max_offset': self.packing_max_offset}
    return {'source': 'corpus', **self.corpus.describe(), **packing}


class TaskData:
  """An algorithmic task: training lengths n ~ U{min_length..max_length}, one per batch, bucketed."""

  uses_padding = True
  metric = 'accuracy'
  lower_is_better = False
  diverged_at_every_length = False  # a longer input is a harder problem: failing it is the result, not divergence
  has_documents = False
  position_curve_in_bits = False

  def __init__(self, config):
    self.seed = int(config.seed)
    self.eval_section = config.eval
    self.task = config.task
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

  def require_split(self, split: str, lengths) -> None:
    """Every split holds examples of every length: a task draws them from the split's own random stream."""

  @property
  def buckets(self) -> tuple[int, ...]:
    """The padded training lengths (one compilation each)."""
    return self.spec.buckets(self.task)

  def train_batch(self, step: int, rows: slice | None = None) -> Batch:
    # A task draws its rows one after another from one generator: the whole batch is drawn (cheap), then cut.
    batch = task_batch(data_lib.sample_bucketed(self.task, train_rng(self.seed, step), self.spec))
    return batch if rows is None else {k: v[rows] for k, v in batch.items()}

  @functools.lru_cache(maxsize=EVAL_SETS_CACHED)
  def eval_set(self, length: int, split: str = 'validation') -> list[Batch]:
    """`eval.num_examples` examples of input length `length`, right-padded (masked) to a multiple of
    `eval.pad_multiple` tokens; 'test' examples come from another random stream than 'validation'."""
    rng = eval_rng(self.eval_section.seed, length, split)
    batch = self.task.for_evaluation().sample(rng, int(self.eval_section.num_examples), int(length))
    multiple = int(self.eval_section.pad_multiple)
    total = batch['inputs'].shape[1]
    batch = data_lib.pad_batch(batch, -(-total // multiple) * multiple, self.task.pad_id)
    return batches_of(task_batch(batch), eval_batch_size(self.eval_section, batch['inputs'].shape[1]))

  def scored_set(self, length: int, split: str = 'validation') -> dict:
    """A task's examples differ at every length by design (their input length); the fingerprint covers
    the inputs, targets and masks of the set."""
    h = hashlib.sha256(f'{split}\x00{length}\x00'.encode('utf-8'))
    batches = self.eval_set(int(length), split)
    for batch in batches:
      for key in sorted(batch):
        h.update(key.encode('utf-8'))
        h.update(np.ascontiguousarray(batch[key]).tobytes())
    scored = int(sum(float(np.sum(b['loss_mask'])) for b in batches))
    return {'split': split, 'num_scored': scored, 'fingerprint': h.hexdigest()[:16], 'protocol': 'task examples'}

  def protocol_record(self, lengths, split: str) -> dict:
    """Nothing beyond the study's own keys: a task's examples differ at every length by design."""
    return {}

  def describe(self) -> dict:
    return {
        'source': 'task',
        **self.task.metadata,
        'train_lengths': [self.spec.min_length, self.spec.max_length],
        'buckets': list(self.buckets),
    }
