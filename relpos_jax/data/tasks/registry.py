"""Task registry: ``make_task(name, **kwargs)`` and ``task_names()``."""

from __future__ import annotations

from relpos_jax.data.tasks.addition import Addition, AdditionAbacus, AdditionCoupled
from relpos_jax.data.tasks.arithmetic import BinaryAddition, BinaryMultiplication, ComputeSqrt
from relpos_jax.data.tasks.base import Task
from relpos_jax.data.tasks.cope_counting import CopeCounting
from relpos_jax.data.tasks.count_copy import CountCopy
from relpos_jax.data.tasks.dcf import ModularArithmeticBrackets, SolveEquation, StackManipulation
from relpos_jax.data.tasks.flip_flop import FlipFlop
from relpos_jax.data.tasks.recall import MultiQueryAssociativeRecall, Passkey, PasskeyTokens
from relpos_jax.data.tasks.regular import CycleNavigation, EvenPairs, ModularArithmetic, ParityCheck
from relpos_jax.data.tasks.ruler import CommonWords, VariableTracking
from relpos_jax.data.tasks.selective_copy import SelectiveCopy
from relpos_jax.data.tasks.strings import (
    BucketSort,
    DuplicateString,
    MissingDuplicate,
    OddsFirst,
    ReverseString,
    Shift,
)

# The Chomsky-hierarchy suite (Deletang et al. 2023) by level, then the other length-generalization tasks.
CHOMSKY_REGULAR = (EvenPairs, ModularArithmetic, ParityCheck, CycleNavigation)
CHOMSKY_CONTEXT_FREE = (StackManipulation, ReverseString, ModularArithmeticBrackets, SolveEquation)
CHOMSKY_CONTEXT_SENSITIVE = (
    DuplicateString,
    MissingDuplicate,
    OddsFirst,
    BinaryAddition,
    BinaryMultiplication,
    ComputeSqrt,
    BucketSort,
)
TASKS: dict[str, type[Task]] = {
    cls.name: cls
    for cls in (
        *CHOMSKY_REGULAR,
        *CHOMSKY_CONTEXT_FREE,
        *CHOMSKY_CONTEXT_SENSITIVE,
        Shift,
        CountCopy,
        CopeCounting,
        SelectiveCopy,
        FlipFlop,
        MultiQueryAssociativeRecall,
        Passkey,
        PasskeyTokens,
        VariableTracking,
        CommonWords,
        Addition,
        AdditionCoupled,
        AdditionAbacus,
    )
}
CHOMSKY_TASKS = tuple(cls.name for cls in (*CHOMSKY_REGULAR, *CHOMSKY_CONTEXT_FREE, *CHOMSKY_CONTEXT_SENSITIVE))


def task_names() -> tuple[str, ...]:
  """All registered task names, sorted."""
  return tuple(sorted(TASKS))


def make_task(name: str, **kwargs) -> Task:
  """Instantiate a task by name; keyword arguments go to its constructor (e.g. ``alphabet_size``)."""
  if name not in TASKS:
    raise ValueError(f'unknown task {name!r}; allowed: {", ".join(task_names())}')
  try:
    return TASKS[name](**kwargs)
  except TypeError as e:
    raise ValueError(f'bad arguments {kwargs!r} for task {name!r}: {e}') from None
