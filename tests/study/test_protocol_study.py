"""The study's protocol: per-encoder learning rates chosen on validation at the training length, refused
inputs (nothing written), runs beyond chance kept out of the means, honest re-evaluation, and one real tiny
study with every field the protocol records in results.json."""

from __future__ import annotations

import json
import os
import types

import numpy as np
import pytest

from relpos_jax import study
from relpos_jax.study import protocol, reevaluate, report, runner
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import inputs

TINY = {
    'model.num_layers': 1,
    'model.model_dim': 16,
    'model.num_heads': 2,
    'data.train_length': 8,
    'data.max_train_bytes': 1_000_000,
    'train.steps': 3,
    'train.batch_size': 4,
    'train.log_every': 3,
    'train.checkpoint_every': 3,
    'train.tensorboard': False,
    'optim.warmup_steps': 1,
    'optim.learning_rate': 1e-2,
    'eval.lengths': (8, 16, 32),
    'eval.batch_size': 8,
    'eval.num_tokens': 64,
    'eval.max_tokens_per_batch': 128,
    'study.comparisons': (),
}


def _no_document_totals(ctx, model, token_nll=None):
  """The fake models of these tests score no documents, so there are no per-document totals to record."""
  del ctx, model, token_nll


def tiny_study_config(encoders=('alibi', 'abs: sinusoidal'), **overrides):
  """The shipped study (configs/lm.py:study) made tiny; checked when the study runs."""
  # No committed rates from the config file: each test states the protocol it checks.
  settings = {**TINY, 'study.encoders': encoders, 'study.default_learning_rates': (), **overrides}
  return config_files.load_config('configs/lm.py:study', settings, validate_config=False)


def _fake_train(calls):
  def train(cfg, workdir, **kwargs):
    calls.append((cfg.encoder_spec, cfg.seed, cfg.optim.learning_rate, os.path.relpath(workdir)))
    model = types.SimpleNamespace(learning_rate=cfg.optim.learning_rate)
    return types.SimpleNamespace(
        final_metrics={'loss': 1.0}, step=cfg.train.steps, params={'w': np.zeros(2)}, model=model
    )

  return train


def _fake_evaluate(selection_loss, test_value):
  """evaluate_run whose validation loss at the training length and test values are functions of the rate."""

  def evaluate_run(model, data, *, lengths, split, train_length, metric, seed, draws, sequential_row, **options):
    lr = model.learning_rate
    by_length = {str(n): test_value(lr) + seed / 100 for n in lengths}
    return {
        'split': split,
        'positions': '0..L-1',
        'by_length': by_length,
        'loss_by_length': {n: v * 0.69 for n, v in by_length.items()},
        'selection': {'split': 'validation', 'length': train_length, 'loss': selection_loss(lr)},
    }

  return evaluate_run


