"""Losses, metrics, schedules and batching, checked against hand computations."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax.data import per_token_accuracy, sequence_exact_match
from relpos_jax.train import inputs
from relpos_jax.train.objectives import Objective
from relpos_jax.train.optim import OptimizerSpec, decay_mask


def _batch():
  # Two examples of 3 positions; the first scores positions 1-2, the second only position 2.
  logits = jnp.log(jnp.array([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.5, 0.5], [0.7, 0.3]]], jnp.float32))
  targets = jnp.array([[0, 0, 1], [0, 0, 1]], jnp.int32)
  mask = jnp.array([[0, 1, 1], [0, 0, 1]], jnp.float32)
  return logits, {'targets': targets, 'loss_mask': mask, 'accuracy_mask': mask}


def test_task_losses_and_metrics_by_hand():
  logits, batch = _batch()
  ce = [-math.log(0.9), -math.log(0.8), -math.log(0.3)]
  token_mean, aux = Objective('task').loss(logits, batch)
  assert float(token_mean) == pytest.approx(sum(ce) / 3, rel=1e-6)
  sequence_sum, _ = Objective('task', reduction='sequence_sum').loss(logits, batch)
  assert float(sequence_sum) == pytest.approx((ce[0] + ce[1] + ce[2]) / 2, rel=1e-6)
  # Right at both scored positions of example 1, wrong at the one of example 2.
  assert float(aux['accuracy']) == pytest.approx(2 / 3)
  assert float(aux['exact_match']) == pytest.approx(1 / 2)
  # The data package's scoring helpers agree.
  args = (logits, batch['targets'], batch['accuracy_mask'])
  assert float(aux['accuracy']) == pytest.approx(float(per_token_accuracy(*args)))
  assert float(aux['exact_match']) == pytest.approx(float(sequence_exact_match(*args)))


def test_language_model_bits_per_character():
  logits, batch = _batch()
  _, aux = Objective('language_model').loss(logits, batch)
  assert float(aux['bits_per_char']) == pytest.approx(float(aux['loss']) / math.log(2), rel=1e-6)
  assert 'accuracy' not in aux


def test_eval_sums_add_up_over_batches_and_ignore_filler_rows():
  logits, batch = _batch()
  objective = Objective('task')
  whole = objective.finalize(objective.eval_sums(logits, batch))
  first = objective.eval_sums(logits[:1], {k: v[:1] for k, v in batch.items()})
  second = objective.eval_sums(logits[1:], {k: v[1:] for k, v in batch.items()})
  filler = {k: (jnp.zeros_like(v) if k.endswith('mask') else v[:1]) for k, v in batch.items()}
  padded = objective.eval_sums(logits[:1], filler)
  total = {k: first[k] + second[k] + padded[k] for k in first}
  as_floats = lambda metrics: {k: float(v) for k, v in metrics.items()}
  assert as_floats(objective.finalize(total)) == pytest.approx(as_floats(whole))


def test_batches_of_fills_the_last_batch_with_masked_rows():
  arrays = inputs.lm_batch(np.arange(5 * 4).reshape(5, 4))
  batches = inputs.batches_of(arrays, 2)
  assert [b['inputs'].shape for b in batches] == [(2, 3)] * 3
  assert batches[-1]['loss_mask'][1].sum() == 0 and batches[-1]['accuracy_mask'][1].sum() == 0
  assert sum(b['loss_mask'].sum() for b in batches) == 5 * 3


def _spec(**kw):
  base = dict(
      learning_rate=1e-3,
      schedule='warmup_cosine',
      warmup_steps=10,
      end_lr_fraction=0.1,
      weight_decay=0.1,
      b1=0.9,
      b2=0.99,
      eps=1e-8,
      grad_clip_norm=1.0,
      total_steps=100,
  )
  return OptimizerSpec(**{**base, **kw})


def test_schedules():
  cosine = _spec().schedule_fn()
  assert float(cosine(0)) == 0.0 and float(cosine(5)) == pytest.approx(5e-4)
  assert float(cosine(10)) == pytest.approx(1e-3) and float(cosine(100)) == pytest.approx(1e-4)
  assert float(cosine(55)) == pytest.approx(1e-4 + 0.5 * (1e-3 - 1e-4), rel=1e-5)  # halfway down
  constant = _spec(schedule='warmup_constant', warmup_steps=0).schedule_fn()
  assert float(constant(0)) == float(constant(99)) == pytest.approx(1e-3)
  hash(_spec())  # a cache key of the jitted step


def test_weight_decay_spares_vectors():
  mask = decay_mask({'kernel': jnp.ones((2, 3)), 'bias': jnp.ones(3), 'scale': jnp.ones(3)})
  assert mask == {'kernel': True, 'bias': False, 'scale': False}
