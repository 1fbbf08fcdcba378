"""Retrieval tasks for causal models: ``mqar`` (multi-query associative recall), ``passkey`` (byte level) and
``passkey_tokens`` (the same template, one token per sentence).

Both hand a causal LM a context and score only the tokens it must retrieve from it, with the same
teacher-forcing layout as ``count_copy``: ``inputs = seq[:-1]``, ``targets = seq[1:]``, and
``loss_mask`` = ``accuracy_mask`` = 1 exactly at the positions whose target is a retrieved token.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, CausalTask


@dataclasses.dataclass(frozen=True)
class _Retrieval(CausalTask):
  """A retrieval sequence scored at its answer tokens."""

  def total_length(self, n: int) -> int:
    return self.sequence_length(n) - 1

  def sequence_length(self, n: int) -> int:
    raise NotImplementedError

  def _teacher_forcing(self, seq: np.ndarray, scored: np.ndarray) -> Batch:
    """``scored`` (B, len(seq)) marks the tokens to retrieve; they are scored where they are targets."""
    mask = scored[:, 1:].astype(np.float32)
    return {'inputs': seq[:, :-1].copy(), 'targets': seq[:, 1:].copy(), 'loss_mask': mask, 'accuracy_mask': mask.copy()}


@dataclasses.dataclass(frozen=True)
class MultiQueryAssociativeRecall(_Retrieval):
  """MQAR (Arora et al. 2023, "Zoology"): recall the value bound to each queried key.

  For ``n`` key-value pairs: ``k_1 v_1 ... k_n v_n`` with distinct keys drawn from ``[0, num_keys)`` and values
  from ``[num_keys, num_keys + num_values)``, then the same n keys in a random order, each followed by its value.
  The values after the queries are scored (n per example). ``sequence_length(n) = 4n``. Length generalization:
  train with few pairs, test with more (the context and the distance between a pair and its query grow).
  Differences from Zoology's generator: queries follow the pairs back to back (Zoology scatters them with
  power-law gaps among zero tokens), and every key is queried once.
  """

  name = 'mqar'
  reference = 'Arora et al. 2023, Zoology (multi-query associative recall)'
  num_keys: int = 512
  num_values: int = 512

  def __post_init__(self):
    validation.positive_int('task', 'num_keys', self.num_keys)
    validation.positive_int('task', 'num_values', self.num_values)

  @property
  def vocab_size(self) -> int:
    return self.num_keys + self.num_values + 1

  @property
  def pad_id(self) -> int:
    return self.num_keys + self.num_values

  def output_length(self, n: int) -> int:
    return n

  def sequence_length(self, n: int) -> int:
    return 4 * n

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    batch_size, n = self._check_args(rng, batch_size, length)
    if n > self.num_keys:
      raise ValueError(f'mqar with length={n} pairs needs at least {n} distinct keys; num_keys={self.num_keys}')
    keys = np.argsort(rng.random((batch_size, self.num_keys)), axis=1)[:, :n].astype(np.int32)
    values = (self.num_keys + rng.integers(0, self.num_values, size=(batch_size, n))).astype(np.int32)
    order = np.argsort(rng.random((batch_size, n)), axis=1)
    seq = np.empty((batch_size, 4 * n), np.int32)
    seq[:, 0 : 2 * n : 2], seq[:, 1 : 2 * n : 2] = keys, values
    seq[:, 2 * n :: 2] = np.take_along_axis(keys, order, axis=1)
    seq[:, 2 * n + 1 :: 2] = np.take_along_axis(values, order, axis=1)
    scored = np.zeros_like(seq, dtype=bool)
    scored[:, 2 * n + 1 :: 2] = True
    return self._teacher_forcing(seq, scored)


PASSKEY_PREFIX = (
    'There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. '
    'I will quiz you about the important information there.'
)
PASSKEY_FILLER = ' The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.'
PASSKEY_NEEDLE = ' The pass key is {key}. Remember it. {key} is the pass key.'
PASSKEY_QUESTION = ' What is the pass key? The pass key is '


@dataclasses.dataclass(frozen=True)
class Passkey(_Retrieval):
  """Passkey retrieval, byte level, with the template of LongLM / Self-Extend (Jin et al. 2024) and Landmark
  Attention (Mohtashami & Jaggi 2023).

  ``prefix + filler * a + needle + filler * (n - a) + question + key``: ``n`` filler sentences (the length
  axis), the needle after ``a ~ U{0..n}`` of them (a uniform depth), a random ``digits``-digit key. The key's
  digits after the question are scored. Bytes are token ids (``vocab_size = 257``: 256 bytes and pad).
  """

  name = 'passkey'
  reference = 'Mohtashami & Jaggi 2023 (Landmark Attention); Jin et al. 2024 (LongLM / Self-Extend)'
  digits: int = 5

  vocab_size: ClassVar[int] = 257
  pad_id: ClassVar[int] = 256

  def __post_init__(self):
    validation.positive_int('task', 'digits', self.digits)

  def output_length(self, n: int) -> int:
    return self.digits

  def sequence_length(self, n: int) -> int:
    needle = len(PASSKEY_NEEDLE.format(key='0' * self.digits))
    return len(PASSKEY_PREFIX) + n * len(PASSKEY_FILLER) + needle + len(PASSKEY_QUESTION) + self.digits

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    batch_size, n = self._check_args(rng, batch_size, length)
    seq = np.empty((batch_size, self.sequence_length(n)), np.int32)
    for row in range(batch_size):
      key = ''.join(str(d) for d in rng.integers(0, 10, size=self.digits))
      depth = int(rng.integers(0, n + 1))
      text = (
          PASSKEY_PREFIX
          + PASSKEY_FILLER * depth
          + PASSKEY_NEEDLE.format(key=key)
          + PASSKEY_FILLER * (n - depth)
          + PASSKEY_QUESTION
          + key
      )
      seq[row] = np.frombuffer(text.encode('ascii'), np.uint8)
    scored = np.zeros_like(seq, dtype=bool)
    scored[:, -self.digits :] = True
    return self._teacher_forcing(seq, scored)


@dataclasses.dataclass(frozen=True)
class PasskeyTokens(Passkey):
  """Passkey retrieval at token level: ``passkey``'s template with one token per sentence, so that its length
  axis fits a CPU (the byte-level template spends 341-431 tokens on 1-2 filler sentences).

  Tokens: the digits 0-9; the five filler sentences of the template (``The grass is green.`` ... ``There and
  back again.``, ids 10-14, always in that order, as the byte template repeats them); ``PREFIX`` (15), the
  needle's ``The pass key is`` (16), ``Remember it.`` (17), ``is the pass key.`` (18), the question (19) and
  pad (20). For ``n`` filler units, the needle after ``a ~ U{0..n}`` of them (a uniform depth)::

      PREFIX  F0..F4 x a  KEY_IS k  REMEMBER k  IS_KEY  F0..F4 x (n - a)  QUESTION  k

  with k the ``digits`` key digits; the last k is scored. ``sequence_length(n) = 5n + 3 digits + 5``.
  Deviation from the byte template, on purpose: a sentence is one token, so the distance between the needle
  and the question is measured in sentences, and no tokenizer's subword statistics are involved.
  """

  name = 'passkey_tokens'
  reference = 'Mohtashami & Jaggi 2023 (Landmark Attention): the passkey template, one token per sentence'

  FILLER_IDS: ClassVar[tuple[int, ...]] = (10, 11, 12, 13, 14)
  PREFIX_ID: ClassVar[int] = 15
  KEY_IS_ID: ClassVar[int] = 16
  REMEMBER_ID: ClassVar[int] = 17
  IS_KEY_ID: ClassVar[int] = 18
  QUESTION_ID: ClassVar[int] = 19
  vocab_size: ClassVar[int] = 21
  pad_id: ClassVar[int] = 20

  def sequence_length(self, n: int) -> int:
    return len(self.FILLER_IDS) * n + 3 * self.digits + 5

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    batch_size, n = self._check_args(rng, batch_size, length)
    filler = list(self.FILLER_IDS)
    seq = np.empty((batch_size, self.sequence_length(n)), np.int32)
    for row in range(batch_size):
      key = rng.integers(0, 10, size=self.digits).tolist()
      depth = int(rng.integers(0, n + 1))
      needle = [self.KEY_IS_ID, *key, self.REMEMBER_ID, *key, self.IS_KEY_ID]
      seq[row] = [self.PREFIX_ID, *filler * depth, *needle, *filler * (n - depth), self.QUESTION_ID, *key]
    scored = np.zeros_like(seq, dtype=bool)
    scored[:, -self.digits :] = True
    return self._teacher_forcing(seq, scored)
