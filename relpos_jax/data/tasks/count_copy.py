"""``count_copy``: tok1^n -> tok2^n for DECODER-only (causal LM) models (Kazemnejad et al. 2023).

Kazemnejad et al.'s "Copy (repeat)" variant asks a decoder to rewrite ``n`` copies of one symbol as ``n``
copies of another (their prompt reads "Replace 6 with > in 6 6 6 [SEP] > > >"), i.e. the model must
*count* the prompt tokens and stop after emitting the same number. Here it is a synthetic token task:

Token ids (``k = num_symbols``, default 16): source symbols ``0 .. k-1``, target symbols ``k .. 2k-1``
(source ``s`` maps to target ``k + s``), ``bos_id = 2k``, ``sep_id = 2k + 1``, ``eos_id = 2k + 2``,
``pad_id = 2k + 3``; ``vocab_size = 2k + 4``. With ``k = 1``: a=0, b=1, BOS=2, SEP=3, EOS=4, PAD=5.

Distinct sequences: one per symbol, so ``k`` per length. Kazemnejad et al. draw the repeated word from their
model's vocabulary (appendix D.1, Copy, first variant: "the input tokens are the same, so the model basically
counts the number of input tokens"), so an evaluation set holds many distinct prompts of each length, and a
model cannot pass by memorizing one answer per length. The default, 16 symbols (the selective_copy and Mamba
alphabet), gives 16 distinct sequences per length, each drawn uniformly. ``num_symbols=1`` is the task as the
committed docs/suite_contextual ran it (its results record ``params: {'num_symbols': 1}``): one sequence per
length, every example of a batch identical, so its exact match per seed is 0 or 1 at each length.

Sequence for count ``n`` (one source symbol ``s`` per example, uniform over the k symbols)::

    BOS  s s ... s  SEP  t t ... t  EOS          (t = k + s; n copies each; 2n + 3 tokens)
    |---- prompt: n + 2 tokens ---| |- answer: n + 1 tokens -|

``sample`` returns teacher-forcing arrays of length ``T = total_length(n) = 2n + 2``:
``inputs = seq[:-1]``, ``targets = seq[1:]`` (next token), and ``loss_mask`` = ``accuracy_mask`` = 1 at
positions ``n + 1 .. 2n + 1`` -- exactly the ``n + 1`` positions whose target is an answer token (the n
``t`` and the EOS); the prompt is never scored. Evaluate with ``sequence_exact_match``: an example is
right only if ALL its answer tokens are right (teacher-forced argmax, or a greedy generation of
``output_length(n) = n + 1`` tokens after the ``prompt_length(n) = n + 2`` prompt tokens, compared with
``targets[:, n + 1:]``). The symbol is drawn per example; ``n`` per batch (see ``relpos_jax.data.buckets``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, CausalTask


@dataclasses.dataclass(frozen=True)
class CountCopy(CausalTask):
  """Decoder task ``BOS s^n SEP t^n EOS``; see module docstring for the exact format."""

  name = 'count_copy'
  reference = 'Kazemnejad et al. 2023 (copy/repeat variant)'
  num_symbols: int = 16

  def __post_init__(self):
    validation.positive_int('task', 'num_symbols', self.num_symbols)

  @property
  def bos_id(self) -> int:
    return 2 * self.num_symbols

  @property
  def sep_id(self) -> int:
    return 2 * self.num_symbols + 1

  @property
  def eos_id(self) -> int:
    return 2 * self.num_symbols + 2

  @property
  def pad_id(self) -> int:
    return 2 * self.num_symbols + 3

  @property
  def vocab_size(self) -> int:
    return 2 * self.num_symbols + 4

  def prompt_length(self, n: int) -> int:
    return n + 2

  def output_length(self, n: int) -> int:
    return n + 1

  def total_length(self, n: int) -> int:
    return 2 * n + 2

  @property
  def metadata(self) -> dict:
    return {**super().metadata, 'bos_id': self.bos_id, 'sep_id': self.sep_id, 'eos_id': self.eos_id}

  def sequences(self, rng: np.random.Generator, batch_size: int, length: int) -> np.ndarray:
    """Full sequences (B, 2n + 3): ``BOS s^n SEP t^n EOS``."""
    batch_size, n = self._check_args(rng, batch_size, length)
    k = self.num_symbols
    s = rng.integers(0, k, size=(batch_size, 1), dtype=np.int32) if k > 1 else np.zeros((batch_size, 1), np.int32)
    seq = np.empty((batch_size, 2 * n + 3), np.int32)
    seq[:, 0] = self.bos_id
    seq[:, 1 : n + 1] = s
    seq[:, n + 1] = self.sep_id
    seq[:, n + 2 : 2 * n + 2] = s + k
    seq[:, 2 * n + 2] = self.eos_id
    return seq

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    seq = self.sequences(rng, batch_size, length)
    n = int(length)
    t = self.total_length(n)
    mask = np.zeros((seq.shape[0], t), np.float32)
    mask[:, n + 1 :] = 1.0
    return {'inputs': seq[:, :-1].copy(), 'targets': seq[:, 1:].copy(), 'loss_mask': mask, 'accuracy_mask': mask.copy()}
