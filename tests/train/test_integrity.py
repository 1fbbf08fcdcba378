"""Runs that can't be fooled: resume integrity, damaged run directories, full disks, divergence."""

from __future__ import annotations

import errno
import json
import os
import shutil
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from relpos_jax import data as data_lib
from relpos_jax.train import checkpoint as checkpoint_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs, loop
from relpos_jax.train.checkpoint import CheckpointError, Checkpoints, CheckpointWriteError
from relpos_jax.train.config import ConfigError
from relpos_jax.train.metrics import read_metrics


def _params(result_or_state):
  return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(result_or_state.params))]


def _saved_params(workdir, config, step):
  model, _ = loop.load_model(workdir, config, step=step)
  return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(loop.split_model(model)[1]))]


def _assert_equal(a, b):
  assert len(a) == len(b) > 0
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)


@pytest.fixture(scope='module')
def run_to_10(tmp_path_factory, lm_config, lm_data):
  """A tiny LM run stopped after update 10: checkpoints 5 and 10, records of steps 4 and 8."""
  config = lm_config()
  workdir = str(tmp_path_factory.mktemp('pristine') / 'run')
  loop.train(config, workdir, stop_after=10, data=lm_data(config))
  assert Checkpoints(workdir, keep=2).all_steps() == [5, 10]
  return workdir


def _copy(workdir, tmp_path):
  target = str(tmp_path / 'run')
  shutil.copytree(workdir, target)
  return target


# ------------------------------------------------------------------------------- what the run directory says
@pytest.mark.parametrize('missing', [loop.CONFIG_FILE, loop.DATA_FILE])
def test_checkpoints_without_their_records_are_refused_and_nothing_written(
    run_to_10, tmp_path, lm_config, lm_data, missing
):
  workdir = _copy(run_to_10, tmp_path)
  os.remove(os.path.join(workdir, missing))
  other = lm_config()
  other.seed = 7  # Another run entirely: it must not adopt these checkpoints.
  with pytest.raises(ConfigError, match=f'no {missing}.*cannot be verified.*To start fresh'):
    loop.train(other, workdir, data=lm_data(other))
  assert not os.path.exists(os.path.join(workdir, missing))  # The refusal wrote nothing.


def test_a_refused_resume_leaves_the_directory_resumable(run_to_10, tmp_path, lm_config, lm_data):
  workdir = _copy(run_to_10, tmp_path)
  before = {name: open(os.path.join(workdir, name)).read() for name in (loop.CONFIG_FILE, loop.DATA_FILE)}
  other = lm_config()
  other.model.num_heads = 4
  with pytest.raises(ConfigError, match='config.model.num_heads'):
    loop.train(other, workdir, data=lm_data(other))
  assert {name: open(os.path.join(workdir, name)).read() for name in before} == before
  config = lm_config()
  assert loop.train(config, workdir, stop_after=11, data=lm_data(config)).step == 11


def test_other_data_is_refused(run_to_10, tmp_path, lm_config):
  workdir = _copy(run_to_10, tmp_path)
  recorded = json.load(open(os.path.join(workdir, loop.DATA_FILE)))
  assert recorded['fingerprint'] and recorded['num_val_tokens'] > 0
  # The same config, but the corpus now holds other text (e.g. another stdlib directory).
  text_dir = tmp_path / 'text'
  text_dir.mkdir()
  for n in range(4):
    (text_dir / f'f{n}.py').write_text(f'# file {n}\n' + 'x = 1\n' * 400)
  config = lm_config()
  other = inputs.CorpusData(
      config_lib.parse(config), corpus=data_lib.Corpus.from_paths([str(text_dir)], val_fraction=0.5)
  )
  with pytest.raises(ConfigError, match='other data.*fingerprint.*cannot be resumed'):
    loop.train(config, workdir, data=other)


