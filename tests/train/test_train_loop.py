"""The training loop: it learns, it is deterministic, and 4-way data parallelism changes nothing."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from relpos_jax.train import inputs, loop


def _leaves(result):
  return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(result.params))]


def test_loss_decreases_and_records_are_complete(reference_lm_run):
  history = reference_lm_run.history
  training = [r for r in history if 'loss' in r]
  assert [r['step'] for r in training] == [4, 8, 12, 16, 20, 24]
  for record in training:
    assert set(record) >= {'step', 'loss', 'lr', 'tokens_per_sec', 'bits_per_char', 'grad_norm'}
    assert record['bits_per_char'] == pytest.approx(record['loss'] / np.log(2), rel=1e-6)
  # Bytes start near ln(256) = 5.5 nats; 24 updates of a tiny model reach well below.
  assert training[0]['loss'] > 3.5 and training[-1]['loss'] < training[0]['loss'] - 1.0
  evals = [r for r in history if 'eval/16/loss' in r]
  assert [r['step'] for r in evals] == [12, 24]
  assert evals[1]['eval/32/loss'] < evals[0]['eval/32/loss']
  final = reference_lm_run.final_metrics
  assert final['step'] == 24 and final['eval/32/bits_per_char'] == evals[1]['eval/32/bits_per_char']


def test_same_config_and_seed_give_the_same_numbers(reference_lm_run, lm_config, lm_data, without_time):
  config = lm_config()
  again = loop.train(config, data=lm_data(config))
  assert without_time(again.history) == without_time(reference_lm_run.history)
  for a, b in zip(_leaves(again), _leaves(reference_lm_run)):
    np.testing.assert_array_equal(a, b)
  # The seed reaches the data and the parameters (the equality above is not that of constants).
  other = lm_config()
  other.seed = 4
  np.testing.assert_raises(
      AssertionError,
      np.testing.assert_array_equal,
      lm_data(other).train_batch(0)['inputs'],
      lm_data(config).train_batch(0)['inputs'],
  )
  assert not np.array_equal(_leaves(loop.train(other, data=lm_data(other), stop_after=1))[0], _leaves(again)[0])


def test_four_devices_match_one_device(reference_lm_run, lm_config, lm_data):
  assert len(reference_lm_run.mesh.devices.flat) == 4 == jax.device_count()
  config = lm_config()
  single = loop.train(config, devices=jax.devices()[:1], data=lm_data(config))
  assert len(single.mesh.devices.flat) == 1
  losses = [r['loss'] for r in single.history if 'loss' in r]
  reference = [r['loss'] for r in reference_lm_run.history if 'loss' in r]
  np.testing.assert_allclose(losses, reference, rtol=1e-5)
  for a, b in zip(_leaves(single), _leaves(reference_lm_run)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  sharding = jax.tree.leaves(reference_lm_run.params)[0].sharding
  assert sharding.is_fully_replicated and len(sharding.device_set) == 4


def test_evaluate_is_independent_of_batching(reference_lm_run):
  data = reference_lm_run.data
  batches = data.eval_set(32)  # 12 windows in batches of 8: the last is filled
  whole = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
  assert whole['loss_mask'].sum() == 12 * 16  # each window scores its last eval.scored_tail = 16 targets
  in_fours = inputs.batches_of({k: v[:12] for k, v in whole.items()}, 4)
  by_eight = loop.evaluate(reference_lm_run.model, batches, data.objective, use_padding_mask=False)
  by_four = loop.evaluate(reference_lm_run.model, in_fours, data.objective, use_padding_mask=False)
  assert by_eight == pytest.approx(by_four, rel=1e-6)
  # Training's own evaluation gives its randomized encoder random positions (4 draws, from the run's seed).
  published = loop.EvalPositions.of(reference_lm_run.model, 4, seed=reference_lm_run.config.seed)
  assert published.random
  by_draws = loop.evaluate(reference_lm_run.model, batches, data.objective, use_padding_mask=False, positions=published)
  assert by_draws['loss'] == pytest.approx(reference_lm_run.final_metrics['eval/32/loss'], rel=1e-6)
  assert loop.evaluate_lengths(reference_lm_run.model, data, [32])[32] == pytest.approx(by_eight, rel=1e-6)


def test_encoder_task_run(task_config):
  config = task_config('even_pairs')
  result = loop.train(config)
  assert result.data.architecture == 'bidirectional' and len(result.data.buckets) == 2
  final = result.final_metrics
  for key in ('loss', 'accuracy', 'exact_match', 'eval/5/accuracy', 'eval/5/exact_match', 'eval/5/loss'):
    assert np.isfinite(final[key]), key
  # One output per example: token accuracy and sequence exact match coincide.
  assert final['eval/5/accuracy'] == final['eval/5/exact_match']
  # pad_multiple=4 pads length 5 (6 tokens) to 8; the padded keys are masked, so scores are unchanged.
  padded = result.data.eval_set(5)
  assert padded[0]['inputs'].shape[1] == 8 and not padded[0]['padding_mask'][:, 6:].any()
  unpadded = [{k: v[:, :6] for k, v in b.items()} for b in padded]
  a = loop.evaluate(result.model, padded, result.data.objective)
  b = loop.evaluate(result.model, unpadded, result.data.objective)
  assert a == pytest.approx(b, rel=1e-5, abs=1e-6)


def test_decoder_task_run(task_config):
  config = task_config('count_copy')
  config.data.num_buckets = 1  # one training shape: this test is about the decoder path, not bucketing
  result = loop.train(config)
  assert result.data.architecture == 'causal'
  assert {'eval/5/accuracy', 'eval/5/exact_match'} <= set(result.final_metrics)
  assert 0.0 <= result.final_metrics['eval/5/exact_match'] <= result.final_metrics['eval/5/accuracy'] <= 1.0


def test_task_positions_replace_the_default_ones(task_config):
  # addition_coupled hands the model its own position ids (Cho et al. 2024) in batch['positions'].
  config = task_config('addition_coupled')
  config.data.task_kwargs.max_position = 12
  config.model.encoder = 'learned(max_length=32)'
  result = loop.train(config)
  batches = result.data.eval_set(5)
  assert 'positions' in batches[0] and batches[0]['positions'].max() <= 12
  coupled = loop.evaluate(result.model, batches, result.data.objective)
  sequential = loop.evaluate(
      result.model, [{k: v for k, v in b.items() if k != 'positions'} for b in batches], result.data.objective
  )
  assert coupled['loss'] != sequential['loss']  # the learned table is read at the task's positions


def test_training_on_your_own_corpus_is_one_override(tmp_path):
  """`--config.data.corpus=/path/to/texts`: a directory of text files, read, split by file and recorded."""
  import os
  from relpos_jax.train import config_files
  from relpos_jax.train.config import ConfigError

  lm = os.path.join(os.path.dirname(inputs.__file__), '..', '..', 'configs', 'lm.py')
  rng = np.random.default_rng(0)
  for i in range(12):
    words = rng.choice(['the', 'cat', 'sat', 'on', 'a', 'mat'], 300)
    (tmp_path / f'doc{i:02d}.txt').write_text(' '.join(words))
  overrides = {
      'data.corpus': str(tmp_path),
      'train.steps': 3,
      'train.batch_size': 4,
      'train.log_every': 3,
      'optim.warmup_steps': 1,
      'model.num_layers': 1,
      'model.model_dim': 16,
      'model.num_heads': 2,
      'data.train_length': 16,
      'eval.every': 0,
      'eval.lengths': (16, 32),
      'eval.batch_size': 4,
      'eval.num_examples': 4,
  }
  result = loop.train(config_files.load_config(lm, overrides), devices=jax.devices()[:1])
  described = result.data.describe()
  assert described['source'] == f'files: {tmp_path}' and described['num_files'] == 12
  assert described['num_val_files'] >= 1 and described['fingerprint'] == result.data.corpus.fingerprint
  assert set(np.unique(result.data.train_batch(0)['inputs'])) <= set(b'the cat sat on a mat\x00')
  assert np.isfinite(result.final_metrics['eval/32/bits_per_char'])
  # A path that names nothing is refused when the config is loaded, naming the key.
  with pytest.raises(ConfigError, match=r"config\.data\.corpus='.*nowhere' is invalid: path .* does not exist"):
    config_files.load_config(lm, {'data.corpus': str(tmp_path / 'nowhere')})
  with pytest.raises(ConfigError, match=r'config\.data\.corpus=.* matches no file'):
    config_files.load_config(lm, {'data.corpus': str(tmp_path / '*.md')})


def test_a_run_parses_its_config_dict_once(lm_config, monkeypatch, tmp_path):
  """train() validates the ConfigDict into the typed Config once and reads that object from then on (data,
  model, optimizer, evaluation); a Config handed to the parser passes through without a second parse."""
  from relpos_jax.train import config as config_lib

  parse = config_lib.parse
  parsed = []

  def counting_parse(config):
    if not isinstance(config, config_lib.Config):
      parsed.append(config)
    return parse(config)

  monkeypatch.setattr(config_lib, 'parse', counting_parse)
  config = lm_config()
  config.train.checkpoint_every = 2
  loop.train(config, tmp_path, stop_after=2)
  assert len(parsed) == 1
  parsed.clear()
  loop.load_model(tmp_path)  # config.json, read back: one parse too
  assert len(parsed) == 1
