"""``selective_copy``: copy the content tokens of a context in order, skipping the blanks between them.

Gu & Dao 2023 (Mamba) made the copying task selective: the tokens to copy sit at random places
among blanks, so no fixed offset finds them and a model must select by content. Golovneva et al. 2024
(CoPE) use it to test position from content: a token's place in the answer is its count among
the non-blank tokens before it, which CoPE's gates can count and a token index cannot. Their splits (as
their results are labelled) vary the blanks around a fixed number of tokens to copy: in distribution 128
blanks with 128 tokens, "dense" 64 blanks and "sparse" 256.

Here the length axis ``n`` is the number of blanks and ``num_copy`` tokens are copied (16 by default: the
paper's 128 / 128 scaled by 1/8 for a CPU, so a protocol training at n = 16 has the paper's dense and sparse
splits at n = 8 and n = 32). Token ids (``k = num_symbols``): content ``0 .. k-1``, ``blank_id = k``,
``sep_id = k + 1``, ``pad_id = k + 2``; ``vocab_size = k + 3``. Sequence (``m = num_copy``)::

    x_1 .. x_{m+n}  SEP  c_1 .. c_m          (2m + n + 1 tokens)

where ``m`` of the ``m + n`` context slots, chosen uniformly, hold ``c_1 .. c_m`` (each uniform over the k
symbols) in order and the rest are blanks. Teacher forcing as ``count_copy``: ``inputs = seq[:-1]``,
``targets = seq[1:]``, and the ``m`` answer tokens are scored (``loss_mask`` = ``accuracy_mask``); exact
match per example is reported beside per-token accuracy. 16 content symbols and 16 tokens to copy follow
Mamba's setting; CoPE's vocabulary and model sizes were not available here, so the scale is this file's.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, CausalTask


@dataclasses.dataclass(frozen=True)
class SelectiveCopy(CausalTask):
  """``num_copy`` content tokens among ``n`` blanks, then SEP and the content tokens in order."""

  name = 'selective_copy'
  reference = 'Gu & Dao 2023 (Mamba, selective copying); Golovneva et al. 2024 (CoPE)'
  num_symbols: int = 16
  num_copy: int = 16

  def __post_init__(self):
    validation.positive_int('task', 'num_symbols', self.num_symbols)
    validation.positive_int('task', 'num_copy', self.num_copy)

  @property
  def blank_id(self) -> int:
    return self.num_symbols

  @property
  def sep_id(self) -> int:
    return self.num_symbols + 1

  @property
  def pad_id(self) -> int:
    return self.num_symbols + 2

  @property
  def vocab_size(self) -> int:
    return self.num_symbols + 3

  def output_length(self, n: int) -> int:
    return self.num_copy

  def total_length(self, n: int) -> int:
    return 2 * self.num_copy + n

  @property
  def metadata(self) -> dict:
    return {**super().metadata, 'blank_id': self.blank_id, 'sep_id': self.sep_id}

  def sequences(self, rng: np.random.Generator, batch_size: int, length: int) -> np.ndarray:
    """Full sequences (B, 2m + n + 1), ``m = num_copy`` content tokens among ``n = length`` blanks."""
    batch_size, n = self._check_args(rng, batch_size, length)
    m = self.num_copy
    content = rng.integers(0, self.num_symbols, size=(batch_size, m), dtype=np.int32)
    # The content slots: the m smallest of m + n uniform keys per row, a uniform m-subset, in order.
    slots = np.sort(np.argsort(rng.random((batch_size, m + n)), axis=1)[:, :m], axis=1)
    context = np.full((batch_size, m + n), self.blank_id, np.int32)
    np.put_along_axis(context, slots, content, axis=1)
    sep = np.full((batch_size, 1), self.sep_id, np.int32)
    return np.concatenate([context, sep, content], axis=1)

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    seq = self.sequences(rng, batch_size, length)
    n, m = int(length), self.num_copy
    mask = np.zeros((seq.shape[0], self.total_length(n)), np.float32)
    mask[:, m + n :] = 1.0  # the targets after SEP's position: c_1 .. c_m
    return {'inputs': seq[:, :-1].copy(), 'targets': seq[:, 1:].copy(), 'loss_mask': mask, 'accuracy_mask': mask.copy()}
