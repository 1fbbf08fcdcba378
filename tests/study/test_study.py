"""The study: entries, up-front validation, outputs, resume, and the report's table."""

from __future__ import annotations

import json
import os
import shutil
import types

import ml_collections
import numpy as np
import pytest

from relpos_jax import study
from relpos_jax.study import reevaluate, report, runner, stats
from relpos_jax.train import workdir_lock
from relpos_jax.train import config as config_lib
from relpos_jax.train import data_sources, inputs, loop


def tiny_study_config(encoders=('alibi', 'abs: sinusoidal')) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.model = ml_collections.ConfigDict(
      dict(encoder='nope', num_layers=1, model_dim=16, num_heads=2, mlp_ratio=2, dropout_rate=0.0, dtype='float32')
  )
  config.data = ml_collections.ConfigDict(
      dict(source='corpus', corpus='stdlib', max_train_bytes=1_000_000, train_length=8)
  )
  config.optim = ml_collections.ConfigDict(
      dict(
          learning_rate=1e-2,
          schedule='warmup_constant',
          warmup_steps=1,
          end_lr_fraction=1.0,
          weight_decay=0.0,
          b1=0.9,
          b2=0.98,
          eps=1e-9,
          grad_clip_norm=1.0,
      )
  )
  config.train = ml_collections.ConfigDict(
      dict(steps=3, batch_size=4, log_every=3, checkpoint_every=3, keep_checkpoints=1)
  )
  config.eval = ml_collections.ConfigDict(
      dict(
          every=0,
          lengths=(8, 16, 32),
          batch_size=8,
          num_examples=4,
          pad_multiple=1,
          seed=0,
          num_tokens=128,
          max_tokens_per_batch=128,
      )
  )
  config.study = ml_collections.ConfigDict(dict(encoders=encoders, title='tiny'))
  return config


def test_parse_entries_labels_and_errors():
  entries = runner.parse_entries(('alibi', 'rope+randomized: randomized(rope, max_position=64)'))
  assert entries == [
      runner.Entry('alibi', 'alibi'),
      runner.Entry('rope+randomized', 'randomized(rope, max_position=64)'),
  ]
  with pytest.raises(ValueError, match="label 't5\\(bidirectional=False\\)'"):
    runner.parse_entries(('t5(bidirectional=False)',))
  with pytest.raises(ValueError, match='repeats label'):
    runner.parse_entries(('alibi', 'alibi: alibi(learnable_slopes=True)'))
  with pytest.raises(ValueError, match='non-empty tuple'):
    runner.parse_entries('alibi')
  # A label is a directory under runs/: '.', '..' or a path would write the run elsewhere.
  for label in ('.', '..', '...', 'a/b', '../x', 'a\\b', ''):
    with pytest.raises(ValueError, match='has label'):
      runner.parse_entries((f'{label}: alibi',))


def test_bad_entry_is_rejected_before_any_training():
  config = tiny_study_config(encoders=('alibi', 'short: learned(max_length=16)'))
  calls = []
  with pytest.raises(ValueError, match="entry 'short'.*32 tokens"):
    runner.run_study(config, '/nonexistent/never-created', train_fn=lambda *a, **k: calls.append(a))
  assert not calls


def test_unknown_study_key_is_named():
  config = tiny_study_config()
  config.study.encoder = 'alibi'
  with pytest.raises(ValueError, match='config.study.encoder'):
    runner.validate_study(config)


def test_eval_batches_shrink_with_length_and_text_is_budgeted():
  eval_section = config_lib.Eval(
      every=0, lengths=(64,), batch_size=32, num_examples=1, pad_multiple=1, seed=0, max_tokens_per_batch=4096
  )
  assert inputs.eval_batch_size(eval_section, 64, num_devices=1) == 32
  assert inputs.eval_batch_size(eval_section, 1024, num_devices=1) == 4
  assert inputs.eval_batch_size(eval_section, 1024, num_devices=4) == 4
  assert inputs.eval_batch_size(eval_section, 4096, num_devices=4) == 4  # one row per device at least
  assert inputs.eval_batch_size(eval_section, 100_000, num_devices=1) == 1
  data = data_sources.build_data(config_lib_free_config())
  windows = {n: sum(int(b['loss_mask'].sum()) for b in data.eval_set(n)) for n in (8, 16, 32)}
  assert windows == {8: 128, 16: 128, 32: 128}  # the same amount of validation text at every length