def test_the_grid_chooses_on_validation_at_the_training_length_and_reuses_its_runs(tmp_path, monkeypatch):
  # Validation at the training length prefers 3e-3; the test split would prefer 1e-2: the choice must not look.
  selection = {1e-3: 3.0, 3e-3: 2.0, 1e-2: 2.5}
  test = {1e-3: 2.9, 3e-3: 2.4, 1e-2: 1.0}
  monkeypatch.setattr(protocol, 'evaluate_run', _fake_evaluate(selection.get, test.get))
  monkeypatch.setattr(runner, 'document_totals_record', _no_document_totals)
  config = tiny_study_config(encoders=('alibi',))
  config.study.lr_grid = (1e-3, 3e-3, 1e-2)
  config.study.seeds = (0, 1)
  calls = []
  results = study.run_study(config, tmp_path, train_fn=_fake_train(calls))
  assert [c[1:3] for c in calls] == [(0, 1e-3), (0, 3e-3), (0, 1e-2), (1, 3e-3)]
  (run,) = results['runs']
  assert run['learning_rate'] == 3e-3 and run['lr_choice'] == 'grid'
  assert run['lr_grid'] == {'0.001': 3.0, '0.003': 2.0, '0.01': 2.5}
  assert run['run_dirs'] == ['runs/alibi/lr0.003/seed0', 'runs/alibi/lr0.003/seed1']
  assert run['by_length_per_seed']['8'] == pytest.approx([2.4, 2.41])  # the chosen grid run is seed 0's
  for value in ('0.001', '0.003', '0.01'):
    assert os.path.exists(tmp_path / 'runs' / 'alibi' / f'lr{value}' / 'seed0' / runner.RESULT_FILE)
  assert '| 0.003 (grid) |' in (tmp_path / 'results.md').read_text()
  # Rerun: every grid run and seed is reused; committing the chosen rate reuses its runs too.
  assert study.run_study(config, tmp_path, train_fn=lambda *a, **k: pytest.fail('retrained'))['runs'] == results['runs']
  config.study.lr_grid = None
  config.study.learning_rates = ('alibi: 0.003',)
  committed = study.run_study(config, tmp_path, train_fn=lambda *a, **k: pytest.fail('retrained'))
  assert committed['runs'][0]['lr_choice'] == 'committed' and committed['runs'][0]['learning_rate'] == 3e-3


def test_a_selection_seed_outside_the_reported_seeds_chooses_and_is_never_reported(tmp_path, monkeypatch):
  # Validation prefers 3e-3 at any seed; the selection seed's runs are scored on validation only.
  selection = {1e-3: 3.0, 3e-3: 2.0, 1e-2: 2.5}
  test = {1e-3: 2.9, 3e-3: 2.4, 1e-2: 1.0}
  monkeypatch.setattr(protocol, 'evaluate_run', _fake_evaluate(selection.get, test.get))

  def evaluate_selection(model, data, *, train_length, metric, seed, draws):
    return {'positions': '0..L-1', 'selection': {'split': 'validation', 'loss': selection[model.learning_rate]}}

  monkeypatch.setattr(protocol, 'evaluate_selection', evaluate_selection)
  monkeypatch.setattr(runner, 'document_totals_record', _no_document_totals)
  config = tiny_study_config(encoders=('alibi',))
  config.study.lr_grid = (1e-3, 3e-3, 1e-2)
  config.study.seeds = (0, 1)
  config.study.selection_seed = 7
  calls = []
  results = study.run_study(config, tmp_path, train_fn=_fake_train(calls))
  # The grid at seed 7, then both reported seeds at the chosen rate: seed 0 is trained, not taken from the grid.
  assert [c[1:3] for c in calls] == [(7, 1e-3), (7, 3e-3), (7, 1e-2), (0, 3e-3), (1, 3e-3)]
  (run,) = results['runs']
  assert run['learning_rate'] == 3e-3 and run['lr_choice'] == 'grid' and run['seeds'] == [0, 1]
  assert run['lr_grid'] == {'0.001': 3.0, '0.003': 2.0, '0.01': 2.5}
  assert run['by_length_per_seed']['8'] == pytest.approx([2.4, 2.41])  # seeds 0 and 1, not 7
  saved = report.load_json(tmp_path / 'runs' / 'alibi' / 'lr0.003' / 'seed7' / runner.RESULT_FILE)
  assert saved['selection_only'] and 'by_length' not in saved
  assert results['protocol']['selection_seed'] == 7
  assert 'at seed 7, which is not reported' in (tmp_path / 'results.md').read_text()
  # Resumed: nothing trains again.
  assert study.run_study(config, tmp_path, train_fn=lambda *a, **k: pytest.fail('retrained'))['runs'] == results['runs']


