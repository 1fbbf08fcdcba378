"""Algorithmic length-generalization tasks: the Chomsky-hierarchy suite (Delétang et al. 2023; Ruoss et al. 2023),
count_copy (Kazemnejad et al. 2023), cope_counting (CoPE's counting task), selective_copy (Gu & Dao 2023; CoPE's),
flip_flop (Liu et al. 2023), mqar (Arora et al. 2023), passkey, RULER's variable_tracking and common_words (Hsieh et
al. 2024), and addition with task-structured positions (Cho et al. 2024; McLeish et al. 2024). `registry` is the one list of them (CHOMSKY_TASKS, OTHER_TASKS, TASKS).

See ``base`` for the bidirectional batch format and ``count_copy`` for the decoder format.
"""

from relpos_jax.data.tasks.addition import Addition, AdditionAbacus, AdditionCoupled
from relpos_jax.data.tasks.arithmetic import BinaryAddition, BinaryMultiplication, ComputeSqrt
from relpos_jax.data.tasks.base import Batch, BidirectionalTask, Task
from relpos_jax.data.tasks.cope_counting import CopeCounting
from relpos_jax.data.tasks.count_copy import CountCopy
from relpos_jax.data.tasks.dcf import ModularArithmeticBrackets, SolveEquation, StackManipulation
from relpos_jax.data.tasks.flip_flop import FlipFlop
from relpos_jax.data.tasks.metrics import per_token_accuracy, sequence_exact_match
from relpos_jax.data.tasks.recall import MultiQueryAssociativeRecall, Passkey
from relpos_jax.data.tasks.registry import CHOMSKY_TASKS, OTHER_TASKS, TASKS, make_task, task_names
from relpos_jax.data.tasks.regular import CycleNavigation, EvenPairs, ModularArithmetic, ParityCheck
from relpos_jax.data.tasks.selective_copy import SelectiveCopy
from relpos_jax.data.tasks.strings import (
    BucketSort,
    DuplicateString,
    MissingDuplicate,
    OddsFirst,
    ReverseString,
    Shift,
)

__all__ = [
    'Addition',
    'AdditionAbacus',
    'AdditionCoupled',
    'Batch',
    'BidirectionalTask',
    'BinaryAddition',
    'BinaryMultiplication',
    'BucketSort',
    'CHOMSKY_TASKS',
    'OTHER_TASKS',
    'ComputeSqrt',
    'CopeCounting',
    'CountCopy',
    'CycleNavigation',
    'DuplicateString',
    'EvenPairs',
    'FlipFlop',
    'MissingDuplicate',
    'ModularArithmetic',
    'ModularArithmeticBrackets',
    'MultiQueryAssociativeRecall',
    'OddsFirst',
    'ParityCheck',
    'Passkey',
    'ReverseString',
    'SelectiveCopy',
    'Shift',
    'SolveEquation',
    'StackManipulation',
    'TASKS',
    'Task',
    'make_task',
    'per_token_accuracy',
    'sequence_exact_match',
    'task_names',
]
