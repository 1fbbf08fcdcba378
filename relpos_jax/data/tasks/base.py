"""Common interface of the algorithmic tasks.

Bidirectional format (Delétang et al. 2023; Ruoss et al. 2023)
--------------------------------------------------------------
The reference code (``make_model_with_empty_targets`` in both DeepMind repositories) feeds a bidirectional
transformer the input string followed by ``output_length(n)`` copies of one extra "empty output" token, whose
id is the input alphabet size, and reads the predictions at those last ``output_length(n)`` positions.
Here, for input length ``n`` and ``m = output_length(n)``, ``T = n + m``:

* ``inputs``   (B, T) int32: ``x_1 .. x_n`` (ids in ``[0, input_alphabet_size)``) then ``m`` x ``placeholder_id``
  (``= input_alphabet_size``, exactly the reference code's id).
* ``targets``  (B, T) int32: 0 at the ``n`` input positions, the output string (ids in ``[0, num_classes)``)
  at positions ``n .. T-1``.
* ``loss_mask`` (B, T) float32: 1 exactly at positions ``n .. T-1`` (what the papers train on: their loss
  sums the cross-entropy over all output positions).
* ``accuracy_mask`` (B, T) float32: the output positions the papers *score*. Equal to ``loss_mask`` for every
  task except ``binary_addition``, whose accuracy only counts output positions up to and including the
  termination token (the reference ``accuracy_mask``).

``pad_id = input_alphabet_size + 1`` is only used by bucketing (``relpos_jax.data.buckets``), and
``vocab_size = input_alphabet_size + 2`` counts the placeholder and pad. The model's output head needs
``num_classes`` logits. Classification tasks have ``output_length(n) == 1``.

Causal (LM) format: see ``count_copy.py``.

Every ``sample`` draws only from the ``np.random.Generator`` it is given, so a fixed seed reproduces a batch.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import numpy as np

from relpos_jax import validation

Batch = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Task(abc.ABC):
  """Shared metadata/validation for bidirectional (classification) and causal tasks."""

  name: ClassVar[str] = ''
  kind: ClassVar[str] = ''  # 'bidirectional' (a classifier) or 'causal' (a decoder task)
  reference: ClassVar[str] = ''
  has_shortcut: ClassVar[bool] = False
  shortcut_reason: ClassVar[str | None] = None

  @property
  @abc.abstractmethod
  def vocab_size(self) -> int:
    """Size of the model's input embedding table."""

  @property
  @abc.abstractmethod
  def num_classes(self) -> int:
    """Number of logits the model must output at a scored position."""

  @property
  @abc.abstractmethod
  def pad_id(self) -> int:
    """Input id used for bucket padding (never a real token of the task)."""

  @abc.abstractmethod
  def output_length(self, n: int) -> int:
    """Number of scored positions for input length ``n``."""

  @abc.abstractmethod
  def total_length(self, n: int) -> int:
    """Length ``T`` of the ``inputs`` row for input length ``n``."""

  @abc.abstractmethod
  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    """A batch whose examples all have input length ``length``."""

  def check_length(self, n: int) -> None:
    """Raises ValueError naming the task's own key when input length ``n`` cannot be drawn at its sizes (a list
    of distinct words longer than the vocabulary); most tasks draw any length. The run's config calls it for
    the training and evaluation lengths, so a size that cannot fit is refused before training."""
    del n

  def for_evaluation(self) -> Task:
    """The task evaluation sets are drawn from: this one, unless its training adds an augmentation its
    paper's evaluation leaves out (Abacus's random offset, McLeish et al. 2024)."""
    return self

  def max_input_position(self, n: int) -> int | None:
    """The largest ``batch['input_positions']`` value at input length ``n``; None: the task hands none."""
    return None

  def max_given_position(self, n: int) -> int | None:
    """The largest ``batch['positions']`` value (the positions every encoder reads, in place of 0..T-1) at
    input length ``n``; None: the task hands none. The run's config holds it to the encoder's tables."""
    return None

  @property
  def params(self) -> dict:
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

  @property
  def metadata(self) -> dict:
    """JSON-friendly description, to be stored with results."""
    return {
        'name': self.name,
        'kind': self.kind,
        'params': self.params,
        'vocab_size': self.vocab_size,
        'num_classes': self.num_classes,
        'pad_id': self.pad_id,
        'has_shortcut': self.has_shortcut,
        'shortcut_reason': self.shortcut_reason,
        'reference': self.reference,
    }

  @staticmethod
  def _check_args(rng, batch_size, length) -> tuple[int, int]:
    validation.generator('task', rng)
    return validation.positive_int('task', 'batch_size', batch_size), validation.positive_int('task', 'length', length)


@dataclasses.dataclass(frozen=True)
class CausalTask(Task):
  """A decoder task: next-token prediction over the whole vocabulary at the scored positions."""

  kind: ClassVar[str] = 'causal'

  @property
  def num_classes(self) -> int:
    return self.vocab_size


@dataclasses.dataclass(frozen=True)
class BidirectionalTask(Task):
  """Input string, then ``output_length(n)`` placeholders; predictions are read at the placeholders."""

  kind: ClassVar[str] = 'bidirectional'

  @property
  @abc.abstractmethod
  def input_alphabet_size(self) -> int:
    """Number of distinct input symbols (ids ``0 .. input_alphabet_size - 1``)."""

  @property
  def placeholder_id(self) -> int:
    return self.input_alphabet_size

  @property
  def pad_id(self) -> int:
    return self.input_alphabet_size + 1

  @property
  def vocab_size(self) -> int:
    return self.input_alphabet_size + 2

  def input_length(self, n: int) -> int:
    """Length of the input string drawn for a requested length ``n`` (``n`` except where a task's reference
    code adjusts it, as ``modular_arithmetic`` keeps expressions of odd length)."""
    return n

  def output_length(self, n: int) -> int:
    return 1

  def total_length(self, n: int) -> int:
    return self.input_length(n) + self.output_length(n)

  @property
  def metadata(self) -> dict:
    return {**super().metadata, 'input_alphabet_size': self.input_alphabet_size, 'placeholder_id': self.placeholder_id}

  @abc.abstractmethod
  def _generate(
      self, rng: np.random.Generator, batch_size: int, n: int
  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(input strings (B, n), output strings (B, m), accuracy mask over the outputs (B, m) or None)."""

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    batch_size, requested = self._check_args(rng, batch_size, length)
    n = self.input_length(requested)
    x, y, acc = self._generate(rng, batch_size, n)
    m = self.output_length(requested)
    assert x.shape == (batch_size, n) and y.shape == (batch_size, m), (x.shape, y.shape, n, m)
    t = n + m
    inputs = np.full((batch_size, t), self.placeholder_id, dtype=np.int32)
    inputs[:, :n] = x
    targets = np.zeros((batch_size, t), dtype=np.int32)
    targets[:, n:] = y
    loss_mask = np.zeros((batch_size, t), dtype=np.float32)
    loss_mask[:, n:] = 1.0
    if acc is None:
      accuracy_mask = loss_mask.copy()
    else:
      accuracy_mask = np.zeros((batch_size, t), dtype=np.float32)
      accuracy_mask[:, n:] = acc
    return {'inputs': inputs, 'targets': targets, 'loss_mask': loss_mask, 'accuracy_mask': accuracy_mask}
