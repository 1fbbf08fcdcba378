"""A corpus seen as subword tokens: the data of a run with `data.tokenizer='bpe'` (`configs/lm.py:bpe`).

The same corpus and splits as the byte-level run (`relpos_jax.train.inputs.CorpusData`), tokenized by a
byte-level BPE of `data.vocab_size` symbols trained on the training split only (`relpos_jax.data.bpe`, cached in
`data.tokenizer_cache`, default ~/.cache/relpos_jax/bpe). What changes:

* lengths (`data.train_length`, `eval.lengths`) count tokens;
* the scored set is defined in characters: `eval.scored_tail` T (default: the shortest evaluation length)
  counts **bytes**, and each window scores the tokens whose first byte lies in the T bytes before its anchor
  (`bpe.scored_ranges`), the same tokens at every length; anchors are spread over the split as for bytes, with
  room for the longest window in tokens (`bpe.anchors`);
* every batch carries `characters` (the characters of each target), so `bits_per_char` is the scored targets'
  total bits over their total characters (`relpos_jax.train.objectives`), on the scale of a byte-level run;
* `describe()` (data.json) adds the tokenizer (fingerprint, vocabulary size, the training split it was fit on)
  and its fingerprint joins the corpus's, so a run is never resumed with another tokenizer.
"""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np

from relpos_jax.data import bpe as bpe_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs

DEFAULT_CACHE = os.path.join('~', '.cache', 'relpos_jax', 'bpe')
PROTOCOL = (
    'same_targets (BPE): windows in tokens ending at common anchors, scoring the tokens that start in the last T bytes'
)