def test_truncated_records_name_their_file(run_to_10, tmp_path, lm_config, lm_data):
  workdir = _copy(run_to_10, tmp_path)
  path = os.path.join(workdir, loop.CONFIG_FILE)
  text = open(path).read()
  open(path, 'w').write(text[: len(text) // 2])
  config = lm_config()
  with pytest.raises(ConfigError, match=f'{path} is not valid JSON'):
    loop.train(config, workdir, data=lm_data(config))
  with pytest.raises(ConfigError, match=f'{path} is not valid JSON'):
    loop.load_model(workdir)


def test_a_torn_last_metrics_line_is_dropped_with_a_warning(run_to_10, tmp_path, lm_config, lm_data):
  workdir = _copy(run_to_10, tmp_path)
  path = os.path.join(workdir, 'metrics.jsonl')
  with open(path, 'a') as f:
    f.write('{"step": 12, "loss": 2.')  # a write cut short
  config = lm_config()
  with pytest.warns(UserWarning, match='line 3 .*torn'):
    result = loop.train(config, workdir, stop_after=10, data=lm_data(config))
  assert result.step == 10
  with warnings.catch_warnings():
    warnings.simplefilter('error')  # the resume rewrote the file without the torn line
    assert [r['step'] for r in read_metrics(workdir)] == [4, 8]
  # Anything else that is not a record is an error naming the file and the line.
  lines = open(path).read().splitlines()
  open(path, 'w').write('\n'.join([lines[0], 'garbage', *lines[1:]]) + '\n')
  with pytest.raises(ValueError, match=f'{path}: line 2 is not a JSON record'):
    read_metrics(workdir)


# --------------------------------------------------------------------------------------- damaged checkpoints
def _files(step_dir):
  return [os.path.join(root, f) for root, _, files in os.walk(step_dir) for f in files]


def _truncate_data(step_dir):
  for path in _files(step_dir):
    if os.path.basename(os.path.dirname(path)) == 'd':
      with open(path, 'r+b') as f:
        f.truncate(10)


def _zero_data(step_dir):
  for path in _files(step_dir):
    if os.path.basename(os.path.dirname(path)) == 'd':
      size = os.path.getsize(path)
      with open(path, 'wb') as f:
        f.write(b'\0' * size)


def _delete_manifest(step_dir):
  for path in _files(step_dir):
    if os.path.basename(path) == 'manifest.ocdbt':
      os.remove(path)


def _empty_metadata(step_dir):
  for path in _files(step_dir):
    if os.path.basename(path) == '_METADATA':
      open(path, 'w').close()


DAMAGE = {
    'truncated data': _truncate_data,
    'zeroed data': _zero_data,
    'deleted manifest': _delete_manifest,
    'empty metadata': _empty_metadata,
}


@pytest.mark.parametrize('damage', sorted(DAMAGE))
def test_a_broken_latest_checkpoint_falls_back_to_the_newest_intact_one(
    run_to_10, tmp_path, lm_config, lm_data, damage
):
  config = lm_config()
  workdir = _copy(run_to_10, tmp_path)
  DAMAGE[damage](os.path.join(workdir, 'checkpoints', '10'))
  with pytest.warns(UserWarning, match=r'step 10 \(.*\)\. Using step 5, the newest intact one\. Moved to'):
    result = loop.train(config, workdir, stop_after=10, data=lm_data(config))
  # Replayed 6..10 from step 5: exactly the parameters the intact checkpoint 10 held.
  _assert_equal(_params(result), _saved_params(run_to_10, config, 10))
  assert Checkpoints(workdir, keep=2).all_steps() == [5, 10]  # step 10 saved again
  assert os.listdir(os.path.join(workdir, checkpoint_lib.BROKEN_DIR)) == ['10']


def test_a_stray_empty_step_directory_is_set_aside(run_to_10, tmp_path, lm_config, lm_data):
  config = lm_config()
  workdir = _copy(run_to_10, tmp_path)
  os.makedirs(os.path.join(workdir, 'checkpoints', '15'))
  with pytest.warns(UserWarning, match='step 15 .*Using step 10'):
    result = loop.train(config, workdir, stop_after=10, data=lm_data(config))
  _assert_equal(_params(result), _saved_params(run_to_10, config, 10))


def test_no_readable_checkpoint_stops_with_one_message(run_to_10, tmp_path, lm_config, lm_data):
  config = lm_config()
  workdir = _copy(run_to_10, tmp_path)
  for step in ('5', '10'):
    _zero_data(os.path.join(workdir, 'checkpoints', step))
  with pytest.raises(
      CheckpointError,
      match=r'no checkpoint in .* can be read \(step 10: .*step 5: .*\)\. ' r'Delete the broken step directories',
  ):
    loop.train(config, workdir, data=lm_data(config))


# ------------------------------------------------------------------------------------------------ full disk
def test_a_full_disk_stops_the_run_at_once_with_one_io_error(tmp_path, lm_config, lm_data, monkeypatch):
  def no_space(self, *args, **kwargs):
    raise OSError(errno.ENOSPC, 'No space left on device')

  monkeypatch.setattr(ocp.CheckpointManager, 'save', no_space)
  config = lm_config()
  seen = []
  with pytest.raises(
      CheckpointWriteError,
      match=r'could not save step 5 to .*checkpoints \(OSError: '
      r'\[Errno 28\] No space left on device\); training stopped',
  ):
    loop.train(config, str(tmp_path / 'run'), hooks=[lambda step, *_: seen.append(step)], data=lm_data(config))
  assert seen == [1, 2, 3, 4]  # nothing trained past the first failed save


def test_a_failed_asynchronous_save_surfaces_at_the_next_save(tmp_path, lm_config, lm_data, monkeypatch):
  failed = []
  original = ocp.CheckpointManager.check_for_errors

  def check(self):
    original(self)
    if self.all_steps():  # the background write of step 5 failed after the save call returned
      failed.append(True)
      raise RuntimeError('RESOURCE_EXHAUSTED: write failed: No space left on device\n<orbax internals>')

  monkeypatch.setattr(ocp.CheckpointManager, 'check_for_errors', check)
  config = lm_config()
  seen = []
  with pytest.raises(
      CheckpointWriteError,
      # The failed background write is step 5's, so no complete checkpoint is left to resume from.
      match=r'could not save step 5 .*\(RuntimeError: RESOURCE_EXHAUSTED: write failed: No space '
      r'left on device\).*start again',
  ) as info:
    loop.train(config, str(tmp_path / 'run'), hooks=[lambda step, *_: seen.append(step)], data=lm_data(config))
  assert seen[-1] == 7 and '<orbax internals>' not in str(info.value)  # stopped at the next log step (8)
  assert info.value.__cause__ is None and info.value.__suppress_context__  # one error, not a chain


# ------------------------------------------------------------------------------------------------ divergence
def test_a_diverging_run_stops_naming_the_update_and_never_saves_non_finite_params(tmp_path, lm_config, lm_data):
  config = lm_config()
  config.optim.learning_rate = 1e6
  config.optim.grad_clip_norm = None
  config.train.checkpoint_every = 1
  workdir = str(tmp_path / 'run')
  with pytest.raises(loop.DivergedError, match=r'not finite in 1 update\(s\) in a row from update (\d+) ') as info:
    loop.train(config, workdir, data=lm_data(config))
  step = info.value.step
  assert 1 < step < config.train.steps
  saved = Checkpoints(workdir, keep=2).all_steps()
  assert saved and max(saved) == step - 1  # the update that went non-finite was never saved
  for s in saved:
    assert all(np.all(np.isfinite(x)) for x in _saved_params(workdir, config, s))


def test_non_finite_updates_are_skipped_in_the_step_and_counted_in_a_row(lm_config, lm_data):
  config = lm_config()
  config.optim.learning_rate = 1e6
  config.optim.grad_clip_norm = None
  config.train.max_nonfinite_steps = 3
  config.train.log_every = 1  # the loop checks at every step
  snapshots = []

  def keep(step, state, metrics):
    snapshots.append((step, bool(metrics['finite']), _params(state)))

  with pytest.raises(
      loop.DivergedError, match=r'3 update\(s\) in a row from update (\d+).*max_nonfinite_steps=3'
  ) as info:
    loop.train(config, hooks=[keep], data=lm_data(config))
  first_bad = info.value.step
  by_step = {s: (finite, p) for s, finite, p in snapshots}
  assert not by_step[first_bad][0] and by_step[first_bad - 1][0]
  # A skipped update leaves the parameters exactly as they were (the third stops the run before hooks).
  for s in (first_bad, first_bad + 1):
    assert not by_step[s][0]
    _assert_equal(by_step[s][1], by_step[first_bad - 1][1])
  assert first_bad + 2 not in by_step


def test_the_divergence_counter():
  mesh = jax.make_mesh((1,), ('data',), devices=jax.devices()[:1])
  guard = loop.NonFiniteGuard(2, mesh)
  for step, finite in enumerate([True, False, True, False, False, True, False, False]):
    guard.update(jnp.asarray(finite), step)
  with pytest.raises(loop.DivergedError, match='from update 4 ') as info:
    guard.check(type('C', (), {'optim': type('O', (), {'learning_rate': 1.0})})())
  assert info.value.step == 4 and info.value.count == 2


def test_max_nonfinite_steps_is_validated(lm_config):
  config = lm_config()
  config.train.max_nonfinite_steps = 0
  with pytest.raises(ConfigError, match='config.train.max_nonfinite_steps'):
    config_lib.validate(config)


# ------------------------------------------------------------------------------------------ validation split
def test_a_validation_split_too_small_for_the_eval_budget_warns_with_the_numbers(lm_config):
  config = lm_config()
  config.data.max_train_bytes = 600_000
  config.eval.lengths = (16, 32)
  config.eval.num_tokens = 4096
  corpus = data_lib.Corpus.stdlib(max_train_bytes=600_000)
  assert corpus.num_val_files == 1 and corpus.num_val_tokens < 4096
  n = corpus.num_val_tokens
  windows = (n - 1 - 32) // 16 + 1  # anchors 32, 48, ... (windows of up to 32 inputs, scored tail 16)
  with pytest.warns(
      UserWarning,
      match=rf'config.eval.num_tokens=4096 asks for more validation text.*'
      rf'{n} bytes, so evaluation scores {windows * 16} tokens \({windows} windows.*instead of 4096',
  ):
    data = inputs.CorpusData(config_lib.parse(config), corpus=corpus)
  assert sum(int(b['loss_mask'].sum()) for b in data.eval_set(16)) == windows * 16
