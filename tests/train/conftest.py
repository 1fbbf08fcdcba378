"""Tiny configs and a shared reference run for the training tests (all sized for a few seconds on a CPU)."""

from __future__ import annotations

import os

import ml_collections
import pytest

from relpos_jax import data as data_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs, loop

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# 1 MB of the standard library loads in well under a second and has validation windows of 64 bytes.
TINY_CORPUS_BYTES = 1_000_000


def tiny_lm_config() -> ml_collections.ConfigDict:
  """A 2-layer byte LM with dropout and randomized positions, so that determinism, sharding and resume
  are tested with every source of randomness a step has (data, dropout masks, positions)."""
  config = ml_collections.ConfigDict()
  config.seed = 3
  config.model = ml_collections.ConfigDict(
      dict(
          encoder='randomized(sinusoidal, max_position=64) + t5(bidirectional=False, num_buckets=8, max_distance=16)',
          num_layers=2,
          model_dim=32,
          num_heads=2,
          mlp_ratio=2,
          dropout_rate=0.1,
          dtype='float32',
      )
  )
  config.data = ml_collections.ConfigDict(
      dict(source='corpus', corpus='stdlib', max_train_bytes=TINY_CORPUS_BYTES, train_length=16)
  )
  config.optim = ml_collections.ConfigDict(
      dict(
          learning_rate=1e-2,
          schedule='warmup_cosine',
          warmup_steps=4,
          end_lr_fraction=0.1,
          weight_decay=0.01,
          b1=0.9,
          b2=0.98,
          eps=1e-9,
          grad_clip_norm=1.0,
      )
  )
  config.train = ml_collections.ConfigDict(
      dict(steps=24, batch_size=8, log_every=4, checkpoint_every=5, keep_checkpoints=2)
  )
  config.eval = ml_collections.ConfigDict(
      dict(every=12, lengths=(16, 32), batch_size=8, num_examples=12, pad_multiple=1, seed=0)
  )
  return config


def tiny_task_config(task: str = 'even_pairs') -> ml_collections.ConfigDict:
  """A 1-layer model on an algorithmic task, lengths 1..4 in 2 buckets (padding exercised)."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.model = ml_collections.ConfigDict(
      dict(encoder='rope', num_layers=1, model_dim=32, num_heads=2, mlp_ratio=2, dropout_rate=0.0, dtype='float32')
  )
  config.data = ml_collections.ConfigDict(
      dict(
          source='task',
          task=task,
          task_kwargs=ml_collections.ConfigDict(),
          min_length=1,
          max_length=4,
          num_buckets=2,
          loss_reduction='sequence_sum',
      )
  )
  config.optim = ml_collections.ConfigDict(
      dict(
          learning_rate=3e-3,
          schedule='warmup_constant',
          warmup_steps=2,
          end_lr_fraction=1.0,
          weight_decay=0.0,
          b1=0.9,
          b2=0.999,
          eps=1e-8,
          grad_clip_norm=1.0,
      )
  )
  config.train = ml_collections.ConfigDict(
      dict(steps=8, batch_size=8, log_every=4, checkpoint_every=4, keep_checkpoints=1)
  )
  config.eval = ml_collections.ConfigDict(
      dict(every=0, lengths=(5,), batch_size=8, num_examples=12, pad_multiple=4, seed=0)
  )
  return config


@pytest.fixture(scope='session')
def tiny_corpus() -> data_lib.Corpus:
  return data_lib.Corpus.stdlib(max_train_bytes=TINY_CORPUS_BYTES)


@pytest.fixture(scope='session')
def lm_data(tiny_corpus):
  """`lm_data(config)`: the run's data on the shared tiny corpus (loaded once per session)."""
  return lambda config: inputs.CorpusData(config_lib.parse(config), corpus=tiny_corpus)


@pytest.fixture(scope='session')
def reference_lm_run(lm_data) -> loop.TrainResult:
  """The uninterrupted tiny LM run on all (4 fake CPU) devices, in memory."""
  config = tiny_lm_config()
  return loop.train(config, data=lm_data(config))


def _without_time(history):
  return [{k: v for k, v in r.items() if k != 'tokens_per_sec'} for r in history]


@pytest.fixture(scope='session')
def without_time():
  """`without_time(history)`: the records less tokens_per_sec, the one field that may differ between runs."""
  return _without_time


@pytest.fixture(scope='session')
def lm_config():
  """`lm_config()`: a fresh tiny LM config (tests may change it)."""
  return tiny_lm_config


@pytest.fixture(scope='session')
def task_config():
  """`task_config(task='even_pairs')`: a fresh tiny algorithmic-task config."""
  return tiny_task_config
