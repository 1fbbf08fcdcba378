"""Regular-language classification tasks of Delétang et al. 2023 (reused by Ruoss et al. 2023).

Both take binary strings (input alphabet {0, 1}), have one output position (``output_length(n) == 1``)
and two classes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from relpos_jax.data.tasks.base import BidirectionalTask

_REF = 'Deletang et al. 2023, tasks/regular; Ruoss et al. 2023'


@dataclasses.dataclass(frozen=True)
class _BinaryClassification(BidirectionalTask):
  """Binary strings in, one of two classes out."""

  @property
  def input_alphabet_size(self) -> int:
    return 2

  @property
  def num_classes(self) -> int:
    return 2


@dataclasses.dataclass(frozen=True)
class EvenPairs(_BinaryClassification):
  """Class 1 iff the number of unequal adjacent pairs ('01' or '10') is odd, else 0.

  Examples (from the reference): 001110 -> one '01', one '10' -> 0;  0101001 -> 2 + 3 -> 1.
  A length-1 string has no pairs -> 0. (Equivalently: 1 iff first symbol != last symbol.)
  """

  name = 'even_pairs'
  reference = _REF

  def _generate(self, rng, batch_size, n):
    x = rng.integers(0, 2, size=(batch_size, n), dtype=np.int32)
    y = (np.sum(x[:, 1:] != x[:, :-1], axis=1) % 2).astype(np.int32)[:, None]
    return x, y, None


@dataclasses.dataclass(frozen=True)
class ParityCheck(_BinaryClassification):
  """Class = (number of 1s) mod 2.  Examples: 1010100 -> 1;  01111 -> 0."""

  name = 'parity_check'
  reference = _REF

  def _generate(self, rng, batch_size, n):
    x = rng.integers(0, 2, size=(batch_size, n), dtype=np.int32)
    y = (np.sum(x, axis=1) % 2).astype(np.int32)[:, None]
    return x, y, None
