"""Algorithmic length-generalization tasks (Delétang et al. 2023; Ruoss et al. 2023; Kazemnejad et al. 2023).

See ``base`` for the bidirectional batch format and ``count_copy`` for the decoder format.
"""

from relpos_jax.data.tasks.arithmetic import BinaryAddition
from relpos_jax.data.tasks.base import Batch, BidirectionalTask, Task
from relpos_jax.data.tasks.count_copy import CountCopy
from relpos_jax.data.tasks.metrics import per_token_accuracy, sequence_exact_match
from relpos_jax.data.tasks.registry import TASKS, make_task, task_names
from relpos_jax.data.tasks.regular import EvenPairs, ParityCheck
from relpos_jax.data.tasks.strings import BucketSort, DuplicateString, MissingDuplicate, ReverseString, Shift

__all__ = ['Batch', 'BinaryAddition', 'BucketSort', 'CountCopy', 'DuplicateString', 'BidirectionalTask', 'EvenPairs',
           'MissingDuplicate', 'ParityCheck', 'ReverseString', 'Shift', 'TASKS', 'Task', 'make_task',
           'per_token_accuracy', 'sequence_exact_match', 'task_names']
