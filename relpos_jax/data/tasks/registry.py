"""Task registry: ``make_task(name, **kwargs)`` and ``task_names()``."""

from __future__ import annotations

from relpos_jax.data.tasks.arithmetic import BinaryAddition
from relpos_jax.data.tasks.base import Task
from relpos_jax.data.tasks.count_copy import CountCopy
from relpos_jax.data.tasks.regular import EvenPairs, ParityCheck
from relpos_jax.data.tasks.strings import (BucketSort, DuplicateString, MissingDuplicate, ReverseString,
                                           Shift)

TASKS: dict[str, type[Task]] = {cls.name: cls for cls in (
    EvenPairs, ParityCheck, ReverseString, DuplicateString, BinaryAddition, BucketSort, Shift,
    MissingDuplicate, CountCopy)}


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