class BPECorpusData(inputs.CorpusData):
  """Byte-level BPE language modelling on `config.data.corpus` (a causal decoder); see the module docstring."""

  # A token's loss is not a character's: the loss-against-position curve keeps no characters per position, so
  # it stays in nats per token (a 'bits_per_char' column there would be bits per token under that name).
  position_curve_in_bits = False

  def __init__(self, config, corpus=None, tokenizer: bpe_lib.BPE | None = None):
    self.section = config.data
    self._tokenizer = tokenizer
    super().__init__(config, corpus)  # checks the evaluation split, which needs the tokenizer
    self.vocab_size = self.num_classes = self.tokenizer.vocab_size
    if self.vocab_size != self.section.vocab_size:
      raise config_lib.ConfigError(
          f'config.data.vocab_size={self.section.vocab_size} is invalid: the tokenizer given has {self.vocab_size}.'
      )

  @functools.cached_property
  def tokenizer(self) -> bpe_lib.BPE:
    if self._tokenizer is not None:
      return self._tokenizer
    cache = self.section.tokenizer_cache or DEFAULT_CACHE
    try:
      return bpe_lib.load_or_train(self.corpus, self.section.vocab_size, cache)
    except ValueError as e:
      key, value = (
          ('data.tokenizer_cache', self.section.tokenizer_cache)
          if str(e).startswith('tokenizer cache')
          else ('data.vocab_size', self.section.vocab_size)
      )
      raise config_lib.ConfigError(f'config.{key}={value!r} is invalid: {e}') from None

  @functools.lru_cache(maxsize=3)
  def split_tokens(self, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids, each token's first byte in the split): `bpe.BPE.encode_split`."""
    return self.tokenizer.encode_split(self.corpus, split)

  # ---------------------------------------------------------------- the scored set in characters
  def _window_plan(self, length: int) -> tuple[int, int, int]:
    """(reach in tokens, tail in bytes, count): the tail is not cut to `length`, which counts tokens; a tail of
    T bytes holds at most T tokens, and T <= the shortest evaluation length is checked by the config."""
    tail = int(self.scored_tail)
    reach = max(self.eval_lengths + (int(length),))
    num_tokens = self.eval_section.num_tokens
    count = int(self.eval_section.num_examples) if num_tokens is None else max(1, -(-int(num_tokens) // tail))
    return reach, tail, count

  def _anchors(self, length: int, split: str) -> tuple[np.ndarray, int]:
    reach, tail, count = self._window_plan(length)
    ids, starts = self.split_tokens(split)
    return bpe_lib.anchors(starts, self.corpus.tokens(split).size, reach, tail, count), tail

  def require_split(self, split: str, lengths) -> None:
    """ConfigError unless `split` holds windows of the longest of `lengths` tokens (before any training)."""
    self.tokenizer  # its own errors name data.vocab_size or data.tokenizer_cache
    try:
      self._anchors(max(int(n) for n in lengths), inputs.check_eval_split(split))
    except ValueError as e:
      raise config_lib.ConfigError(
          f'config.eval.lengths={tuple(lengths)!r} is invalid: the {split} split in BPE tokens is too short ({e}).'
      ) from None

  def _warn_if_eval_is_short(self, split: str) -> None:
    length = max(self.eval_lengths)
    anchors, tail = self._anchors(length, split)
    count = self._window_plan(length)[2]
    if len(anchors) < count:
      warnings.warn(
          f'the {split} split holds {len(anchors)} BPE evaluation windows, fewer than the {count} the config asks '
          f'for: evaluation scores about {len(anchors) * tail} bytes. Load more of the corpus.',
          UserWarning,
          stacklevel=3,
      )

  def _with_characters(self, batch: inputs.Batch) -> inputs.Batch:
    batch['characters'] = self.tokenizer.token_chars[batch['targets']].astype(np.float32)
    return batch

  def train_batch(self, step: int, rows: slice | None = None) -> inputs.Batch:
    """Random crops of `data.train_length` + 1 tokens of the training split, from the stream of (seed, step)."""
    ids = self.split_tokens('train')[0]
    length = self.train_length
    if length + 1 > ids.size:
      raise config_lib.ConfigError(
          f'config.data.train_length={length} is invalid: the training split has {ids.size} BPE tokens.'
      )
    starts = inputs.train_rng(self.seed, step).integers(0, ids.size - length, size=self.batch_size)
    if rows is not None:
      starts = starts[rows]
    batch = self._with_characters(inputs.lm_batch(ids[starts[:, None] + np.arange(length + 1)]))
    if self.packing != 'none':
      # Each input token's document: that of its first byte in the split (bpe.document_ids), from the window's.
      first_bytes = self.split_tokens('train')[1][starts[:, None] + np.arange(length)]
      documents = bpe_lib.document_ids(self.corpus.tokens('train'), first_bytes)
      batch.update(self._packed((documents - documents[:, :1]).astype(np.int32), step, rows))
    return batch

  @functools.lru_cache(maxsize=inputs.EVAL_SETS_CACHED)
  def eval_set(self, length: int, split: str = 'validation') -> list[inputs.Batch]:
    """Windows of `length` tokens ending with each anchor's scored tokens (the same at every length)."""
    anchors, tail = self._anchors(int(length), inputs.check_eval_split(split))
    ids, starts = self.split_tokens(split)
    windows, mask = bpe_lib.scored_windows(ids, bpe_lib.scored_ranges(starts, anchors, tail), int(length))
    batch = inputs.lm_batch(windows)
    batch['position_mask'] = batch['loss_mask'].copy()  # every position, for the loss-against-position curve
    batch['loss_mask'], batch['accuracy_mask'] = mask, mask.copy()
    self._with_characters(batch)
    return inputs.batches_of(batch, inputs.eval_batch_size(self.eval_section, length))

  def target_positions(self, length: int, split: str = 'validation') -> np.ndarray:
    """int64 (N, length): the split byte position of the first byte of every target token of the windows of
    `length` tokens, in the rows of `eval_set(length, split)`."""
    anchors, tail = self._anchors(int(length), inputs.check_eval_split(split))
    ids, starts = self.split_tokens(split)
    last = bpe_lib.scored_ranges(starts, anchors, tail)[:, 1]
    return starts[(last - int(length))[:, None] + 1 + np.arange(int(length))]

  def scored_set(self, length: int, split: str = 'validation') -> dict:
    anchors, tail = self._anchors(int(length), inputs.check_eval_split(split))
    ids, starts = self.split_tokens(split)
    described = bpe_lib.scored_set(self.tokenizer, ids, starts, bpe_lib.scored_ranges(starts, anchors, tail), split)
    reach = self._window_plan(int(length))[0]
    return {**described, 'protocol': PROTOCOL, 'scored_tail_bytes': tail, 'reach': reach}

  def describe(self) -> dict:
    described = super().describe()
    tokenizer = self.tokenizer.describe()
    return {
        **described,
        'corpus_fingerprint': described['fingerprint'],
        'fingerprint': f'{described["fingerprint"]}-bpe-{tokenizer["fingerprint"]}',
        'vocab_size': self.tokenizer.vocab_size,
        'unit': 'byte-level BPE tokens; bits per character = total bits / total UTF-8 code points scored',
        'tokenizer': {
            **tokenizer,
            'num_tokens': {s: int(self.split_tokens(s)[0].size) for s in ('train', 'validation', 'test')},
        },
    }
