"""String-transduction tasks: reverse_string, duplicate_string, odds_first, bucket_sort, shift, missing_duplicate.

All inputs are i.i.d. uniform symbols of ``[0, alphabet_size)`` (binary by default, as in the papers;
``bucket_sort`` uses 5 symbols, as in the reference code) except ``missing_duplicate``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import BidirectionalTask

_REF = 'Deletang et al. 2023; Ruoss et al. 2023'


@dataclasses.dataclass(frozen=True)
class _Transduction(BidirectionalTask):
  alphabet_size: int = 2

  def __post_init__(self):
    validation.positive_int('task', 'alphabet_size', self.alphabet_size)

  @property
  def input_alphabet_size(self) -> int:
    return self.alphabet_size

  @property
  def num_classes(self) -> int:
    return self.alphabet_size

  def _strings(self, rng, batch_size, n):
    return rng.integers(0, self.alphabet_size, size=(batch_size, n), dtype=np.int32)


@dataclasses.dataclass(frozen=True)
class ReverseString(_Transduction):
  """Output ``s_n .. s_1``; ``output_length(n) = n``. Example: 011010 -> 010110."""

  name = 'reverse_string'
  reference = _REF + ' (tasks/dcf/reverse_string.py)'

  def output_length(self, n):
    return n

  def _generate(self, rng, batch_size, n):
    x = self._strings(rng, batch_size, n)
    return x, x[:, ::-1].copy(), None


@dataclasses.dataclass(frozen=True)
class DuplicateString(_Transduction):
  """Output ``s s`` (no separator); ``output_length(n) = 2n``. Example: 101 -> 101101."""

  name = 'duplicate_string'
  reference = _REF + ' (tasks/cs/duplicate_string.py)'

  def output_length(self, n):
    return 2 * n

  def _generate(self, rng, batch_size, n):
    x = self._strings(rng, batch_size, n)
    return x, np.concatenate([x, x], axis=1), None


@dataclasses.dataclass(frozen=True)
class OddsFirst(_Transduction):
  """Output the symbols at odd (0-based) indices, then those at even indices; ``output_length(n) = n``.

  Follows the reference's code, ``concatenate([s[1::2], s[::2]])``: 00110101 -> 0111 0100 (its docstring
  shows the two halves the other way round; the code is what the paper's numbers come from).
  """

  name = 'odds_first'
  reference = _REF + ' (tasks/cs/odds_first.py)'

  def output_length(self, n):
    return n

  def _generate(self, rng, batch_size, n):
    x = self._strings(rng, batch_size, n)
    return x, np.concatenate([x[:, 1::2], x[:, ::2]], axis=1), None


@dataclasses.dataclass(frozen=True)
class BucketSort(_Transduction):
  """Output the input sorted increasingly; ``output_length(n) = n``; 5 symbols by default.

  Example: 10204112 -> 00111224.
  """

  name = 'bucket_sort'
  reference = _REF + ' (tasks/cs/bucket_sort.py)'
  alphabet_size: int = 5

  def output_length(self, n):
    return n

  def _generate(self, rng, batch_size, n):
    x = self._strings(rng, batch_size, n)
    return x, np.sort(x, axis=1), None


@dataclasses.dataclass(frozen=True)
class Shift(_Transduction):
  """Fixed-offset cyclic copy (defined here, not in the papers).

  Output ``y_i = x_{(i + offset) mod n}`` for ``i = 0 .. n-1``: the input rotated LEFT by ``offset``
  (``np.roll(x, -offset)``); ``output_length(n) = n``. Example (offset 1): 0011 -> 0110.
  ``offset = 0`` is plain copy. For ``n <= offset`` the offset wraps (it is taken mod n).
  Every output symbol is a single input symbol, so this isolates "fetch the token a fixed relative
  distance away" (from output slot ``n + i`` the source sits at relative position ``offset - n``, or
  ``offset - 2n`` after wrapping).
  """

  name = 'shift'
  reference = 'relpos_jax (fixed-offset copy)'
  offset: int = 1

  def __post_init__(self):
    super().__post_init__()
    if isinstance(self.offset, bool) or not isinstance(self.offset, (int, np.integer)) or self.offset < 0:
      raise ValueError(f'offset must be a non-negative int, got offset={self.offset!r}')

  def output_length(self, n):
    return n

  def _generate(self, rng, batch_size, n):
    x = self._strings(rng, batch_size, n)
    return x, np.roll(x, -(self.offset % n), axis=1), None


@dataclasses.dataclass(frozen=True)
class MissingDuplicate(BidirectionalTask):
  """Predict the one masked symbol of a duplicated binary string (Ruoss et al. 2023).

  Input (length n >= 2): ``w w`` with ``|w| = n // 2``, ``w`` uniform binary, one position (uniform over the
  ``2 * (n // 2)`` positions) replaced by the mask token 2; if ``n`` is odd a single empty token 3 is
  appended. Output: the masked bit (one position, 2 classes). ``n == 1`` is degenerate exactly as in the
  reference: input ``[1]``, output 1. Input alphabet {0, 1, 2, 3}.
  Examples (reference): 01100210 -> 1;  1011213 -> 0.

  SHORTCUT (``has_shortcut = True``): every bit of ``w`` occurs twice in ``w w``, so the number of 1s in
  ``w w`` is even and the masked bit equals the parity (XOR) of all the visible 0/1 bits. The task is thus
  solved exactly by ``parity_check`` on the input (ignoring tokens 2 and 3), with no need to match
  positions ``i`` and ``i + n // 2``. Accuracy on it is NOT evidence that a position encoding lets a model
  find the duplicate.
  """

  name = 'missing_duplicate'
  reference = 'Ruoss et al. 2023 (tasks/cs/missing_duplicate_string.py)'
  has_shortcut = True
  shortcut_reason = (
      'the masked bit equals the XOR of all visible 0/1 input bits (each bit of w appears '
      'twice in ww, so ww has an even number of 1s): solvable by parity without locating '
      'the duplicate position; do not use as evidence of positional generalization'
  )

  input_alphabet_size: ClassVar[int] = 4
  num_classes: ClassVar[int] = 2

  def _generate(self, rng, batch_size, n):
    if n == 1:
      return np.ones((batch_size, 1), np.int32), np.ones((batch_size, 1), np.int32), None
    h = n // 2
    w = rng.integers(0, 2, size=(batch_size, h), dtype=np.int32)
    ww = np.concatenate([w, w], axis=1)
    idx = rng.integers(0, 2 * h, size=batch_size)
    rows = np.arange(batch_size)
    y = ww[rows, idx].copy()[:, None]
    ww[rows, idx] = 2
    if n % 2:
      ww = np.concatenate([ww, np.full((batch_size, 1), 3, np.int32)], axis=1)
    return ww, y, None