def config_lib_free_config():
  base, _ = runner.split_study_config(tiny_study_config())
  return base


def test_study_writes_outputs_and_resumes(tmp_path):
  config = tiny_study_config()
  calls = []

  def counting_train(cfg, workdir, **kwargs):
    calls.append(cfg.encoder_spec)
    return loop.train(cfg, workdir, **kwargs)

  results = study.run_study(config, tmp_path, train_fn=counting_train)
  assert calls == ['alibi', 'sinusoidal']
  for name in ('results.json', 'results.md', 'results.png'):
    assert os.path.getsize(tmp_path / name) > 0
  saved = report.load_json(tmp_path / 'results.json')
  assert [r['name'] for r in saved['runs']] == ['alibi', 'abs']
  assert saved['eval_lengths'] == [8, 16, 32] and saved['metric'] == 'bits_per_char'
  assert saved['meta']['corpus_fingerprint'] == saved['meta']['data']['fingerprint']
  for run in results['runs']:
    values = np.array([run['by_length'][str(n)] for n in (8, 16, 32)])
    assert np.all(np.isfinite(values)) and np.all(values > 0) and run['steps'] == 3
  table = (tmp_path / 'results.md').read_text()
  assert '| abs (`sinusoidal`) |' in table and '32 (4×)' in table
  _assert_tensorboard_charts(tmp_path, results)

  # A second call reuses both finished encoders: nothing is trained again, results are identical.
  calls.clear()
  again = study.run_study(config, tmp_path, train_fn=counting_train)
  assert calls == []
  assert json.dumps(again['runs'], sort_keys=True) == json.dumps(results['runs'], sort_keys=True)
  _assert_tensorboard_charts(tmp_path, results)  # rewritten, not appended to


def _assert_tensorboard_charts(workdir, results):
  """One TensorBoard chart per encoder: its metric against the evaluation length (read back from the
  event files); each encoder's run directory has its training and evaluation scalars."""
  from relpos_jax.train import tensorboard

  charts = tensorboard.read_scalars(workdir)
  assert sorted(charts) == ['length_generalization/abs', 'length_generalization/alibi']
  for run in results['runs']:
    points = charts[f'length_generalization/{run["name"]}']
    assert [n for n, _ in points] == [8, 16, 32]
    np.testing.assert_allclose(
        [v for _, v in points], [run['by_length'][str(n)] for n in (8, 16, 32)], rtol=1e-6
    )  # TensorBoard keeps float32
    own = tensorboard.read_scalars(os.path.join(workdir, 'runs', run['name'], f'seed{run["seeds"][0]}'))
    # The study evaluates each run by its protocol (relpos_jax.study.protocol), not the run's own evaluation.
    assert own['train/loss'][-1][0] == 3 and not any(k.startswith('eval/') for k in own)


def test_interrupted_study_keeps_finished_encoders(tmp_path):
  config = tiny_study_config()

  def dies_on_second(cfg, workdir, **kwargs):
    if cfg.encoder_spec == 'sinusoidal':
      raise KeyboardInterrupt
    return loop.train(cfg, workdir, **kwargs)

  with pytest.raises(KeyboardInterrupt):
    study.run_study(config, tmp_path, train_fn=dies_on_second)
  partial = report.load_json(tmp_path / 'results.json')
  assert [r['name'] for r in partial['runs']] == ['alibi']
  calls = []
  study.run_study(
      config, tmp_path, train_fn=lambda cfg, wd, **kw: calls.append(cfg.encoder_spec) or loop.train(cfg, wd, **kw)
  )
  assert calls == ['sinusoidal']


