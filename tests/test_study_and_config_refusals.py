"""The study, suite, training config and corpus refuse what would silently go wrong: a re-evaluation into its
own workdir, a resume on another split, diverged seeds in a summary, writes outside the workdir lock, seeds
beyond 32 bits, sizes beyond memory, a corpus with nothing held out or that is not text.

Each test failed on the code before its fix (issue 36, part A)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import types

import ml_collections
import numpy as np
import pytest

from relpos_jax.study import protocol, report, runner, suite_summary
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import workdir_lock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_FILE = """
import json
import ml_collections

def get_config():
  return ml_collections.ConfigDict(json.loads({text!r}))
"""


def _env():
  return {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}  # one CPU device, as a user gets


def tiny_study_config(encoders=('alibi',)) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.model = ml_collections.ConfigDict(
      dict(encoder='nope', num_layers=1, model_dim=16, num_heads=2, mlp_ratio=2, dropout_rate=0.0, dtype='float32')
  )
  config.data = ml_collections.ConfigDict(
      dict(source='corpus', corpus='stdlib', max_train_bytes=300_000, train_length=8)
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
          lengths=(8, 16),
          batch_size=8,
          num_examples=4,
          pad_multiple=1,
          seed=0,
          num_tokens=64,
          max_tokens_per_batch=128,
      )
  )
  config.study = ml_collections.ConfigDict(dict(encoders=encoders, title='tiny'))
  return config


def _snapshot(directory) -> dict[str, str]:
  """{relative path: sha256} of every file under `directory` (what a refused command must leave as it was)."""
  found = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        found[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
  return found


def _fake_train(cfg, workdir, **kwargs):
  model = types.SimpleNamespace(learning_rate=cfg.optim.learning_rate)
  return types.SimpleNamespace(
      final_metrics={'loss': 1.0}, step=cfg.train.steps, params={'w': np.zeros(2)}, model=model
  )


def _fake_evaluate(model, data, *, lengths, split, train_length, metric, seed, draws, sequential_row, **options):
  """A different number on each split, so that a result read on one cannot pass for the other."""
  value = {'validation': 1.0, 'test': 2.0}[split] + seed / 100
  by_length = {str(n): value for n in lengths}
  record = {'split': split, 'positions': '0..L-1', 'by_length': by_length, 'loss_by_length': dict(by_length)}
  if options.get('selection', True):
    record['selection'] = {'split': 'validation', 'length': train_length, 'loss': 1.0}
  return record


# ------------------------------------------------------------------------------------------- a re-evaluation's workdir
def test_a_reevaluation_into_the_trained_studys_own_workdir_is_refused_and_writes_nothing(tmp_path):
  trained = tmp_path / 'trained'
  config = tiny_study_config()
  runner.run_study(config, trained)  # a real tiny study: config.json, checkpoints, result.json
  before = _snapshot(trained)
  again = tiny_study_config()
  again.study.trained_workdir = str(trained)
  again.eval.lengths = (8, 16, 32)
  os.symlink(trained, tmp_path / 'alias')
  for workdir in (trained, tmp_path / 'alias', str(trained) + '/'):
    with pytest.raises(config_lib.ConfigError, match=r'config.study.trained_workdir=.*trained.* is the --workdir'):
      runner.run_study(again, workdir)
    assert _snapshot(trained) == before
  runner.run_study(config, trained)  # the trained study still resumes (reuses its finished run)
  assert _snapshot(trained)['runs/alibi/seed0/result.json'] == before['runs/alibi/seed0/result.json']


# ------------------------------------------------------------------------------------------------------------ resuming
def test_a_study_resumed_on_another_split_is_refused_before_anything_is_written(tmp_path, monkeypatch):
  monkeypatch.setattr(protocol, 'evaluate_run', _fake_evaluate)
  monkeypatch.setattr(
      runner, 'document_totals_record', lambda ctx, model, token_nll=None: None
  )  # a fake model scores nothing
  config = tiny_study_config(encoders=('alibi', 'rope'))
  config.study.split = 'validation'
  runner.run_study(config, tmp_path, train_fn=_fake_train)
  assert report.load_json(tmp_path / 'results.json')['runs'][0]['by_length']['16'] == 1.0
  before = _snapshot(tmp_path)
  config.study.split = 'test'
  for finished_only in (False, True):
    with pytest.raises(config_lib.ConfigError, match=r"config.study.split='test'.*'validation'.*allowed"):
      runner.run_study(config, tmp_path, train_fn=_fake_train, finished_only=finished_only)
    assert _snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------------------ diverged seeds
def test_seeds_the_study_marks_diverged_do_not_count_in_the_suite_summary():
  marker = {'step': 3, 'message': 'evaluation beyond chance', 'beyond_chance': True}
  run = {
      'name': 'rope',
      'spec': 'rope',
      'seeds': [0, 1, 2],
      'by_length': {'4': 0.9, '8': 0.6},  # the means over seeds 0 and 2, as merge_seeds writes them
      'by_length_per_seed': {'4': [1.0, 0.75, 0.8], '8': [0.7, 0.75, 0.5]},
      'diverged_seeds': {'1': marker},
  }
  results = {'eval_lengths': [4, 8], 'train_length': 4, 'runs': [run], 'meta': {}}
  cell = suite_summary.summarize({'even_pairs': results})['cells']['even_pairs/rope']
  assert cell['token']['out_of_distribution']['per_seed'] == [0.7, 0.5]
  assert cell['out_of_distribution'] == pytest.approx(0.6) and cell['seeds'] == 2
  assert cell['in_distribution'] == pytest.approx(0.9)
  # Every seed diverged: no number at all, and the table says so.
  run['diverged'] = marker
  run['diverged_seeds'] = {'0': marker, '1': marker, '2': marker}
  summary = suite_summary.summarize({'even_pairs': results})
  cell = summary['cells']['even_pairs/rope']
  assert cell['out_of_distribution'] is None and cell['seeds'] == 0 and cell['diverged']
  assert '| even_pairs (not learned) | diverged |' in suite_summary.markdown(summary)


# ----------------------------------------------------------------------------------------------- writes under the lock
def test_finished_only_writes_nothing_in_a_workdir(tmp_path, monkeypatch):
  monkeypatch.setattr(protocol, 'evaluate_run', _fake_evaluate)
  monkeypatch.setattr(
      runner, 'document_totals_record', lambda ctx, model, token_nll=None: None
  )  # a fake model scores nothing
  config = tiny_study_config()
  runner.run_study(config, tmp_path, train_fn=_fake_train)
  with workdir_lock.held(tmp_path):  # another process is writing the study
    before = _snapshot(tmp_path)
    results = runner.run_study(config, tmp_path, finished_only=True)
    assert _snapshot(tmp_path) == before
  assert [r['name'] for r in results['runs']] == ['alibi']


def test_the_study_command_writes_its_outputs_only_under_the_lock(tmp_path, monkeypatch):
  """The entry point wrote results.* again after run_study had released the lock; with --finished_only it
  wrote them into a workdir another process held."""
  config = tiny_study_config()
  config_file = tmp_path / 'tiny.py'
  config_file.write_text(CONFIG_FILE.format(text=config.to_json()))
  workdir = tmp_path / 'study'
  with workdir_lock.held(workdir):
    done = subprocess.run(
        [sys.executable, '-m', 'experiments.length_generalization', f'--config={config_file}',
         f'--workdir={workdir}', '--finished_only'],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
  assert done.returncode == 0, done.stderr[-3000:]
  assert sorted(os.listdir(workdir)) == [workdir_lock.LOCK_FILE], done.stdout
  assert '| encoder |' in done.stdout  # the table is printed, not written


# --------------------------------------------------------------------------------------------------------------- seeds
@pytest.mark.parametrize('key', ['seed', 'eval.seed'])
@pytest.mark.parametrize('value', [2**32, 2**63])
def test_seeds_beyond_32_bits_are_refused_naming_the_key(key, value):
  config = tiny_study_config()
  del config['study']
  config_files.override(config, key, value)
  with pytest.raises(
      config_lib.ConfigError, match=rf'config.{key}={value} is invalid: allowed: an int >= 0 and < 4294967296'
  ):
    config_lib.validate(config)
  config_files.override(config, key, 2**32 - 1)
  config_lib.validate(config)


def test_study_seeds_beyond_32_bits_are_refused():
  config = tiny_study_config()
  config.study.seeds = (0, 2**32)
  with pytest.raises(config_lib.ConfigError, match=r'config.study.seeds=\(0, 4294967296\) is invalid: .*< 4294967296'):
    runner.validate_study(config)


# ------------------------------------------------------------------------------------------------------- the lock file
def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_left_alone(tmp_path):
  target = tmp_path / 'precious.txt'
  target.write_text('do not truncate me')
  workdir = tmp_path / 'run'
  workdir.mkdir()
  os.symlink(target, workdir / workdir_lock.LOCK_FILE)
  with pytest.raises(
      workdir_lock.WorkdirBusyError, match=r'\.writer\.lock is a symbolic link .*precious\.txt.*remove it'
  ):
    with workdir_lock.held(workdir):
      pass
  assert target.read_text() == 'do not truncate me'
  os.mkfifo(tmp_path / 'fifo')
  os.remove(workdir / workdir_lock.LOCK_FILE)
  os.symlink(tmp_path / 'fifo', workdir / workdir_lock.LOCK_FILE)
  with pytest.raises(workdir_lock.WorkdirBusyError, match='symbolic link'):
    with workdir_lock.held(workdir):
      pass


# ------------------------------------------------------------------------------------------------ sizes against memory
def _run_config(**overrides):
  config = tiny_study_config()
  del config['study']
  for key, value in overrides.items():
    config_files.override(config, key, value)
  return config


@pytest.mark.parametrize(
    'key,value,allowed',
    [
        ('model.num_layers', 10**6, rf'an int <= {config_lib.MAX_LAYERS}'),
        ('model.model_dim', 2**20, rf'an int <= {config_lib.MAX_MODEL_DIM}'),
        ('model.mlp_ratio', 10**9, rf'a number <= {config_lib.MAX_MLP_RATIO}'),
        ('train.batch_size', 2**40, rf'an int >= 1 and <= {config_lib.MAX_BATCH}'),
        ('eval.batch_size', 2**40, rf'an int >= 1 and <= {config_lib.MAX_BATCH}'),
    ],
)
def test_model_and_batch_sizes_have_an_upper_bound_named_with_the_key(key, value, allowed):
  with pytest.raises(config_lib.ConfigError, match=rf'config.{key}={value!r} is invalid.*allowed: {allowed}'):
    config_lib.validate(_run_config(**{key: value}))


@pytest.mark.parametrize(
    'overrides,named',
    [
        # Each fits its own bound, together they do not fit any machine: refused with the estimate.
        ({'model.model_dim': 16384, 'model.num_layers': 256, 'model.num_heads': 16}, 'parameters and optimizer state'),
        ({'data.train_length': 2**24, 'train.batch_size': 1024}, 'activations of one training batch'),
        ({'eval.lengths': (8, 2**28), 'eval.max_tokens_per_batch': None}, 'evaluation at length 268435456'),
    ],
)
def test_a_run_that_cannot_fit_in_memory_is_refused_with_the_estimate(overrides, named):
  with pytest.raises(config_lib.ConfigError, match=rf'needs at least .* GiB .*{named}.* has .* GiB'):
    config_lib.validate(_run_config(**overrides))


def test_task_lengths_beyond_memory_are_refused_before_training():
  config = _run_config()
  config.data = ml_collections.ConfigDict(
      dict(source='task', task='even_pairs', task_kwargs={}, min_length=1, max_length=10**9, num_buckets=1,
           loss_reduction='token_mean')
  )  # fmt: skip
  config.eval.lengths = (8,)
  config.eval.num_tokens = None
  config.eval.pad_multiple = 1
  config.model.encoder = 'rope'
  config.model.model_dim, config.model.mlp_ratio = 64, 16
  with pytest.raises(config_lib.ConfigError, match=r'needs at least .* GiB .*activations of one training batch'):
    config_lib.validate(config)


def _corpus_config(corpus, **overrides):
  config = _run_config(**{'data.corpus': str(corpus), **overrides})
  return config


def test_a_single_file_corpus_says_nothing_is_held_out(tmp_path):
  from relpos_jax.train import data_sources

  (tmp_path / 'one.txt').write_text('hello world, some text. ' * 400)
  with pytest.raises(
      config_lib.ConfigError,
      match=r"config.data.corpus=.*one.txt' is one file.*nothing is held out.*allowed: a directory",
  ):
    data_sources.build_data(config_lib.parse(_corpus_config(tmp_path / 'one.txt')))


def test_a_fifo_corpus_is_named_as_what_it_is(tmp_path):
  os.mkfifo(tmp_path / 'fifo')
  with pytest.raises(config_lib.ConfigError, match=r"config.data.corpus=.*fifo' is invalid: .*is not a regular file"):
    config_lib.validate(_corpus_config(tmp_path / 'fifo'))


def test_a_corpus_file_that_is_not_text_says_why(tmp_path):
  from relpos_jax.train import data_sources

  (tmp_path / 'latin1.txt').write_bytes('caf\xe9 '.encode('latin-1') * 100)
  with pytest.raises(config_lib.ConfigError, match=r'latin1.txt.* not text \(not UTF-8\)'):
    data_sources.build_data(config_lib.parse(_corpus_config(tmp_path / 'latin1.txt')))


def test_a_train_length_beyond_the_train_split_is_refused_before_training():
  from relpos_jax.train import data_sources

  with pytest.raises(
      config_lib.ConfigError, match=r'config.data.train_length=2000000 is invalid: .*train split .* allowed: <= \d+'
  ):
    data_sources.build_data(config_lib.parse(_run_config(**{'data.train_length': 2_000_000, 'eval.lengths': (8,)})))