def test_an_edge_check_trains_selection_runs_past_the_grid_only(tmp_path, monkeypatch):
  selection = {3e-3: 2.0, 1e-2: 1.5, 0.1: 1.2}

  def evaluate_selection(model, data, *, train_length, metric, seed, draws):
    return {'positions': '0..L-1', 'selection': {'split': 'validation', 'loss': selection[model.learning_rate]}}

  monkeypatch.setattr(protocol, 'evaluate_selection', evaluate_selection)
  config = tiny_study_config(encoders=('alibi', 'abs: sinusoidal', 'alibi-as-t5: alibi -> t5'))
  config.study.lr_grid = (3e-3, 1e-2)
  config.study.seeds = (0, 1)
  config.study.selection_seed = 7
  calls = []
  with pytest.raises(config_lib.ConfigError, match=r"\['alibi-as-t5'\] are not trained encoders"):  # X's rate
    runner.edge_check(config, tmp_path / 'x', (0.1,), encoders=('alibi-as-t5',), train_fn=_fake_train([]))
  got = runner.edge_check(config, tmp_path, (0.1,), encoders=('alibi',), train_fn=_fake_train(calls))
  assert got == {'alibi': {'0.1': 1.2}}  # lower than the grid's best (1.5): the grid's choice would not stand
  assert [c[1:3] for c in calls] == [(7, 0.1)]  # the selection seed, the new rate, nothing reported
  saved = report.load_json(tmp_path / 'runs' / 'alibi' / 'lr0.1' / 'seed7' / runner.RESULT_FILE)
  assert saved['selection_only'] and 'by_length' not in saved
  # Resumed: nothing trains again.
  again = runner.edge_check(config, tmp_path, (0.1,), encoders=('alibi',), train_fn=lambda *a, **k: pytest.fail('x'))
  assert again == got
  with pytest.raises(
      config_lib.ConfigError,
      match=r"encoders \['rope'\] are not trained encoders of config.study.encoders; allowed: \['alibi', 'abs'\]",
  ):
    runner.edge_check(config, tmp_path / 'x', (0.1,), encoders=('rope',), train_fn=_fake_train([]))
  with pytest.raises(config_lib.ConfigError, match=r'rates=\[-0.1\] is invalid: allowed: one or more rates > 0'):
    runner.edge_check(config, tmp_path / 'x', (-0.1,), train_fn=_fake_train([]))
  with pytest.raises(config_lib.ConfigError, match=r'rates=\[True\] is invalid: .*not bools'):  # trained at 1
    runner.edge_check(config, tmp_path / 'x', (True,), train_fn=_fake_train([]))
  config.study.selection_seed = None
  with pytest.raises(config_lib.ConfigError, match=r'selection_seed is None'):
    runner.edge_check(config, tmp_path / 'x', (0.1,), train_fn=_fake_train([]))
  assert not (tmp_path / 'x').exists()


@pytest.mark.parametrize(
    'overrides,message',
    [
        ({'study.selection_seed': 1, 'study.lr_grid': (1e-3, 3e-3)}, r'selection_seed=1 is one of the reported seeds'),
        ({'study.selection_seed': 5}, r'selection_seed=5 is invalid without config\.study\.lr_grid'),
        ({'study.selection_seed': -1, 'study.lr_grid': (1e-3,)}, r'config\.study\.selection_seed=-1'),
    ],
)
def test_a_bad_selection_seed_is_named_and_nothing_is_written(tmp_path, overrides, message):
  config = tiny_study_config(**{'study.seeds': (0, 1), **overrides})
  workdir = tmp_path / 'never'
  with pytest.raises(config_lib.ConfigError, match=message):
    study.run_study(config, workdir, train_fn=lambda *a, **k: pytest.fail('trained'))
  assert not workdir.exists()