def test_markdown_table_by_hand():
  results = {
      'metric': 'bits_per_char',
      'lower_is_better': True,
      'train_length': 10,
      'eval_lengths': [10, 20, 40],
      'runs': [
          {'name': 'a', 'spec': 'a', 'by_length': {'10': 2.0, '20': 2.5, '40': 3.0}},
          {'name': 'b', 'spec': 'b(x=1)', 'by_length': {'10': 1.0, '20': None, '40': 1.0}},
      ],
  }
  lines = report.markdown_table(results).splitlines()
  assert lines[0] == ('| encoder | 10 (1×) | 20 (2×) | 40 (4×) | in-dist mean | out-of-dist mean | ' '40 / train |')
  assert lines[2] == '| a | 2.000 | 2.500 | 3.000 | 2.000 | 2.750 | 1.50 |'
  assert lines[3] == '| b (`b(x=1)`) | 1.000 | — | 1.000 | 1.000 | 1.000 | 1.00 |'


def test_long_sweeps_show_a_subset_of_columns_but_average_all():
  lengths = list(range(41, 501))
  shown = report.display_lengths(lengths)
  assert shown[0] == 41 and shown[-1] == 500 and len(shown) == 10
  results = {
      'metric': 'accuracy',
      'lower_is_better': False,
      'train_length': 40,
      'eval_lengths': lengths,
      'runs': [{'name': 'a', 'spec': 'a', 'by_length': {str(n): (1.0 if n == 42 else 0.5) for n in lengths}}],
  }
  row = report.markdown_table(results).splitlines()[2].split(' | ')
  assert len(row) == 1 + 10 + 3
  assert row[-2] == f'{(0.5 * 459 + 1.0) / 460:.3f}'  # out-of-dist mean over all 460 lengths


def test_train_with_x_evaluate_with_y_reuses_the_trained_run(tmp_path):
  config = tiny_study_config(
      encoders=(
          'rope',
          'same: rope -> rope',
          'yarn: rope -> rope(scaling="yarn", factor=4.0, original_max_position=8)',
          'se: rope -> self_extend(rope, group_size=2, window=4)',
          'pi: alibi -> alibi(bidirectional=False)',
      )
  )
  trained = []

  def recording_train(cfg, workdir, **kwargs):
    result = loop.train(cfg, workdir, **kwargs)
    trained.append((cfg.encoder_spec, os.path.relpath(workdir, tmp_path / 'runs'), result.step))
    return result

  results = study.run_study(config, tmp_path, train_fn=recording_train)
  runs = {r['name']: r for r in results['runs']}
  # One training of rope, in the plain entry's directory; the others restore it. alibi trains once too.
  assert {(e, d) for e, d, _ in trained} == {('rope', 'rope/seed0'), ('alibi', 'pi.trained/seed0')}
  assert len(list((tmp_path / 'runs' / 'rope' / 'seed0' / 'checkpoints').iterdir())) >= 1
  assert runs['yarn']['trained_in'] == ['runs/rope/seed0'] and runs['yarn']['seeds'] == [0]
  # 'rope -> rope' is the trained model evaluated again: the same numbers, so the parameters did move over.
  assert runs['same']['by_length'] == runs['rope']['by_length']
  assert runs['yarn']['spec'].startswith('rope(scaling=') and runs['yarn']['train_spec'] == 'rope'
  assert runs['yarn']['by_length']['8'] != runs['rope']['by_length']['8']
  # Self-Extend with a window of 4 regroups distances within the training length already.
  assert runs['se']['by_length']['32'] != runs['rope']['by_length']['32']
  assert '| yarn (`rope(scaling=' in (tmp_path / 'results.md').read_text()


def test_an_evaluation_encoder_with_other_parameters_is_refused_before_training(tmp_path):
  config = tiny_study_config(encoders=('bad: rope -> t5(bidirectional=False)',))
  calls = []
  with pytest.raises(ValueError, match="entry 'bad'.*cannot take the parameters trained with 'rope'.*needs"):
    runner.run_study(config, tmp_path, train_fn=lambda *a, **k: calls.append(a))
  assert not calls
  with pytest.raises(ValueError, match='one arrow'):
    runner.parse_entries(('x: rope -> rope -> rope',))


