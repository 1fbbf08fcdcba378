"""Binary arithmetic tasks of Delétang et al. 2023 (tasks/cs; Ruoss et al. 2023): addition, multiplication, square root."""

from __future__ import annotations

import dataclasses
from typing import ClassVar
import math

import numpy as np

from relpos_jax.data.tasks.base import BidirectionalTask

PLUS = 2  # input token between the two numbers
TERMINATOR = 2  # output token after the last bit of the sum


@dataclasses.dataclass(frozen=True)
class BinaryAddition(BidirectionalTask):
  """Sum of two binary numbers, everything LITTLE-endian (least significant bit first), as in the reference.

  Input (length n): for ``n >= 3``, ``a + b`` where the lengths ``la ~ U{1..n-2}``, ``lb = n - 1 - la``,
  ``a ~ U[1, 2^la - 1]``, ``b ~ U[1, 2^lb - 1]``, each written with exactly ``la`` / ``lb`` bits (so
  high-order zeros appear at the END of a number), and ``+`` is token 2. Input alphabet {0, 1, 2}.
  Output (length ``n + 1``): ``a + b`` in little-endian without high-order zeros, then the termination
  token 2, then 0s up to length ``n + 1``. Output alphabet {0, 1, 2}.
  For ``n <= 2`` the reference samples one number ``v`` with ``np.random.randint(0, 2**n - 1)`` (so
  ``v in [0, 2^n - 2]``), the input is ``v`` in n bits (no ``+``) and the output is ``v`` itself
  (``0`` is written as the single bit 0); this is reproduced.

  Scoring: the loss covers all ``n + 1`` output positions (``loss_mask``), the accuracy only positions up
  to and including the terminator (``accuracy_mask``), as in the reference ``accuracy_mask``.
  Examples: 001+01101 (n = 9) -> 01011 2 0000 (4 + 22 = 26); 1001+000001 (n = 11) -> 100101 2 00000
  (the reference docstring shows one trailing 0 fewer; its code, followed here, pads to ``n + 1``).
  """

  name = 'binary_addition'
  reference = 'Deletang et al. 2023 (tasks/cs/binary_addition.py); Ruoss et al. 2023'

  input_alphabet_size: ClassVar[int] = 3
  num_classes: ClassVar[int] = 3

  def output_length(self, n):
    return n + 1

  def _generate(self, rng, batch_size, n):
    rows = np.arange(batch_size)
    pos = np.arange(n + 1)[None, :]
    if n <= 2:
      v = rng.integers(0, 2**n - 1, size=batch_size)
      x = ((v[:, None] >> np.arange(n)[None, :]) & 1).astype(np.int32)
      bits = np.zeros((batch_size, n + 1), np.int32)
      bits[:, :n] = x
      blen = np.array([max(1, int(t).bit_length()) for t in v], dtype=np.int64)  # 0 is written '0'
    else:
      la = rng.integers(1, n - 1, size=batch_size)
      lb = n - 1 - la
      a = _uniform_nonzero_bits(rng, la, n)
      b = _uniform_nonzero_bits(rng, lb, n)
      x = np.empty((batch_size, n), np.int32)
      in_a = np.arange(n)[None, :] < la[:, None]
      shifted_b = b[rows[:, None], np.clip(np.arange(n)[None, :] - la[:, None] - 1, 0, n - 1)]
      x[:] = np.where(in_a, a, shifted_b)
      x[rows, la] = PLUS
      bits = _add_little_endian(a, b)  # (B, n + 1)
      blen = n + 1 - np.argmax(bits[:, ::-1] == 1, axis=1)  # sum >= 2, so a 1 exists
    y = np.where(pos < blen[:, None], bits, np.where(pos == blen[:, None], TERMINATOR, 0)).astype(np.int32)
    acc = (pos <= blen[:, None]).astype(np.float32)
    return x, y, acc


def _uniform_nonzero_bits(rng: np.random.Generator, lengths: np.ndarray, width: int) -> np.ndarray:
  """(B, width) little-endian bits of numbers uniform in [1, 2^len - 1] (zeros beyond len), by rejection."""
  keep = np.arange(width)[None, :] < lengths[:, None]
  out = rng.integers(0, 2, size=(lengths.size, width), dtype=np.int32) * keep
  bad = ~out.any(axis=1)
  while bad.any():
    redo = np.flatnonzero(bad)
    out[redo] = rng.integers(0, 2, size=(redo.size, width), dtype=np.int32) * keep[redo]
    bad = ~out.any(axis=1)
  return out