def test_without_grid_or_commitment_the_fixed_rate_is_recorded(tmp_path, monkeypatch):
  monkeypatch.setattr(protocol, 'evaluate_run', _fake_evaluate(lambda lr: 2.0, lambda lr: 2.0))
  monkeypatch.setattr(runner, 'document_totals_record', _no_document_totals)
  calls = []
  results = study.run_study(tiny_study_config(encoders=('alibi',)), tmp_path, train_fn=_fake_train(calls))
  assert results['runs'][0]['lr_choice'] == 'fixed' and results['runs'][0]['learning_rate'] == 1e-2
  assert calls[0][3].endswith(os.path.join('runs', 'alibi', 'seed0'))


@pytest.mark.parametrize(
    'key,value,message',
    [
        ('study.lr_grid', (), r'config\.study\.lr_grid=\(\) is invalid'),
        ('study.lr_grid', (1e-3, 1e-3), r'config\.study\.lr_grid=.* distinct'),
        ('study.lr_grid', (0.0,), r'config\.study\.lr_grid=\(0\.0,\) is invalid'),
        ('study.split', 'holdout', r'config\.study\.split=.holdout. is invalid'),
        ('study.learning_rates', ('nope: 1e-3',), r'config\.study\.learning_rates entry .* names no encoder'),
        ('study.learning_rates', ('alibi: fast',), r'config\.study\.learning_rates entry .* is invalid'),
        ('study.comparisons', ('alibi vs rope',), r'config\.study\.comparisons entry .* is invalid'),
        ('study.comparisons', ('alibi vs abs at 7',), r'config\.study\.comparisons entry .* statistic .7.'),
        ('eval.position_draws', 0, r'config\.eval\.position_draws=0 is invalid'),
        ('eval.scored_tail', 16, r'config\.eval\.scored_tail=16 is invalid'),
    ],
)
def test_bad_protocol_input_is_named_and_nothing_is_written(tmp_path, key, value, message):
  config = tiny_study_config(**{key: value})
  workdir = tmp_path / 'never'
  with pytest.raises(config_lib.ConfigError, match=message):
    study.run_study(config, workdir, train_fn=lambda *a, **k: pytest.fail('trained'))
  assert not workdir.exists()


@pytest.mark.parametrize('choice', [('lr_grid', (1e-3, 3e-3)), ('learning_rates', ('alibi: 3e-3',))])
def test_reporting_the_split_choices_were_made_on_is_refused(tmp_path, choice):
  config = tiny_study_config()
  config.study.split = 'validation'
  config.study[choice[0]] = choice[1]
  with pytest.raises(config_lib.ConfigError, match=r"config\.study\.split='validation' is invalid for this study"):
    study.run_study(config, tmp_path / 'never', train_fn=lambda *a, **k: pytest.fail('trained'))
  assert not (tmp_path / 'never').exists()
  config.study.split = 'test'
  runner.validate_study(config)  # the same study reporting test is fine


def test_a_run_beyond_chance_is_marked_diverged_and_left_out_of_the_means(tmp_path, monkeypatch):
  def evaluate_run(model, data, **kwargs):
    huge = model.learning_rate > 0.05  # bits per char ~ 1e6: a blown-up run, not a result
    record = _fake_evaluate(lambda lr: 2.0, lambda lr: 2.0)(model, data, **kwargs)
    if huge:
      record['loss_by_length'] = {n: 8e5 for n in record['loss_by_length']}
      record['by_length'] = {n: 1.15e6 for n in record['by_length']}
    return record

  monkeypatch.setattr(protocol, 'evaluate_run', evaluate_run)
  monkeypatch.setattr(runner, 'document_totals_record', _no_document_totals)
  config = tiny_study_config(encoders=('alibi', 'abs: sinusoidal'))
  config.study.learning_rates = ('abs: 0.5',)
  config.study.seeds = (0, 1)
  results = study.run_study(config, tmp_path, train_fn=_fake_train([]))
  alibi, abs_run = results['runs']
  assert 'diverged' not in alibi and 'beyond chance' in abs_run['diverged']['message']
  assert set(abs_run['diverged_seeds']) == {'0', '1'}
  table = (tmp_path / 'results.md').read_text()
  assert '1150000' not in table and 'diverged at step' in table


