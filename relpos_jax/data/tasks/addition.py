"""Decimal addition with task-structured positions, for causal models: ``addition``, ``addition_coupled``,
``addition_abacus``.

Sequence for ``n``-digit operands (the length axis; both zero-padded to n digits, most significant first)::

    a_{n-1} .. a_0  +  b_{n-1} .. b_0  =  c_0 c_1 .. c_n          (3n + 3 tokens)

The sum is written least significant digit first and zero-padded to ``n + 1`` digits, the layout with which
Cho et al. 2024 (position coupling) and McLeish et al. 2024 (Abacus) reach length generalization ("reversed
output"). Token ids: digits 0..9, ``+`` = 10, ``=`` = 11, pad = 12. Teacher forcing as ``count_copy``:
``inputs = seq[:-1]``, ``targets = seq[1:]``, and the ``n + 1`` answer digits are scored (``loss_mask`` =
``accuracy_mask``; exact match per example is the papers' metric).

The three tasks differ only in the positions they hand the model (``batch['positions']``, used in place of
0..T-1 by every encoder, at training and evaluation alike):

* ``addition``: none (0..T-1): the baseline.
* ``addition_coupled`` (Cho et al. 2024, reference HanseulJo/position-coupling ``AdditionDatasetWithCoupled
  Positions`` with padding and reversed output): digits of equal significance share one position id. With a
  random start ``s ~ U{1 .. max_position - (n + 1)}`` per example: ``+`` and ``=`` get ``s``, the digit of
  significance k (in a, b and c) gets ``s + 1 + k``.
* ``addition_abacus`` (McLeish et al. 2024, Abacus embeddings): each digit's index within its number counted
  from the least significant digit, ``1 + k``, plus one random offset ``o ~ U{0 .. max_offset}`` per example;
  ``+`` and ``=`` get 0.

``addition_coupled``'s positions lie in ``[1, max_position]`` (as the reference's) and need
``max_position >= n + 2`` (checked when sampling); ``addition_abacus``'s in ``[0, max_offset + n + 1]``.

``addition_abacus`` with ``as_input=True`` is Abacus as McLeish et al. embed it (reference
mcleish7/arithmetic ``abacus.py``): the indices go to a learned absolute input embedding alone
(``batch['input_positions']``; the encoder needs an absolute part, e.g. ``learned(max_length=64) + fire``),
while attention sees 0..T-1 through its own encoding (NoPE, FIRE, RoPE: the paper's pairings), and
evaluation draws no offset (the reference's ``k = 0`` outside training). Deviation: the reference draws one
offset per batch, this task one per example. With ``as_input=False`` (the default, the suite's committed
runs) the indices replace the positions of every encoder, attention's included.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, CausalTask

PLUS, EQUALS, PAD = 10, 11, 12


@dataclasses.dataclass(frozen=True)
class Addition(CausalTask):
  """``a + b = reversed(a + b)`` on n-digit operands; positions 0..T-1 (see the module docstring)."""

  name = 'addition'
  reference = 'Cho et al. 2024 (position coupling); McLeish et al. 2024 (Abacus): the reversed-output layout'

  vocab_size: ClassVar[int] = 13

  @property
  def pad_id(self) -> int:
    return PAD

  def output_length(self, n: int) -> int:
    return n + 1

  def total_length(self, n: int) -> int:
    return 3 * n + 2

  def sequences(self, rng: np.random.Generator, batch_size: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(sequences (B, 3n + 3), the significance of each token: k for a digit of weight 10^k, -1 for + and =)."""
    batch_size, n = self._check_args(rng, batch_size, length)
    a = rng.integers(0, 10, size=(batch_size, n))  # most significant digit first
    b = rng.integers(0, 10, size=(batch_size, n))
    total = np.zeros((batch_size, n + 1), np.int64)  # least significant digit first
    carry = np.zeros(batch_size, np.int64)
    for k in range(n):
      s = a[:, n - 1 - k] + b[:, n - 1 - k] + carry
      total[:, k], carry = s % 10, s // 10
    total[:, n] = carry
    seq = np.concatenate(
        [a, np.full((batch_size, 1), PLUS), b, np.full((batch_size, 1), EQUALS), total], axis=1
    ).astype(np.int32)
    operand = np.arange(n - 1, -1, -1)
    significance = np.concatenate([operand, [-1], operand, [-1], np.arange(n + 1)])
    return seq, np.broadcast_to(significance, seq.shape)

  def positions(self, rng: np.random.Generator, significance: np.ndarray) -> np.ndarray | None:
    return None

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    seq, significance = self.sequences(rng, batch_size, length)
    n = int(length)
    mask = np.zeros((seq.shape[0], seq.shape[1] - 1), np.float32)
    mask[:, 2 * n + 1 :] = 1.0
    batch = {
        'inputs': seq[:, :-1].copy(),
        'targets': seq[:, 1:].copy(),
        'loss_mask': mask,
        'accuracy_mask': mask.copy(),
    }
    positions = self.positions(rng, significance)
    if positions is not None:
      batch[self.positions_key] = positions[:, :-1].astype(np.int32)
    return batch

  @property
  def positions_key(self) -> str:
    """The batch key of the task's positions: 'positions' (every encoder's) or 'input_positions'."""
    return 'positions'