def _add_little_endian(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Ripple-carry sum of little-endian bit arrays (B, w) -> (B, w + 1)."""
  bsz, w = a.shape
  out = np.zeros((bsz, w + 1), np.int32)
  carry = np.zeros(bsz, np.int32)
  for i in range(w):
    s = a[:, i] + b[:, i] + carry
    out[:, i] = s & 1
    carry = s >> 1
  out[:, w] = carry
  return out


@dataclasses.dataclass(frozen=True)
class BinaryMultiplication(BidirectionalTask):
  """Product of two binary numbers, little-endian, as ``binary_addition`` but with ``n`` output positions.

  Reference: tasks/cs/binary_multiplication.py. Input as in ``binary_addition`` (``a * b`` with the
  separator token 2; ``la ~ U{1..n-2}``, ``a ~ U[1, 2^la - 1]``). Output (length n): ``a * b`` little-endian
  without high-order zeros, the terminator 2, then 0s (the product has at most ``n - 1`` bits). Accuracy up to
  and including the terminator. For ``n <= 2`` the input is a number ``v in [0, 2^n - 2]`` in n bits and the
  output is ``n - 1`` zeros then the terminator (the reference's fixed filler).
  Examples (reference): ``001*01101 -> 000110120`` (4 * 22 = 88); ``1001*000001 -> 00000100120``.
  """

  name = 'binary_multiplication'
  reference = 'Deletang et al. 2023 (tasks/cs/binary_multiplication.py)'

  input_alphabet_size: ClassVar[int] = 3
  num_classes: ClassVar[int] = 3

  def output_length(self, n):
    return n

  def _generate(self, rng, batch_size, n):
    y = np.zeros((batch_size, n), np.int32)
    acc = np.zeros((batch_size, n), np.float32)
    if n <= 2:
      v = rng.integers(0, 2**n - 1, size=batch_size)
      x = ((v[:, None] >> np.arange(n)[None, :]) & 1).astype(np.int32)
      y[:, n - 1] = TERMINATOR
      acc[:] = 1.0
      return x, y, acc
    la = rng.integers(1, n - 1, size=batch_size)
    a = _uniform_nonzero_bits(rng, la, n)
    b = _uniform_nonzero_bits(rng, n - 1 - la, n)
    x = np.empty((batch_size, n), np.int32)
    for row in range(batch_size):
      k = int(la[row])
      x[row, :k], x[row, k], x[row, k + 1 :] = a[row, :k], PLUS, b[row, : n - 1 - k]
      product = _from_little_endian(a[row]) * _from_little_endian(b[row])  # Python ints: no overflow
      bits = [int(ch) for ch in reversed(bin(product)[2:])]
      y[row, : len(bits)], y[row, len(bits)] = bits, TERMINATOR
      acc[row, : len(bits) + 1] = 1.0
    return x, y, acc


@dataclasses.dataclass(frozen=True)
class ComputeSqrt(BidirectionalTask):
  """``floor(sqrt(v))`` of a binary number, both BIG-endian; ``output_length(n) = ceil(n / 2)``.

  Reference: tasks/cs/compute_sqrt.py: ``v ~ U[1, 2^n - 1]`` written in n bits (leading zeros kept), the root
  in ``ceil(n / 2)`` bits. Examples: 100101 (37) -> 110 (6); 111 (7) -> 10 (2, written 2 bits: ``10``).
  """

  name = 'compute_sqrt'
  reference = 'Deletang et al. 2023 (tasks/cs/compute_sqrt.py)'

  input_alphabet_size: ClassVar[int] = 2
  num_classes: ClassVar[int] = 2

  def output_length(self, n):
    return -(-n // 2)

  def _generate(self, rng, batch_size, n):
    m = self.output_length(n)
    x = _uniform_nonzero_bits(rng, np.full(batch_size, n), n)[:, ::-1].copy()  # big-endian
    y = np.empty((batch_size, m), np.int32)
    for row in range(batch_size):
      root = math.isqrt(int(''.join(map(str, x[row].tolist())), 2))
      y[row] = [int(ch) for ch in format(root, f'0{m}b')]
    return x, y, None


def _from_little_endian(bits: np.ndarray) -> int:
  return int(''.join(map(str, bits[::-1].tolist())), 2)