def test_beyond_chance_by_hand():
  chance = np.log(256)  # 8 bits per byte; an untrained model scores about 9
  assert not protocol.beyond_chance(1.2 * chance, 256) and not protocol.beyond_chance(2 * chance - 0.01, 256)
  assert protocol.beyond_chance(2 * chance + 0.01, 256) and protocol.beyond_chance(float('nan'), 256)
  assert protocol.beyond_chance(None, 256)


def test_the_lengths_a_divergence_is_read_at_are_the_data_class_answer():
  """A language model (`diverged_at_every_length`) beyond chance at any length is diverged; a task only at its
  training length (a longer input failed is the finding)."""
  record = {'split': 'test', 'selection': {'loss': 1.0}, 'loss_by_length': {'8': 1.0, '32': 100.0}}
  every = protocol.diverged_marker(record, num_classes=256, every_length=True, train_length=8, step=5)
  assert every['step'] == 5 and 'test loss at 32 = 100.0' in every['message'] and 'at 8 =' not in every['message']
  assert protocol.diverged_marker(record, num_classes=256, every_length=False, train_length=8, step=5) is None
  assert (
      inputs.CorpusData.diverged_at_every_length,
      inputs.TaskData.diverged_at_every_length,
  ) == (True, False)


def test_a_curve_is_read_in_the_metric_column_it_carries():
  in_bits = protocol.position_curve(np.ones(4), np.ones(4), in_bits=True)
  in_nats = protocol.position_curve(np.ones(4), np.ones(4), in_bits=False)
  assert report.curve_value(in_bits) == 'bits_per_char' and report.curve_value(in_nats) == 'loss'
  merged = {'context_from': [1], 'context_to': [1], 'loss': [1.0], 'loss_per_seed': [[1.0]]}  # record._mean_curve's
  assert report.curve_value(merged) == 'loss'
  assert report.curve_value({**merged, 'bits_per_char': [1.4], 'bits_per_char_per_seed': [[1.4]]}) == 'bits_per_char'


def test_reevaluation_refuses_unfinished_and_names_corrupt_records(tmp_path):
  run_dir = tmp_path / 'trained' / 'runs' / 'alibi' / 'seed0'
  run_dir.mkdir(parents=True)
  base, _ = runner.split_study_config(tiny_study_config(encoders=('alibi',)))
  trained = runner.run_config(base, runner.Entry('alibi', 'alibi'), 0)
  (run_dir / 'config.json').write_text(json.dumps(trained.to_dict()))
  config = tiny_study_config(encoders=('alibi',))
  with config.unlocked():
    config.study.trained_workdir = str(tmp_path / 'trained')
  # Killed mid-training: checkpoints maybe, but no result.json.
  with pytest.raises(config_lib.ConfigError, match=r'seed0 has not finished \(no result\.json'):
    reevaluate.reevaluate_study(config, tmp_path / 'out')
  (run_dir / 'result.json').write_text(json.dumps({'steps': 1, 'finished': True}))
  with pytest.raises(config_lib.ConfigError, match=r'records step 1 of config\.train\.steps=3'):
    reevaluate.reevaluate_study(config, tmp_path / 'out')
  (run_dir / 'result.json').write_text('{"steps": 3, "fini')
  with pytest.raises(config_lib.ConfigError, match=r'result\.json is not valid JSON .*Restore it'):
    reevaluate.reevaluate_study(config, tmp_path / 'out')
  (run_dir / 'config.json').write_text('{"seed": 0, "mod')
  with pytest.raises(config_lib.ConfigError, match=r'config\.json is not valid JSON'):
    reevaluate.reevaluate_study(config, tmp_path / 'out')