def test_seeds_train_each_encoder_once_per_seed_and_resume_per_seed(tmp_path):
  config = tiny_study_config(encoders=('alibi',))
  config.study.seeds = (0,)
  calls = []

  def counting_train(cfg, workdir, **kwargs):
    calls.append((cfg.encoder_spec, cfg.seed))
    return loop.train(cfg, workdir, **kwargs)

  study.run_study(config, tmp_path, train_fn=counting_train)
  config.study.seeds = (0, 3)
  results = study.run_study(config, tmp_path, train_fn=counting_train)
  assert calls == [('alibi', 0), ('alibi', 3)]  # seed 0 reused, only seed 3 trained
  run = report.load_json(tmp_path / 'results.json')['runs'][0]
  assert run['seeds'] == [0, 3] and results['seeds'] == [0, 3]
  per_seed = run['by_length_per_seed']
  assert sorted(per_seed) == ['16', '32', '8'] and all(len(v) == 2 for v in per_seed.values())
  for n, values in per_seed.items():
    assert run['by_length'][n] == pytest.approx(np.mean(values))
  # The seed changes the initialisation and the data order: the two runs differ.
  assert per_seed['8'][0] != per_seed['8'][1]
  seed0 = report.load_json(tmp_path / 'runs' / 'alibi' / 'seed0' / runner.RESULT_FILE)
  assert seed0['seed'] == 0 and seed0['by_length']['8'] == per_seed['8'][0]
  table = (tmp_path / 'results.md').read_text()
  assert ' ± ' in table and 'seeds: 0, 3' in table


@pytest.mark.parametrize('seeds', [(), (0, 0), (-1,), ('0',), 0, (1.5,)])
def test_bad_seeds_are_named(seeds):
  config = tiny_study_config()
  config.study.seeds = seeds
  with pytest.raises(ValueError, match='config.study.seeds'):
    runner.validate_study(config)


def test_markdown_table_mean_and_std_over_seeds_by_hand():
  # Seeds give (2, 4) at length 10 and (3, 5) at 20: mean 3 ± sqrt(2), 4 ± sqrt(2); the ratios of the
  # two seeds are 1.5 and 1.25: mean 1.375 ± 0.177 (not the ratio of the means, 4 / 3 = 1.33).
  results = {
      'metric': 'bits_per_char',
      'lower_is_better': True,
      'train_length': 10,
      'eval_lengths': [10, 20],
      'runs': [
          {
              'name': 'a',
              'spec': 'a',
              'seeds': [0, 1],
              'by_length': {'10': 3.0, '20': 4.0},
              'by_length_per_seed': {'10': [2.0, 4.0], '20': [3.0, 5.0]},
          }
      ],
  }
  row = report.markdown_table(results).splitlines()[2]
  assert row == '| a | 3.000 ± 1.414 | 4.000 ± 1.414 | 3.000 ± 1.414 | 4.000 ± 1.414 | 1.38 ± 0.177 |'
  assert stats.std([2.0, 4.0]) == pytest.approx(2**0.5) and stats.std([2.0]) is None


def test_plot_draws_a_band_per_encoder_with_several_seeds(tmp_path, monkeypatch):
  from matplotlib.axes import Axes

  bands = []
  original = Axes.fill_between
  monkeypatch.setattr(
      Axes,
      'fill_between',
      lambda self, x, y1, y2, **kw: bands.append((list(x), list(y1), list(y2))) or original(self, x, y1, y2, **kw),
  )
  results = {
      'metric': 'bits_per_char',
      'lower_is_better': True,
      'train_length': 10,
      'eval_lengths': [10, 20],
      'runs': [
          {
              'name': 'a',
              'spec': 'a',
              'by_length': {'10': 3.0, '20': 4.0},
              'by_length_per_seed': {'10': [2.0, 4.0], '20': [3.0, 5.0]},
          },
          {'name': 'one-seed', 'spec': 'b', 'by_length': {'10': 1.0, '20': 1.0}},
      ],
  }
  report.plot(results, str(tmp_path / 'p.png'))
  assert len(bands) == 1  # only the multi-seed run has a band
  x, low, high = bands[0]
  assert x == [10, 20] and low == pytest.approx([3 - 2**0.5, 4 - 2**0.5])
  assert high == pytest.approx([3 + 2**0.5, 4 + 2**0.5])


