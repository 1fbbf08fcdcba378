"""Host-side (numpy) data for relpos_jax: a byte-level LM corpus, algorithmic length-generalization tasks,
length bucketing and scoring helpers. Everything is deterministic from an ``np.random.Generator`` seed.

  corpus   Corpus.stdlib() / from_paths / from_glob / load('stdlib' or a path): byte tokens, by-file split,
           sample_batch, eval_windows
  corpora  named corpora beside the built-in one: 'austen' (Jane Austen's novels, read from the R package
           janeaustenr by a small reader of R's serialization format)
  tasks    make_task(name), task_names(): bidirectional tasks (placeholders after the input) and count_copy
  buckets  BatchSpec, sample_bucketed, length_buckets: one length per batch, <= num_buckets shapes
"""

from relpos_jax.data import buckets, corpus, tasks
from relpos_jax.data.buckets import (
    BatchSpec,
    bucket_for,
    length_buckets,
    pad_batch,
    pad_to_bucket,
    sample_bucketed,
    task_buckets,
)
from relpos_jax.data.corpus import VOCAB_SIZE, Corpus, nats_to_bits_per_byte
from relpos_jax.data.tasks import (
    TASKS,
    BidirectionalTask,
    Task,
    make_task,
    per_token_accuracy,
    sequence_exact_match,
    task_names,
)

__all__ = [
    'BatchSpec',
    'Corpus',
    'BidirectionalTask',
    'TASKS',
    'Task',
    'VOCAB_SIZE',
    'bucket_for',
    'buckets',
    'corpus',
    'length_buckets',
    'make_task',
    'nats_to_bits_per_byte',
    'pad_batch',
    'pad_to_bucket',
    'per_token_accuracy',
    'sample_bucketed',
    'sequence_exact_match',
    'task_buckets',
    'task_names',
    'tasks',
]
