"""Task registry: ``make_task(name, **kwargs)`` and ``task_names()``.

The one list of the algorithmic tasks: each task class is named here once, the Chomsky hierarchy by level, then
the others in the order the suite runs and reports them. The suite's task lists (configs/algorithmic.py) are
derived from CHOMSKY_TASKS and OTHER_TASKS, and tests/data/test_suite_tasks.py holds the docs' list and count
to TASKS."""

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
# In the suite's order (its tables list the tasks so); then those the suite leaves out (NOT_IN_SUITE).
OTHER = (
    FlipFlop,
    MultiQueryAssociativeRecall,
    Passkey,
    PasskeyTokens,
    SelectiveCopy,
    CountCopy,
    CopeCounting,
    Addition,
    AdditionCoupled,
    AdditionAbacus,
    VariableTracking,
    CommonWords,
    Shift,
)
# In the registry but not in the algorithmic suite: RULER's two tasks, which have their own study
# (configs/studies/suite_ruler.py: causal baselines and GGD-BAM at RULER's lengths), and `shift`, a fixed-offset
# copy defined in this package that carries no paper's claim to test.
NOT_IN_SUITE = ('variable_tracking', 'common_words', 'shift')
CHOMSKY_TASKS = tuple(cls.name for cls in (*CHOMSKY_REGULAR, *CHOMSKY_CONTEXT_FREE, *CHOMSKY_CONTEXT_SENSITIVE))
OTHER_TASKS = tuple(cls.name for cls in OTHER)
TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (*CHOMSKY_REGULAR, *CHOMSKY_CONTEXT_FREE, *CHOMSKY_CONTEXT_SENSITIVE, *OTHER)
}


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