@dataclasses.dataclass(frozen=True)
class AdditionCoupled(Addition):
  """Position coupling (Cho et al. 2024): equal significance, equal position id, from a random start."""

  name = 'addition_coupled'
  reference = 'Cho et al. 2024, Position Coupling (HanseulJo/position-coupling)'
  max_position: int = 1024

  def __post_init__(self):
    # int32 positions: a larger bound wrapped to negative ids and trained without a word.
    validation.positive_int('task', 'max_position', self.max_position, maximum=validation.MAX_POSITION)

  def max_given_position(self, n: int) -> int | None:
    return self.max_position  # start <= max_position - n - 1, plus significance + 1 <= n + 1

  def positions(self, rng, significance):
    n = significance.shape[1] // 3 - 1
    if self.max_position < n + 2:
      raise ValueError(
          f'addition_coupled with {n}-digit operands needs max_position >= {n + 2} (the sum has '
          f'{n + 1} digits after the start position), got max_position={self.max_position}'
      )
    start = rng.integers(1, self.max_position - n, size=(significance.shape[0], 1))
    return start + np.where(significance < 0, 0, significance + 1)


@dataclasses.dataclass(frozen=True)
class AdditionAbacus(Addition):
  """Abacus positions (McLeish et al. 2024): a digit's index in its number, plus a random offset; 0 elsewhere."""

  name = 'addition_abacus'
  reference = 'McLeish et al. 2024, Transformers Can Do Arithmetic with the Right Embeddings (Abacus)'
  max_offset: int = 100
  as_input: bool = False

  def __post_init__(self):
    # int32 positions: max_offset=3e9 wrapped to negative ids and trained without a word.
    validation.positive_int('task', 'max_offset', self.max_offset, minimum=0, maximum=validation.MAX_POSITION)
    validation.require(
        isinstance(self.as_input, bool),
        'task',
        'as_input',
        self.as_input,
        'True (McLeish et al.: a learned input embedding) or False (the positions of every encoder)',
    )

  @property
  def positions_key(self) -> str:
    return 'input_positions' if self.as_input else 'positions'

  def for_evaluation(self) -> AdditionAbacus:
    return dataclasses.replace(self, max_offset=0) if self.as_input else self

  def max_input_position(self, n: int) -> int | None:
    return self.max_offset + n + 1 if self.as_input else None

  def max_given_position(self, n: int) -> int | None:
    return None if self.as_input else self.max_offset + n + 1

  def positions(self, rng, significance):
    offset = rng.integers(0, self.max_offset + 1, size=(significance.shape[0], 1))
    return np.where(significance < 0, 0, offset + significance + 1)