def test_finished_only_reports_what_has_finished_and_trains_nothing(tmp_path):
  config = tiny_study_config(encoders=('alibi', 'abs: sinusoidal'))
  config.study.seeds = (0,)
  config.study.encoders = ('alibi',)
  study.run_study(config, tmp_path)  # alibi, seed 0
  config.study.encoders = ('alibi', 'abs: sinusoidal')
  config.study.seeds = (0, 1)
  results = study.run_study(
      config, tmp_path, finished_only=True, train_fn=lambda *a, **k: pytest.fail('finished_only trained')
  )
  assert [(r['name'], r['seeds']) for r in results['runs']] == [('alibi', [0])]
  assert results['meta']['finished_only'] and results['seeds'] == [0, 1]
  assert '| alibi [seeds 0] |' in report.markdown_table(results)
  assert report.load_json(tmp_path / 'results.json')['seeds'] == [0]  # read-only: nothing rewritten


def _fake_result(base, metric='bits_per_char'):
  """What a finished run returns, without training (the study only reads these fields)."""
  metrics = {f'eval/{n}/{metric}': 1.0 + n / 100 for n in base.eval.lengths}
  return types.SimpleNamespace(
      final_metrics={**metrics, metric: 1.0, 'loss': 0.7},
      step=base.train.steps,
      params={'w': np.zeros(3)},
      model=loop.build_model(base),  # untrained: the study evaluates it by its protocol
  )


def test_a_diverged_encoder_is_marked_diverged_not_printed_as_a_number(tmp_path):
  config = tiny_study_config()
  base, _ = runner.split_study_config(config)

  def diverges_on_sinusoidal(cfg, workdir, **kwargs):
    if cfg.encoder_spec == 'sinusoidal':
      raise loop.DivergedError('training diverged: ... from update 2 ...', step=2, count=1)
    return _fake_result(base)

  results = study.run_study(config, tmp_path, train_fn=diverges_on_sinusoidal)
  saved = report.load_json(tmp_path / 'results.json')
  abs_run = saved['runs'][1]
  assert abs_run['diverged']['step'] == 2 and set(abs_run['by_length'].values()) == {None}
  assert 'diverged' not in saved['runs'][0]
  table = (tmp_path / 'results.md').read_text()
  assert '| abs (`sinusoidal`) | diverged at step 2 |' in table and 'nan' not in table.lower()
  # A diverged encoder is a finished result: a rerun reuses it (the divergence is deterministic).
  again = study.run_study(config, tmp_path, train_fn=lambda *a, **k: pytest.fail('retrained'))
  assert again['runs'] == results['runs']


def test_finished_results_on_another_corpus_are_not_reused(tmp_path, monkeypatch):
  config = tiny_study_config()
  base, _ = runner.split_study_config(config)
  study.run_study(config, tmp_path, train_fn=lambda *a, **k: _fake_result(base))
  saved = report.load_json(tmp_path / 'runs' / 'alibi' / 'seed0' / runner.RESULT_FILE)
  assert saved['data'] == {'fingerprint': data_sources.build_data(base).describe()['fingerprint']}

  class OtherCorpus:  # the same config, but the stdlib now points at other sources

    def describe(self):
      return {'source': 'corpus', 'fingerprint': '0123456789abcdef'}

    def require_split(self, split, lengths):
      pass

    def protocol_record(self, lengths, split):  # what the study records of the source (nothing here)
      return {}

  monkeypatch.setattr(data_sources, 'build_data', lambda config: OtherCorpus())
  with pytest.raises(ValueError, match=r'runs/alibi/seed0 holds a finished run on other data.*0123456789abcdef'):
    study.run_study(config, tmp_path, train_fn=lambda *a, **k: pytest.fail('must not train'))


@pytest.mark.parametrize(
    'variant,task',
    [
        ('lm.py:study', None),
        ('lm.py:study,long', None),
        ('lm.py:inference_extension', None),
        ('algorithmic.py:study', 'even_pairs'),
        ('algorithmic.py:published,study', 'reverse_string'),
        ('lm.py:long_context', None),
        ('lm.py:long_context,contextual', None),
        ('lm.py:cross_corpus', None),
        ('lm.py:cross_corpus,bpe', None),
    ],
)
@pytest.mark.usefixtures('austen_laid_out_if_absent')
def test_shipped_study_variants_validate(variant, task):
  """Each study is a variant of its training config: the same run plus a `study` section, checked up front (the
  English corpus, an optional system package, laid out where it is absent: tests/conftest.py)."""
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  config = study.load_study_config(os.path.join(repo, 'configs', variant))
  base, entries = runner.validate_study(config)
  assert len(entries) >= (3 if variant.endswith(',long') else 7) and isinstance(base, config_lib.Config)
  assert getattr(base.data, 'task', None) == task


