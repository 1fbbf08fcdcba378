"""Regular-language classification tasks of Delétang et al. 2023 (reused by Ruoss et al. 2023).

Each has one output position (``output_length(n) == 1``): even_pairs and parity_check classify binary strings,
modular_arithmetic reduces an expression mod 5, cycle_navigation finds a state on a cycle of 5.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import BidirectionalTask

_REF = 'Deletang et al. 2023, tasks/regular; Ruoss et al. 2023'


@dataclasses.dataclass(frozen=True)
class _BinaryClassification(BidirectionalTask):
  """Binary strings in, one of two classes out."""

  input_alphabet_size: ClassVar[int] = 2
  num_classes: ClassVar[int] = 2


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


@dataclasses.dataclass(frozen=True)
class ModularArithmetic(BidirectionalTask):
  """The value mod ``modulus`` of an expression ``r_0 o_1 r_1 ... o_k r_k`` with ``*`` binding tighter.

  Reference: tasks/regular/modular_arithmetic.py. Residues ``r`` are uniform in ``[0, modulus)`` (ids
  ``0 .. modulus-1``), operators uniform over ``+ - *`` (ids ``modulus + 0, 1, 2``; the reference's blank
  ``_`` has id ``modulus + 3`` and is never drawn, so the input alphabet has ``modulus + 4`` symbols).
  Expressions have odd length: as in the reference, an even requested length ``n`` draws ``n - 1``
  symbols (``input_length``). Subtraction negates the next product term, so the value is the ordinary
  precedence-respecting evaluation: ``1 + 2 * 3 = 7 = 2 (mod 5)``, ``1 - 1 - 1 = -1 = 4``,
  ``0 * 1 + 4 * 3 - 2 = 10 = 0`` (the reference's examples).
  """

  name = 'modular_arithmetic'
  reference = 'Deletang et al. 2023 (tasks/regular/modular_arithmetic.py)'
  modulus: int = 5

  def __post_init__(self):
    validation.positive_int('task', 'modulus', self.modulus)

  @property
  def input_alphabet_size(self) -> int:
    return self.modulus + 4

  @property
  def num_classes(self) -> int:
    return self.modulus

  def input_length(self, n: int) -> int:
    return n if n % 2 else n - 1

  def _generate(self, rng, batch_size, n):
    m = self.modulus
    x = np.empty((batch_size, n), np.int32)
    x[:, ::2] = rng.integers(0, m, size=(batch_size, n // 2 + 1))
    x[:, 1::2] = m + rng.integers(0, 3, size=(batch_size, n // 2))
    return x, evaluate_modular_expressions(x, m)[:, None], None


def evaluate_modular_expressions(x: np.ndarray, modulus: int) -> np.ndarray:
  """(B,) values mod ``modulus`` of ``modular_arithmetic`` expressions (B, odd n), ``*`` before ``+``/``-``."""
  plus, minus = modulus, modulus + 1
  total = np.zeros(x.shape[0], np.int64)
  term = x[:, 0].astype(np.int64)  # the running product of the current additive term, signed
  for k in range(1, x.shape[1], 2):
    op, r = x[:, k], x[:, k + 1].astype(np.int64)
    new_term = (op == plus) | (op == minus)
    total = np.where(new_term, (total + term) % modulus, total)
    term = np.where(new_term, np.where(op == minus, -r, r), (term * r) % modulus)
  return ((total + term) % modulus).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class CycleNavigation(BidirectionalTask):
  """The final state on a cycle of 5 after moves ``stay / right / left``.

  Reference: tasks/regular/cycle_navigation.py. Input symbols ``0, 1, 2`` mean moves ``-1, 0, +1``
  (``symbol - 1``, the reference's encoding), uniform; the agent starts at state 0; output
  ``sum(symbol - 1) mod 5`` (5 classes). Example: moves ``+1 -1 0 -1 -1`` (symbols 2 0 1 0 0) -> ``-2 = 3``.
  """

  name = 'cycle_navigation'
  reference = 'Deletang et al. 2023 (tasks/regular/cycle_navigation.py)'
  cycle_length: int = 5

  input_alphabet_size: ClassVar[int] = 3

  def __post_init__(self):
    validation.positive_int('task', 'cycle_length', self.cycle_length)

  @property
  def num_classes(self) -> int:
    return self.cycle_length

  def _generate(self, rng, batch_size, n):
    x = rng.integers(0, 3, size=(batch_size, n), dtype=np.int32)
    y = (np.sum(x.astype(np.int64) - 1, axis=1) % self.cycle_length).astype(np.int32)[:, None]
    return x, y, None
