"""Deterministic context-free tasks of Delétang et al. 2023 (reused by Ruoss et al. 2023) besides reverse_string.

* ``stack_manipulation``: run PUSH/POP instructions on a given stack, output the final stack.
* ``modular_arithmetic_brackets``: reduce a bracketed ``+``/``-`` expression mod 5.
* ``solve_equation``: find the digit hidden as ``x`` in a bracketed equation mod 5.

The two bracket tasks draw each expression by the reference's recursive split (a Python loop per example, as
the reference does; fast enough for a few hundred symbols per example).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import BidirectionalTask

_REF = 'Deletang et al. 2023 (tasks/dcf/{}.py)'
POP, PUSH_0, PUSH_1 = 2, 3, 4
TERMINATOR = 2


@dataclasses.dataclass(frozen=True)
class StackManipulation(BidirectionalTask):
  """Execute stack instructions; output the final stack top to bottom, then a terminator, then 0s.

  Input (length n >= 2): a stack of ``s ~ U{1..n-1}`` uniform bits given bottom to top, then ``n - s``
  instructions uniform over POP (2), PUSH 0 (3), PUSH 1 (4); POP on an empty stack does nothing. Output
  (length n + 1): the final stack top to bottom, the terminator 2, then 0s. Accuracy counts the positions up
  to and including the terminator (the reference ``accuracy_mask``); the loss covers all n + 1.
  ``n == 1``: the input is one bit ``v`` (no instruction) and the output ``v 2``, as in the reference.
  Examples (reference): ``0 1 1 0 PUSH1 POP POP -> 1 1 0 2 0 0 0 0``; ``1 1 0 POP POP POP -> 2 0 0 0 0 0 0``.
  """

  name = 'stack_manipulation'
  reference = _REF.format('stack_manipulation')

  input_alphabet_size: ClassVar[int] = 5
  num_classes: ClassVar[int] = 3

  def output_length(self, n):
    return n + 1

  def _generate(self, rng, batch_size, n):
    x = np.empty((batch_size, n), np.int32)
    y = np.zeros((batch_size, n + 1), np.int32)
    acc = np.zeros((batch_size, n + 1), np.float32)
    for b in range(batch_size):
      if n == 1:
        x[b] = rng.integers(0, 2, size=1)
        stack = [int(x[b, 0])]
      else:
        s = int(rng.integers(1, n))
        x[b, :s] = rng.integers(0, 2, size=s)
        x[b, s:] = rng.integers(POP, PUSH_1 + 1, size=n - s)
        stack = x[b, :s].tolist()
        for action in x[b, s:].tolist():
          if action == POP:
            if stack:
              stack.pop()
          else:
            stack.append(action - PUSH_0)
      out = stack[::-1] + [TERMINATOR]
      y[b, : len(out)] = out
      acc[b, : len(out)] = 1.0
    return x, y, acc


def _bracket_expression(rng: np.random.Generator, modulus: int, length: int) -> tuple[str, int]:
  """The reference's ``generate_one_expression_and_result`` (mult=False): a string of ``length`` symbols."""
  if length == 1:
    d = int(rng.integers(0, modulus))
    return str(d), d
  if length == 2:
    d = int(rng.integers(0, modulus))
    return f'-{d}', -d % modulus
  if length == 3:
    d = int(rng.integers(0, modulus))
    return f'({d})', d % modulus
  if length == 4:
    d = int(rng.integers(0, modulus))
    return f'(-{d})', -d % modulus
  left_length = int(rng.integers(1, length - 3))
  right_length = length - (left_length + 3)
  left, left_value = _bracket_expression(rng, modulus, left_length)
  right, right_value = _bracket_expression(rng, modulus, right_length)
  if int(rng.integers(0, 2)) == 0:
    return f'({left}+{right})', (left_value + right_value) % modulus
  return f'({left}-{right})', (left_value - right_value) % modulus


def _encode(text: str, modulus: int, symbols: str) -> list[int]:
  """Digits are their value; the other symbols follow ``symbols`` from id ``modulus`` on."""
  ids = {ch: modulus + i for i, ch in enumerate(symbols)}
  return [int(ch) if ch.isdigit() else ids[ch] for ch in text]


@dataclasses.dataclass(frozen=True)
class _ModularBrackets(BidirectionalTask):
  modulus: int = 5

  def __post_init__(self):
    validation.positive_int('task', 'modulus', self.modulus, maximum=10)  # residues are single digits

  @property
  def input_alphabet_size(self) -> int:
    return self.modulus + 6

  @property
  def num_classes(self) -> int:
    return self.modulus


@dataclasses.dataclass(frozen=True)
class ModularArithmeticBrackets(_ModularBrackets):
  """The value mod 5 of a random bracketed expression over ``+`` and ``-`` of exactly n symbols.

  Reference: tasks/dcf/modular_arithmetic_brackets.py (``mult=False``, as in the paper). Symbols: digits
  ``0..4`` are ids ``0..4``; ``+ - * ( ) x =`` are ids ``5..11`` (``*``, ``x``, ``=`` never drawn; the input
  alphabet has ``modulus + 6`` symbols as in the reference). Lengths 1-4 are ``d``, ``-d``, ``(d)``, ``(-d)``;
  longer ones ``(L op R)`` with ``|L| ~ U{1..n-4}``, recursively. Example: ``((1-4)+-2)`` -> ``-5 = 0``.
  """

  name = 'modular_arithmetic_brackets'
  reference = _REF.format('modular_arithmetic_brackets')

  def _generate(self, rng, batch_size, n):
    x = np.empty((batch_size, n), np.int32)
    y = np.empty((batch_size, 1), np.int32)
    for b in range(batch_size):
      text, y[b, 0] = _bracket_expression(rng, self.modulus, n)
      x[b] = _encode(text, self.modulus, '+-*()x=')
    return x, y, None


@dataclasses.dataclass(frozen=True)
class SolveEquation(_ModularBrackets):
  """The digit hidden as ``x`` in ``E = v`` (mod 5), E a bracketed ``+``/``-`` expression of n - 2 symbols.

  Reference: tasks/dcf/solve_equation.py. One digit of E (the first digit at or cyclically after a uniform
  position) becomes ``x``; the output is that digit. Symbols: digits are ids ``0..4``, ``+ - ( ) x =`` ids
  ``5..10``. As in the reference, ``n < 3`` gives an all-zero input with answer 0. Example:
  ``(x-(3))=1`` -> 4.
  """

  name = 'solve_equation'
  reference = _REF.format('solve_equation')

  def _generate(self, rng, batch_size, n):
    if n < 3:
      return np.zeros((batch_size, n), np.int32), np.zeros((batch_size, 1), np.int32), None
    x = np.empty((batch_size, n), np.int32)
    y = np.empty((batch_size, 1), np.int32)
    for b in range(batch_size):
      expression, value = _bracket_expression(rng, self.modulus, n - 2)
      i = int(rng.integers(0, len(expression)))
      while not expression[i].isdigit():
        i = (i + 1) % (n - 2)
      y[b, 0] = int(expression[i])
      x[b] = _encode(f'{expression[:i]}x{expression[i + 1:]}={value}', self.modulus, '+-()x=')
    return x, y, None