# ------------------------------------------------------------------- reevaluate: a trained study, new lengths
def test_reevaluate_reuses_trained_runs_at_new_lengths_with_blockwise(tmp_path):
  trained = tiny_study_config(encoders=('alibi', 'r: rope'))
  trained.eval.lengths = (8, 16, 64)
  results = study.run_study(trained, tmp_path / 'trained')
  config = tiny_study_config(encoders=('alibi', 'r: rope'))
  # The same shortest and longest lengths: the same anchors and scored tail, so the same targets.
  config.eval.lengths = (8, 64)
  config.model.attention_implementation = 'blockwise'
  config.model.attention_block_size = 8
  config.study.trained_workdir = str(tmp_path / 'trained')
  long = reevaluate.reevaluate_study(config, tmp_path / 'long')
  saved = report.load_json(tmp_path / 'long' / 'results.json')
  assert saved['eval_lengths'] == [8, 64] and [r['name'] for r in saved['runs']] == ['alibi', 'r']
  for trained_run, run in zip(results['runs'], long['runs']):
    # Length 64 was evaluated by the trained study (explicit path) on the same text: the same number.
    np.testing.assert_allclose(run['by_length']['64'], trained_run['by_length']['64'], rtol=1e-5)
    assert run['scored_sets']['64'] == trained_run['scored_sets']['64'] and run['evaluated_steps'] == [3]
    assert run['config']['model']['attention_implementation'] == 'blockwise'
    assert run['config']['train'] == trained_run['config']['train']
    # The rate is the trained run's, and the row says the trained study chose it (here: its fixed rate).
    assert run['learning_rate'] == trained_run['learning_rate'] and run['lr_choice'] == 'trained: fixed'
  # Rerunning reuses the saved results.
  assert reevaluate.reevaluate_study(config, tmp_path / 'long')['runs'] == long['runs']


def test_reevaluate_evaluates_a_trained_run_with_an_inference_time_extension(tmp_path):
  """'label: X -> Y' reads the trained study's run of X (whatever its label there) and evaluates Y on it."""
  trained = tiny_study_config(encoders=('r: rope',))
  trained.eval.lengths = (8, 16)
  study.run_study(trained, tmp_path / 'trained')
  config = tiny_study_config(
      encoders=(
          'r: rope',
          'same: rope -> self_extend(rope, group_size=1, window=16)',  # no grouping: RoPE itself
          'grouped: rope -> self_extend(rope, group_size=4, window=2)',
      )
  )
  config.eval.lengths = (8, 16)
  config.study.trained_workdir = str(tmp_path / 'trained')
  runs = {r['name']: r for r in reevaluate.reevaluate_study(config, tmp_path / 'ext')['runs']}
  assert runs['same']['trained_in'] == runs['r']['trained_in']
  np.testing.assert_allclose(runs['same']['by_length']['16'], runs['r']['by_length']['16'], rtol=1e-5)
  assert abs(runs['grouped']['by_length']['16'] - runs['r']['by_length']['16']) > 1e-4
  saved = report.load_json(tmp_path / 'ext' / 'runs' / 'grouped' / 'seed0' / runner.RESULT_FILE)
  assert saved['spec'] == 'self_extend(rope, group_size=4, window=2)' and saved['train_spec'] == 'rope'
  # One key set with run_study's records: the trained run's directory relative to this study's workdir.
  assert saved['trained_in'] == os.path.join('..', 'trained', 'runs', 'r', 'seed0')
  assert os.path.isdir(os.path.join(tmp_path, 'ext', saved['trained_in']))
  assert saved['config']['model']['encoder'] == 'self_extend(rope, group_size=4, window=2)'
  config.study.encoders = ('x: alibi -> alibi',)
  with pytest.raises(config_lib.ConfigError, match=r"'x'.*no finished run of 'alibi' at seed 0"):
    reevaluate.reevaluate_study(config, tmp_path / 'other')
  # One writer per directory, as for a trained study: a second re-evaluation of it is refused, untouched.
  config.study.encoders = ('r: rope',)
  with workdir_lock.held(tmp_path / 'ext'):
    with pytest.raises(workdir_lock.WorkdirBusyError, match=str(tmp_path / 'ext')):
      reevaluate.reevaluate_study(config, tmp_path / 'ext')