def test_a_real_tiny_study_records_the_protocol(tmp_path):
  """nope and randomized RoPE, two seeds: every field the protocol records, from a real run."""
  config = tiny_study_config(encoders=('nope', 'rr: randomized(rope, max_position=64)'))
  config.study.seeds = (0, 1)
  config.eval.position_draws = 2
  config.study.comparisons = ('rr vs nope at 32', 'rr vs rr@0..L-1 at 32')
  results = study.run_study(config, tmp_path)
  saved = report.load_json(tmp_path / 'results.json')
  assert saved['split'] == 'test' and saved['protocol']['windows'].startswith('same_targets')
  assert saved['protocol']['scored_tail'] == 8 and saved['protocol']['position_draws'] == 2
  assert [r['name'] for r in saved['runs']] == ['nope', 'rr', 'rr@0..L-1']
  nope, rr, sequential = saved['runs']
  for run in (nope, rr):
    assert run['same_targets'] and len({s['fingerprint'] for s in run['scored_sets'].values()}) == 1
    assert run['lr_choice'] == 'fixed' and run['learning_rate'] == 1e-2
    assert run['position_curve']['context_to'][-1] == 32 and len(run['position_curve']['bits_per_char_per_seed']) == 2
  assert nope['scored_sets'] == rr['scored_sets']
  assert nope['positions'] == '0..L-1' and 'mean over 2 draws' in rr['positions']
  assert sequential['positions'] == '0..L-1' and sequential['by_length']['32'] != rr['by_length']['32']
  per_seed = report.load_json(tmp_path / 'runs' / 'rr' / 'seed1' / runner.RESULT_FILE)
  assert per_seed['finished'] and per_seed['selection']['split'] == 'validation' and per_seed['split'] == 'test'
  assert [c['statistic'] for c in saved['comparisons']] == [32, 32] and saved['comparisons'][0]['n'] == 2
  assert os.path.getsize(tmp_path / 'results_position.png') > 0
  text = (tmp_path / 'results.md').read_text()
  assert 'Paired differences' in text and 'sample standard deviation over seeds (ddof 1)' in text
  assert results['runs'][1]['by_length'] == rr['by_length']


def test_position_curve_bins_by_hand():
  # Positions 0..7 (contexts 1..8), losses 0..7 nats, 2 tokens each but position 3 with 6: bins (by context)
  # {1}, {2}, {3, 4}, {5}, {6, 7, 8}; a bin's loss is pooled over its tokens.
  tokens = np.array([2, 2, 2, 6, 2, 2, 2, 2], float)
  curve = protocol.position_curve(np.arange(8.0), tokens, in_bits=True)
  assert list(zip(curve['context_from'], curve['context_to'])) == [(1, 1), (2, 2), (3, 4), (5, 5), (6, 8)]
  assert curve['loss'] == pytest.approx([0.0, 1.0, (2 * 2 + 3 * 6) / 8, 4.0, 6.0])
  assert curve['tokens'] == [2.0, 2.0, 8.0, 2.0, 6.0]
  assert curve['bits_per_char'][1] == pytest.approx(1 / np.log(2))


def test_run_study_obeys_trained_workdir_and_trains_nothing(tmp_path):
  """The study owns config.study.trained_workdir: run_study re-evaluates that study's runs (the command line
  no longer decides it)."""
  run_dir = tmp_path / 'trained' / 'runs' / 'alibi' / 'seed0'
  run_dir.mkdir(parents=True)
  base, _ = runner.split_study_config(tiny_study_config(encoders=('alibi',)))
  (run_dir / 'config.json').write_text(json.dumps(runner.run_config(base, runner.Entry('alibi', 'alibi'), 0).to_dict()))
  config = tiny_study_config(encoders=('alibi',))
  with config.unlocked():
    config.study.trained_workdir = str(tmp_path / 'trained')
  with pytest.raises(config_lib.ConfigError, match=r'seed0 has not finished \(no result\.json'):
    runner.run_study(config, tmp_path / 'out', train_fn=lambda *a, **k: pytest.fail('must not train'))
