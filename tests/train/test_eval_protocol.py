"""The evaluation protocol of relpos_jax.train: same targets at every length, random positions for
randomized encoders (deterministic per seed), the loss against position, and its bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import data_sources, inputs, loop

TINY = {
    'train.steps': 2,
    'optim.warmup_steps': 1,
    'model.num_layers': 1,
    'model.model_dim': 16,
    'model.num_heads': 2,
    'data.train_length': 8,
    'data.max_train_bytes': 400_000,
    'eval.every': 0,
    'eval.lengths': (8, 16, 32),
    'eval.num_examples': 6,
}


def tiny_config(**overrides):
  return config_files.load_config('configs/lm.py', {**TINY, **overrides})


@pytest.fixture(scope='module')
def randomized_run():
  return loop.train(tiny_config(**{'model.encoder': 'randomized(rope, max_position=64)'}))


def test_corpus_eval_sets_score_the_same_tail_at_every_length():
  data = data_sources.build_data(config_lib.parse(tiny_config()))
  assert data.scored_tail == 8  # default: the shortest evaluation length
  tails = []
  for length in (8, 16, 32):
    (batch,) = data.eval_set(length, 'test')
    real = batch['position_mask'].any(axis=1)  # the set is filled to eval.batch_size with masked rows
    assert real.sum() == 6 and batch['inputs'].shape[1] == length
    np.testing.assert_array_equal(batch['loss_mask'][real, : length - 8], 0.0)
    np.testing.assert_array_equal(batch['loss_mask'][real, length - 8 :], 1.0)
    np.testing.assert_array_equal(batch['position_mask'][real], 1.0)  # the curve scores the whole window
    tails.append(batch['targets'][real, -8:])
  np.testing.assert_array_equal(tails[0], tails[2])
  fingerprints = [data.scored_set(n, 'test') for n in (8, 16, 32)]
  assert len({f['fingerprint'] for f in fingerprints}) == 1
  assert fingerprints[0]['num_scored'] == 48 and fingerprints[0]['protocol'] == inputs.SAME_TARGETS
  assert data.scored_set(8, 'validation')['fingerprint'] != fingerprints[0]['fingerprint']


def test_num_tokens_counts_scored_tokens_and_the_tail_is_a_key():
  data = data_sources.build_data(config_lib.parse(tiny_config(**{'eval.num_tokens': 40, 'eval.scored_tail': 4})))
  (batch,) = data.eval_set(32, 'validation')
  assert batch['position_mask'].any(axis=1).sum() == 10 and batch['loss_mask'].sum() == 40


@pytest.mark.parametrize(
    'key,value,message',
    [
        ('eval.scored_tail', 9, r'config\.eval\.scored_tail=9 .*shortest evaluation length'),
        ('eval.position_draws', 0, r'config\.eval\.position_draws=0 is invalid'),
        ('eval.position_draws', -2, r'config\.eval\.position_draws=-2 is invalid'),
    ],
)
def test_bad_protocol_keys_are_named(key, value, message):
  with pytest.raises(config_lib.ConfigError, match=message):
    tiny_config(**{key: value})


def test_randomized_evaluation_is_deterministic_per_seed_and_not_sequential(randomized_run):
  model, data = randomized_run.model, randomized_run.data
  published = loop.EvalPositions.of(model, 3, seed=0)
  assert published.random and published.draws == 3 and 'mean over 3 draws' in published.describe()
  first = loop.evaluate_set(model, data, 32, split='test', positions=published)
  again = loop.evaluate_set(model, data, 32, split='test', positions=loop.EvalPositions.of(model, 3, seed=0))
  assert first.metrics == again.metrics
  np.testing.assert_array_equal(first.position_loss, again.position_loss)
  other_seed = loop.evaluate_set(model, data, 32, split='test', positions=loop.EvalPositions.of(model, 3, seed=1))
  sequential = loop.evaluate_set(
      model, data, 32, split='test', positions=loop.EvalPositions.of(model, 3, 0, sequential=True)
  )
  assert other_seed.metrics['loss'] != first.metrics['loss']
  assert sequential.metrics['loss'] != first.metrics['loss']
  assert loop.EvalPositions.of(model, 3, 0, sequential=True).describe() == '0..L-1'
  # The curve works for both, over the whole window (each draw counts every position once).
  for evaluation, draws in ((first, 3), (sequential, 1)):
    assert evaluation.position_loss.shape == (32,) and np.all(np.isfinite(evaluation.position_loss))
    np.testing.assert_array_equal(evaluation.position_tokens, 6 * draws)


def test_random_positions_do_not_depend_on_how_the_set_is_batched(randomized_run):
  model = randomized_run.model
  small_batches = data_sources.build_data(config_lib.parse(tiny_config(**{'eval.max_tokens_per_batch': 64})))
  assert len(small_batches.eval_set(32, 'test')) > len(randomized_run.data.eval_set(32, 'test'))
  positions = loop.EvalPositions.of(model, 2, seed=0)
  whole = loop.evaluate_set(model, randomized_run.data, 32, split='test', positions=positions)
  cut = loop.evaluate_set(model, small_batches, 32, split='test', positions=positions)
  np.testing.assert_allclose(cut.metrics['loss'], whole.metrics['loss'], rtol=1e-6)


def test_an_encoder_without_random_positions_is_evaluated_at_0_to_L():
  run = loop.train(tiny_config(**{'model.encoder': 'rope'}))
  positions = loop.EvalPositions.of(run.model, 4, seed=0)
  assert not positions.random and positions.draws == 1
  default = loop.evaluate_set(run.model, run.data, 16, split='validation')
  assert loop.evaluate_set(run.model, run.data, 16, split='validation', positions=positions).metrics == default.metrics
  # The scored tail's loss is the mean of the curve over those positions.
  np.testing.assert_allclose(default.metrics['loss'], default.position_loss[-8:].mean(), rtol=1e-5)


def test_task_test_split_draws_other_examples():
  config = config_files.load_config(
      'configs/algorithmic.py', {'train.steps': 1, 'optim.warmup_steps': 0, 'eval.num_examples': 8}
  )
  data = data_sources.build_data(config_lib.parse(config))
  length = int(config.eval.lengths[0])
  validation, test = data.scored_set(length, 'validation'), data.scored_set(length, 'test')
  assert validation['fingerprint'] != test['fingerprint']
  assert data.scored_set(length, 'test') == test
  with pytest.raises(ValueError, match="split='train' is invalid"):
    data.eval_set(length, 'train')