def test_reevaluate_finished_only_reports_what_was_evaluated_and_evaluates_nothing(tmp_path):
  """An evaluation cut short (a lent machine's time ran out): --finished_only writes the report of the (encoder,
  seed) evaluations on disk, drops what was never evaluated, and evaluates nothing new."""
  trained = tiny_study_config(encoders=('alibi', 'r: rope'))
  trained.study.seeds = (0, 1)
  trained.eval.lengths = (8, 16)
  study.run_study(trained, tmp_path / 'trained')
  config = tiny_study_config(
      encoders=('alibi', 'r: rope', 'grouped: rope -> self_extend(rope, group_size=4, window=2)')
  )
  config.study.seeds = (0, 1)
  config.eval.lengths = (8, 16)
  config.study.trained_workdir = str(tmp_path / 'trained')
  full = {r['name']: r for r in reevaluate.reevaluate_study(config, tmp_path / 'ext')['runs']}
  os.remove(tmp_path / 'ext' / 'runs' / 'alibi' / 'seed1' / runner.RESULT_FILE)  # never evaluated
  shutil.rmtree(tmp_path / 'ext' / 'runs' / 'grouped')
  partial = reevaluate.reevaluate_study(config, tmp_path / 'ext', finished_only=True)
  runs = {r['name']: r for r in partial['runs']}
  assert list(runs) == ['alibi', 'r'] and runs['alibi']['seeds'] == [0] and runs['r']['seeds'] == [0, 1]
  assert runs['r']['by_length'] == full['r']['by_length'] and partial['meta']['finished_only'] is True
  assert not os.path.exists(tmp_path / 'ext' / 'runs' / 'alibi' / 'seed1' / runner.RESULT_FILE)
  assert not os.path.exists(tmp_path / 'ext' / 'runs' / 'grouped')
  assert [r['name'] for r in report.load_json(tmp_path / 'ext' / 'results.json')['runs']] == ['alibi', 'r']


def test_a_randomized_encoder_whose_positions_cannot_hold_the_longest_window_is_refused_up_front(tmp_path):
  """Evaluated as published (ordered random positions from [0, max_position)), a window longer than
  max_position cannot be placed: refused before anything trains or evaluates, naming the entry and the bound."""
  config = tiny_study_config(encoders=('alibi', 'rr: randomized(rope, max_position=16)'))
  config.eval.lengths = (8, 32)
  with pytest.raises(
      config_lib.ConfigError, match=r"entry 'rr' .*max_position=16 is below the longest evaluation length, 32"
  ):
    study.run_study(config, tmp_path / 'w')
  assert not os.path.exists(tmp_path / 'w')
  config.study.trained_workdir = str(tmp_path / 'trained')  # and a re-evaluation of trained runs
  with pytest.raises(config_lib.ConfigError, match=r'max_position >= 32 at training'):
    reevaluate.reevaluate_study(config, tmp_path / 'long')


def test_reevaluate_errors_name_the_problem(tmp_path):
  config = tiny_study_config(encoders=('alibi',))
  with pytest.raises(config_lib.ConfigError, match='trained_workdir is missing'):
    reevaluate.reevaluate_study(config, tmp_path)
  config.study.trained_workdir = str(tmp_path / 'nothing')
  with pytest.raises(config_lib.ConfigError, match='holds no trained run'):
    reevaluate.reevaluate_study(config, tmp_path / 'out')


