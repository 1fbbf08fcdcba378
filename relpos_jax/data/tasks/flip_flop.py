"""``flip_flop``: flip-flop language modelling (Liu, Ash, Goel, Krishnamurthy & Zhang 2023, "Exposing Attention
Glitches with Flip-Flop Language Modeling"), a causal task.

A sequence is instruction-bit pairs ``(c_t, b_t)``, ``c_t`` in {w, r, i} (write, read, ignore) and ``b_t`` in
{0, 1}: an opening write, then ``n`` more pairs (the length axis) of which the last is a read. Between the
opening write and the closing read each instruction is drawn independently
with probabilities ``p_w = p_r = (1 - p_i) / 2`` and ``p_i``. Write and ignore bits are uniform; a read bit
equals the bit of the most recent write (the "flip-flop" memory). The paper's distributions: training
``p_i = 0.8`` (FFL(0.8)), out-of-distribution sparse ``p_i = 0.98`` and dense ``p_i = 0.1`` test sets; its
sequences have ``T = 512`` tokens (256 pairs). Here the sequence length is an axis too: train with ``n`` pairs,
test with 4n and beyond (``n`` pairs after the opening write: ``2n + 2`` tokens).

Token ids: w=0, r=1, i=2, bit 0 = 3, bit 1 = 4, pad = 5 (``vocab_size = 6``). ``sample`` returns teacher-forcing
arrays of length ``2n + 1`` (``inputs = seq[:-1]``, ``targets = seq[1:]``); ``loss_mask`` = ``accuracy_mask`` = 1
exactly at the positions whose target is a read bit: the only deterministic tokens, whose error the paper
reports (its models are trained on the full next-token loss; ``loss_on_all_tokens=True`` does that here).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, CausalTask

WRITE, READ, IGNORE, BIT0, BIT1, PAD = range(6)


@dataclasses.dataclass(frozen=True)
class FlipFlop(CausalTask):
  """Read bits must equal the last written bit; see the module docstring for the exact format."""

  name = 'flip_flop'
  reference = 'Liu et al. 2023, Exposing Attention Glitches with Flip-Flop Language Modeling'
  p_ignore: float = 0.8
  loss_on_all_tokens: bool = False

  vocab_size: ClassVar[int] = 6

  def __post_init__(self):
    validation.require(
        isinstance(self.p_ignore, (int, float)) and not isinstance(self.p_ignore, bool) and 0.0 <= self.p_ignore < 1.0,
        'task',
        'p_ignore',
        self.p_ignore,
        'a probability in [0, 1)',
    )
    validation.boolean('task', 'loss_on_all_tokens', self.loss_on_all_tokens)

  @property
  def pad_id(self) -> int:
    return PAD

  def output_length(self, n: int) -> int:
    """At most ``n`` read bits are scored (their number varies per example; ``accuracy_mask`` marks them)."""
    return n

  def total_length(self, n: int) -> int:
    return 2 * n + 1

  def expected_reads(self, n: int) -> float:
    """The mean number of read bits (scored tokens) of an example of ``n`` pairs: the closing read, plus the
    ``n - 1`` drawn instructions between it and the opening write, each a read with probability
    ``(1 - p_ignore) / 2``. At 32 pairs: 1.31 for FFL(0.98), 14.95 for FFL(0.1), 4.1 for FFL(0.8)."""
    n = validation.positive_int('task', 'length', n)
    return 1.0 + (n - 1) * (1.0 - self.p_ignore) / 2

  def sequences(self, rng: np.random.Generator, batch_size: int, length: int) -> np.ndarray:
    """Full sequences (B, 2n + 2): ``w b_0 c_1 b_1 ... c_n b_n`` with ``c_n = r``."""
    batch_size, n = self._check_args(rng, batch_size, length)
    n += 1  # the opening write
    p_other = (1.0 - self.p_ignore) / 2
    ops = rng.choice(3, size=(batch_size, n), p=[p_other, p_other, self.p_ignore]).astype(np.int32)
    ops[:, 0], ops[:, -1] = WRITE, READ
    bits = rng.integers(0, 2, size=(batch_size, n), dtype=np.int32)
    # The last write at or before each step: a running max of write indices (the first step is a write).
    write_index = np.maximum.accumulate(np.where(ops == WRITE, np.arange(n)[None, :], 0), axis=1)
    remembered = np.take_along_axis(bits, write_index, axis=1)
    bits = np.where(ops == READ, remembered, bits)
    seq = np.empty((batch_size, 2 * n), np.int32)
    seq[:, 0::2], seq[:, 1::2] = ops, BIT0 + bits
    return seq

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    seq = self.sequences(rng, batch_size, length)
    reads = np.zeros(seq[:, 1:].shape, np.float32)
    reads[:, 0::2] = seq[:, :-1:2] == READ  # target position 2t is the bit after instruction t
    loss = np.ones_like(reads) if self.loss_on_all_tokens else reads.copy()
    return {'inputs': seq[:, :-1].copy(), 'targets': seq[:, 1:].copy(), 'loss_mask': loss, 'accuracy_mask': reads}