def test_a_finished_run_is_reused_whatever_train_tensorboard_said(tmp_path):
  """Results written when the shipped configs set train.tensorboard to the machine's True/False are reused
  now that they leave it None; any other difference still refuses the reuse."""
  config = {'seed': 0, 'train': {'steps': 10, 'tensorboard': None}}
  saved = {'config': {'seed': 0, 'train': {'steps': 10, 'tensorboard': True}}, 'data': {'d': 1}}
  runner._check_saved(saved, str(tmp_path), config, {'d': 1}, None)
  with pytest.raises(config_lib.ConfigError, match='another config'):
    runner._check_saved(saved, str(tmp_path), {**config, 'train': {'steps': 11, 'tensorboard': None}}, {'d': 1}, None)


@pytest.mark.slow  # six tiny runs and their document totals: about 50 s on two shared cores
def test_a_tiny_study_stores_document_totals_and_reports_bootstrap_and_holm(tmp_path):
  """Two seeds of alibi, abs and randomized RoPE on a corpus: the 0..L-1 runs store per-document totals at the
  training and the longest length that add up to their bits per character; the randomized one stores none.
  The comparisons carry the pooled document bootstrap (whose point estimate is the seed mean difference) and the
  Holm-adjusted seed p-values, and results.md shows both."""
  config = tiny_study_config(encoders=('alibi', 'abs: sinusoidal', 'rr: randomized(rope, max_position=64)'))
  config.study.seeds = (0, 1)
  config.study.comparisons = ('alibi vs abs', 'rr vs alibi at 32')
  results = study.run_study(config, tmp_path)
  for label in ('alibi', 'abs'):
    for seed in (0, 1):
      saved = report.load_json(tmp_path / 'runs' / label / f'seed{seed}' / runner.RESULT_FILE)
      assert sorted(saved['document_totals']) == ['32', '8']  # the training length 8 and the longest 32
      for length, totals in saved['document_totals'].items():
        assert len(totals['documents']) == len(totals['bits']) == len(totals['characters']) >= 2
        assert max(totals['documents']) < totals['num_documents'] and min(totals['characters']) > 0
        assert sum(totals['bits']) / sum(totals['characters']) == pytest.approx(saved['by_length'][length], rel=1e-5)
  assert 'document_totals' not in report.load_json(tmp_path / 'runs' / 'rr' / 'seed0' / runner.RESULT_FILE)
  saved = report.load_json(tmp_path / 'results.json')
  assert json.dumps(saved['comparisons'], sort_keys=True) == json.dumps(results['comparisons'], sort_keys=True)
  found = {(c['a'], c['b'], c['statistic']): c for c in saved['comparisons']}
  assert sorted(found, key=str) == sorted(
      [('alibi', 'abs', 'train'), ('alibi', 'abs', 'ood'), ('alibi', 'abs', 'longest'), ('rr', 'alibi', 32)], key=str
  )
  for statistic in ('train', 'longest'):
    c = found[('alibi', 'abs', statistic)]
    boot = c['bootstrap']
    assert boot['mean'] == pytest.approx(c['mean'], rel=1e-5, abs=1e-9)  # pooled: the seed mean difference
    assert boot['low'] <= boot['mean'] <= boot['high'] and boot['n_documents'] >= 2
  assert found[('alibi', 'abs', 'ood')]['bootstrap_missing'] == 'several lengths'
  assert found[('rr', 'alibi', 32)]['bootstrap_missing'] == 'random positions'
  p_values = [c['p_value'] for c in saved['comparisons']]
  adjusted = stats.holm(p_values)['adjusted']
  for c, p in zip(saved['comparisons'], adjusted):
    assert c['p_holm'] == pytest.approx(p) and c['holm_family'] == 4 and c['resolved_holm'] == (p < 0.05)
  text = (tmp_path / 'results.md').read_text()
  assert '| p (Holm) | resolved (Holm) | documents | document bootstrap 95% |' in text
  assert '| — | — (random positions) |' in text and '| — | — (several lengths) |' in text


def test_document_totals_are_stored_at_the_longest_and_the_evaluated_training_length():
  base = config_lib_free_config()  # trains at 8, evaluates at 8, 16, 32
  assert runner.document_totals_lengths(base) == [8, 32]
  base = base.derive(eval={'lengths': (16, 32)})  # 'train' is then the in-distribution mean: no single length
  assert runner.document_totals_lengths(base) == [32]
