"""The resolution study end to end with a stand-in model (seconds): outputs, resume, choices, errors, intervals.

The stand-in has the ViT's interface (relpos_jax.nn.vit.ViT: encoder spec, pool, any grid at call time,
return_entropy) but is a per-patch MLP: it is defined here, in the tests only, so the study is tested without
the grid encoders.
"""

import json
import math
import os
import shutil

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from relpos_jax import resources
from relpos_jax.study import resolution, stats
from relpos_jax.train import config as config_lib

resolution_config = resources.config_module('studies/resolution')

STAND_IN_ENCODERS = ('relu', 'tanh')


class StandIn(nnx.Module):
  """A per-patch MLP with mean pooling; 'encoder' picks the activation ('relu' or 'tanh')."""

  def __init__(
      self,
      *,
      encoder,
      num_classes,
      patch_size=1,
      in_channels=1,
      model_dim=64,
      num_heads=4,
      num_layers=2,
      mlp_ratio=4,
      pool='mean',
      rngs,
  ):
    if encoder not in STAND_IN_ENCODERS:
      raise ValueError(f'unknown encoder spec {encoder!r}')
    self.encoder, self.pool, self.patch_size, self.num_layers = encoder, pool, patch_size, num_layers
    self.embed = nnx.Linear(in_channels * patch_size**2, model_dim, rngs=rngs)
    self.hidden = nnx.Linear(model_dim, model_dim * mlp_ratio, rngs=rngs)
    self.head = nnx.Linear(model_dim * mlp_ratio, num_classes, rngs=rngs)

  def __call__(self, images, *, train=False, rng=None, return_entropy=False):
    b, h, w, c = images.shape
    p = self.patch_size
    x = images.reshape(b, h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, h // p, w // p, p * p * c)
    act = nnx.relu if self.encoder == 'relu' else jnp.tanh
    x = act(self.hidden(act(self.embed(x))))
    logits = self.head(x if self.pool == 'none' else x.mean(axis=(1, 2)))
    if return_entropy:  # uniform attention over the (h/p)(w/p) tokens, as a stand-in's "entropy"
      return logits, jnp.full((self.num_layers,), jnp.log((h // p) * (w // p)), jnp.float32)
    return logits


def _config(**overrides) -> ml_collections.ConfigDict:
  config = resolution_config.get_config()
  config.encoders = STAND_IN_ENCODERS
  config.tasks = ('life', 'count')
  config.train_side, config.eval_sides = 4, (4, 8)
  config.steps, config.batch_size, config.warmup_steps = 4, 8, 1
  config.seeds = (0, 1)
  config.lr_grid = (1e-3, 3e-2)
  config.eval_examples, config.eval_batch_size = 12, 8
  config.comparisons = ('relu vs tanh', 'tanh vs relu at 8')
  config.model.model_dim, config.model.mlp_ratio = 8, 1
  for k, v in overrides.items():
    config[k] = v
  return config


def test_default_config_parses():
  for name in ('resolution', 'resolution_study', 'resolution_full'):
    for arg in (None, 'fashion_mnist'):
      settings = resolution.parse_config(resources.config_module(f'studies/{name}').get_config(arg))
      assert settings.eval_sides == (7, 14, 21, 28) and settings.train_side == 7
  with pytest.raises(ValueError, match=r"configs/studies/resolution\.py: argument 'bogus' is invalid"):
    resolution_config.get_config('bogus')
  legacy = resources.config_module('resolution')  # the variant names before the studies files: aliases
  with pytest.raises(ValueError, match='unknown variant'):
    legacy.get_config('bogus')
  with pytest.raises(ValueError, match='two protocols'):
    legacy.get_config('study,full')


def test_end_to_end_and_resume(tmp_path):
  calls = []

  def model_fn(**kwargs):
    calls.append(kwargs['encoder'])
    return StandIn(**kwargs)

  results = resolution.run_resolution_study(_config(), tmp_path, model_fn=model_fn)
  for name in ('results.json', 'results.md', 'results.png', 'results_entropy.png'):
    assert os.path.getsize(tmp_path / name) > 0
  assert results['meta']['trained'] == 2 * 2 * 3 and results['meta']['reused'] == 0  # 2 rates + 1 seed each
  life = {r['name']: r for r in results['tasks']['life']['runs']}
  assert set(life) == set(STAND_IN_ENCODERS)
  row = life['relu']
  assert row['seeds'] == [0, 1] and set(row['accuracy']) == {'4', '8'} and set(row['exact_match']) == {'4', '8'}
  assert len(row['accuracy_per_seed']['8']) == 2
  assert row['accuracy']['8'] == pytest.approx(np.mean(row['accuracy_per_seed']['8']))
  # The stand-in's entropy is log N: 2 layers at side 4 (16 tokens) and 8 (64 tokens).
  np.testing.assert_allclose(row['entropy']['4'], [math.log(16)] * 2, rtol=1e-6)
  np.testing.assert_allclose(row['entropy']['8'], [math.log(64)] * 2, rtol=1e-6)
  # The learning rate is the grid's lowest validation loss at seed 0 (the recorded grid).
  grid = {float(k): v for k, v in row['lr_grid'].items()}
  assert row['lr_choice'] == 'grid' and row['learning_rate'] == min(grid, key=grid.get)
  assert 'exact_match' not in results['tasks']['count']['runs'][0]
  # The floor: the most frequent label's share of the same test examples (count: 10 classes, 12 examples).
  settings = resolution.parse_config(_config())
  labels = resolution.make_task(settings, 'count').batch(8, 12, settings.data_seed, 'test', 0)['labels']
  assert results['tasks']['count']['majority_baseline']['8'] == pytest.approx(np.bincount(labels).max() / 12)
  assert 0.5 < results['tasks']['life']['majority_baseline']['4'] < 1  # dead cells are the majority
  # Comparisons: 'relu vs tanh' at both sides, 'tanh vs relu at 8' at one; per task.
  comps = results['tasks']['count']['comparisons']
  assert [(c['a'], c['b'], c['side']) for c in comps] == [('relu', 'tanh', 4), ('relu', 'tanh', 8), ('tanh', 'relu', 8)]
  assert comps[1]['mean'] == pytest.approx(-comps[2]['mean']) and comps[1]['n'] == 2
  markdown = (tmp_path / 'results.md').read_text()
  assert '## life' in markdown and 'exact match per board' in markdown and 'Paired differences' in markdown
  assert '| majority class (the floor) |' in markdown
  saved = json.loads((tmp_path / 'results.json').read_text())
  assert saved['tasks']['life']['runs'][0]['accuracy'] == results['tasks']['life']['runs'][0]['accuracy']
  run_file = tmp_path / 'runs' / 'life' / 'relu' / f'lr{row["learning_rate"]:g}' / 'seed1' / 'result.json'
  assert json.loads(run_file.read_text())['run_config']['seed'] == 1

  calls.clear()
  again = resolution.run_resolution_study(_config(), tmp_path, model_fn=model_fn)
  assert again['meta']['trained'] == 0 and again['meta']['reused'] == 12
  saved = [json.loads(p.read_text()) for p in tmp_path.rglob('result.json')]
  assert again['meta']['run_seconds'] == pytest.approx(sum(r['train_seconds'] + r['eval_seconds'] for r in saved))
  assert f"the 12 runs (the rate grid included) took {again['meta']['run_seconds'] / 60:,.0f} minutes summed" in (
      resolution.markdown(again)
  )
  assert len(calls) == 4  # only the up-front check builds models (2 tasks x 2 encoders); no run trains
  assert again['tasks'] == results['tasks']

  more = resolution.run_resolution_study(_config(seeds=(0, 1, 2)), tmp_path, model_fn=model_fn)
  assert more['meta']['trained'] == 4 and more['meta']['reused'] == 12  # the new seed only


def test_finished_only_reports_what_has_finished_and_trains_and_writes_nothing(tmp_path):
  from relpos_jax.train import workdir_lock

  done = resolution.run_resolution_study(_config(tasks=('count',)), tmp_path, model_fn=StandIn)
  shutil.rmtree(tmp_path / 'runs' / 'count' / 'tanh' / 'lr0.001')  # tanh's grid unfinished: no rate chosen yet
  before = {p: p.read_bytes() for p in tmp_path.rglob('*') if p.is_file()}
  calls = []

  def model_fn(**kwargs):
    calls.append(kwargs['encoder'])
    return StandIn(**kwargs)

  with workdir_lock.held(tmp_path):  # the study's own process may hold the workdir meanwhile
    partial = resolution.run_resolution_study(
        _config(tasks=('count',), seeds=(0, 1, 2)), tmp_path, model_fn=model_fn, finished_only=True
    )
  assert calls == ['relu', 'tanh']  # the up-front model check only: nothing trained
  assert partial['meta']['trained'] == 0
  after = {p: p.read_bytes() for p in tmp_path.rglob('*') if p.is_file()}
  assert {p: b for p, b in after.items() if p.name != workdir_lock.LOCK_FILE} == {
      p: b for p, b in before.items() if p.name != workdir_lock.LOCK_FILE
  }  # (the lock file is this test's own holder's)
  (row,) = partial['tasks']['count']['runs']
  assert row['name'] == 'relu' and row['seeds'] == [0, 1]  # seed 2 has not run
  assert row['accuracy'] == done['tasks']['count']['runs'][0]['accuracy']
  assert partial['unfinished'] == [
      {'task': 'count', 'encoder': 'relu', 'finished_seeds': [0, 1]},
      {'task': 'count', 'encoder': 'tanh', 'finished_seeds': []},
  ]
  markdown = resolution.markdown(partial)
  assert 'Not finished: count / relu (2 of 3 seeds), count / tanh (0 of 3 seeds).' in markdown
  assert 'relu (`relu`) [seeds 0, 1]' in markdown


def test_changed_config_is_not_reused(tmp_path):
  resolution.run_resolution_study(_config(tasks=('count',), seeds=(0,), lr_grid=None), tmp_path, model_fn=StandIn)
  with pytest.raises(config_lib.ConfigError, match=r'runs/count/relu/lr0.003/seed0 holds a finished run of another'):
    resolution.run_resolution_study(
        _config(tasks=('count',), seeds=(0,), lr_grid=None, steps=5), tmp_path, model_fn=StandIn
    )


@pytest.mark.parametrize(
    'text, message',
    [
        ('{"run_config": {"seed"', r'runs/count/relu/lr0.003/seed0/result.json is not valid JSON'),
        ('[1, 2]', r"seed0/result.json is not a run's record: expected an object with \['run_config'\], found list"),
        ('{"test": {}}', r"seed0/result.json is not a run's record: .* found \['test'\]. Remove its directory"),
    ],
)
def test_a_damaged_result_is_refused_naming_the_file(tmp_path, text, message):
  """A truncated or foreign result.json in the workdir (a kill mid-write on another tool, an edit) is a one-line
  error naming it, in a resume and in finished_only alike, not a JSON or key traceback."""
  config = _config(tasks=('count',), seeds=(0,), lr_grid=None)
  resolution.run_resolution_study(config, tmp_path, model_fn=StandIn)
  (tmp_path / 'runs' / 'count' / 'relu' / 'lr0.003' / 'seed0' / 'result.json').write_text(text)
  for finished_only in (False, True):
    with pytest.raises(config_lib.ConfigError, match=message):
      resolution.run_resolution_study(config, tmp_path, model_fn=StandIn, finished_only=finished_only)


def test_a_resume_whose_eval_batches_cover_other_entropy_examples_is_refused(tmp_path):
  """eval_batch_size changes no loss or accuracy, so it is not in a run's config; but the entropy is measured on
  whole batches: with entropy_examples=8, batches of 3 cover 9 examples where batches of 8 covered 8. Refused,
  naming the key; batches of 4 cover the same 8 and resume."""
  settings = dict(tasks=('count',), seeds=(0,), lr_grid=None, entropy_examples=8)
  first = resolution.run_resolution_study(_config(**settings), tmp_path, model_fn=StandIn)
  assert first['tasks']['count']['runs'][0]['entropy']
  with pytest.raises(
      config_lib.ConfigError,
      match=r'config.eval_batch_size=3 is invalid for the finished run in .*seed0: its attention entropy covers 8 '
      r'test examples per side, batches of 3 cover 9 \(config.entropy_examples=8\)',
  ):
    resolution.run_resolution_study(_config(**settings, eval_batch_size=3), tmp_path, model_fn=StandIn)
  again = resolution.run_resolution_study(_config(**settings, eval_batch_size=4), tmp_path, model_fn=StandIn)
  assert again['meta']['trained'] == 0 and again['tasks']['count']['runs'] == first['tasks']['count']['runs']


def test_same_test_examples_for_every_encoder_and_seed():
  seen = []

  class Recording:
    """The task, recording every evaluation batch it hands out."""

    def __init__(self, task):
      self.task = task

    def __getattr__(self, name):
      return getattr(self.task, name)

    def batch(self, side, batch_size, seed, split, step):
      out = self.task.batch(side, batch_size, seed, split, step)
      if split != 'train':
        seen.append((side, seed, split, step, out['images'].tobytes()))
      return out

  config = _config(tasks=('direction',), lr_grid=None, steps=1, warmup_steps=0)
  settings = resolution.parse_config(config)
  task = Recording(resolution.make_task(settings, 'direction'))
  entries = resolution.parse_entries(settings.encoders)
  a = resolution.train_and_evaluate(settings, task, entries[0], 0, 1e-3, StandIn)
  first = list(seen)
  b = resolution.train_and_evaluate(settings, task, entries[1], 1, 1e-3, StandIn)
  assert set(a['test']) == {'4', '8'} and a['validation']['num_examples'] == 12
  assert seen[len(first) :] == first  # the same examples, whichever encoder and seed
  assert {s[1] for s in first} == {settings.data_seed} and {s[2] for s in first} == {'validation', 'test'}
  assert {s[0] for s in first if s[2] == 'test'} == {4, 8}
  assert b['num_params'] == a['num_params']
  assert a['test']['8']['entropy_examples'] == 12  # entropy_examples (32) >= eval_examples: every batch
  fewer = resolution.parse_config(
      _config(tasks=('direction',), lr_grid=None, steps=1, warmup_steps=0, entropy_examples=5)
  )
  c = resolution.train_and_evaluate(fewer, task, entries[0], 0, 1e-3, StandIn)
  assert c['test']['8']['entropy_examples'] == 8  # the first batch (8 examples) covers 5
  assert c['test']['8']['accuracy'] == a['test']['8']['accuracy']  # the accuracy still counts all 12


def test_paired_interval_on_hand_made_numbers():
  results = {
      'comparison_requests': [{'a': 'A', 'b': 'B', 'sides': [14]}],
      'tasks': {
          't': {
              'runs': [
                  {'name': 'A', 'seeds': [0, 1, 2], 'accuracy_per_seed': {'14': [0.9, 0.8, 0.85]}},
                  {
                      'name': 'B',
                      'seeds': [2, 0, 1],
                      'accuracy_per_seed': {'14': [0.6, 0.7, 0.75]},
                  },  # seed order differs
              ]
          }
      },
  }
  (c,) = resolution.comparisons(results, 't')
  # d = (0.9 - 0.7, 0.8 - 0.75, 0.85 - 0.6) = (0.2, 0.05, 0.25): mean 1/6, sample std 0.104083,
  # t_{0.975, 2} = 4.302653, half width 4.302653 * 0.104083 / sqrt(3) = 0.258555.
  assert c['seeds'] == [0, 1, 2] and c['n'] == 3
  assert c['mean'] == pytest.approx(1 / 6) and c['std'] == pytest.approx(0.1040833, abs=1e-6)
  assert c['half_width'] == pytest.approx(0.258555, abs=1e-5)
  assert c['low'] == pytest.approx(1 / 6 - 0.258555, abs=1e-5) and not c['resolved']
  assert c == {**c, **stats.paired_difference([0.9, 0.8, 0.85], [0.7, 0.75, 0.6])}


def test_holm_adjusts_over_every_comparison_of_the_page():
  # Two tasks, one comparison each at two sides: the family is all four (m = 4), not one task's two.
  per_seed = {'14': [0.8, 0.84, 0.88], '21': [0.5, 0.52, 0.49]}  # at 14: differences 0.10, 0.14, 0.18
  other = {'14': [0.7, 0.7, 0.7], '21': [0.5, 0.5, 0.5]}
  runs = [{'name': 'A', 'seeds': [0, 1, 2], 'accuracy_per_seed': per_seed}]
  runs.append({'name': 'B', 'seeds': [0, 1, 2], 'accuracy_per_seed': other})
  results = {
      'comparison_requests': [{'a': 'A', 'b': 'B', 'sides': [14, 21]}],
      'tasks': {'t': {'runs': runs}, 'u': {'runs': runs}},
      'protocol': {},
  }
  for name in results['tasks']:
    results['tasks'][name]['comparisons'] = resolution.comparisons(results, name)
  resolution.adjust_over_page(results)
  rows = [c for name in ('t', 'u') for c in results['tasks'][name]['comparisons']]
  raw = [stats.paired_p_value(per_seed[s], other[s]) for s in ('14', '21')] * 2
  assert [c['p_value'] for c in rows] == pytest.approx(raw)
  # Holm by hand: the two p-values appear twice each; sorted p1 <= p1 <= p2 <= p2 get 4 p1, max(4 p1, 3 p1), ...
  small, large = sorted(raw[:2])
  expected_small, expected_large = min(1.0, 4 * small), min(1.0, max(4 * small, 2 * large))
  for c in rows:
    assert c['p_holm'] == pytest.approx(expected_small if c['p_value'] == small else expected_large)
    assert c['resolved_holm'] == (c['p_holm'] < 0.05)
  assert results['protocol']['holm_family'] == 4
  assert min(c['p_value'] for c in rows) < 0.05 and not any(c['resolved_holm'] for c in rows)  # Holm bites


@pytest.mark.parametrize(
    'overrides, message',
    [
        ({'tasks': ('life', 'lif')}, r"config.tasks entry 'lif' is unknown: allowed: \('life'"),
        ({'eval_sides': (4, 1)}, r'config.eval_sides=\(4, 1\) is invalid: allowed: .*>= 2'),
        ({'train_side': 1}, r'config.train_side=1 is invalid: allowed: an int >= 2'),
        (
            {'encoders': ('relu', 'sigmoid'), 'comparisons': ()},
            r"config.encoders entry 'sigmoid' \(encoder 'sigmoid'.*unknown encoder spec",
        ),
        ({'comparisons': ('relu vs gelu',)}, r"config.comparisons entry 'relu vs gelu' is invalid"),
        ({'comparisons': ('relu vs tanh at 5',)}, r"config.comparisons entry 'relu vs tanh at 5' has side '5'"),
        ({'task_kwargs': {'count': {'max_cont': 3}}}, r"config.task_kwargs.count=.* no parameter\(s\) \['max_cont'\]"),
        ({'task_kwargs': {'shift': {}}}, r'config.task_kwargs.shift names no task of config.tasks'),
        ({'task_kwargs': {'count': {'max_count': 20}}}, r"config.train_side=4 is invalid for task 'count'.*>= 5"),
        ({'steps': 0}, r'config.steps=0 is invalid: allowed: an int >= 1'),
        ({'warmup_steps': 4}, r'config.warmup_steps=4 is invalid with config.steps=4'),
        ({'lr_grid': (1e-3, 1e-3)}, r'config.lr_grid=\(0.001, 0.001\) is invalid: allowed: a tuple of distinct'),
        ({'seeds': (0, 0)}, r'config.seeds=\(0, 0\) is invalid'),
        (
            {'tasks': ('fashion_mnist_canvas',), 'data_dir': '/nonexistent'},
            r"config.data_dir='/nonexistent'.*apt-get install -y dataset-fashion-mnist",
        ),
    ],
)
def test_bad_config_names_the_key(tmp_path, overrides, message):
  with pytest.raises(config_lib.ConfigError, match=message):
    resolution.run_resolution_study(_config(**overrides), tmp_path / 'w', model_fn=StandIn)
  assert not (tmp_path / 'w').exists()  # refused before anything is written


def test_model_pool_is_checked():
  config = _config()
  config.model.pool = 'max'
  with pytest.raises(
      config_lib.ConfigError, match=r"config.model.pool='max' is invalid: allowed: one of \('mean', 'cls'\)"
  ):
    resolution.parse_config(config)


def test_fashion_mnist_protocols_end_to_end(tmp_path, fashion_mnist_files):
  fashion_mnist_files(tmp_path / 'fm')
  config = _config(
      tasks=tuple(resolution.FASHION_MNIST_TASKS),
      data_dir=str(tmp_path / 'fm'),
      task_kwargs={name: {'num_validation': 4} for name in resolution.FASHION_MNIST_TASKS},
      train_side=7,
      eval_sides=(7, 14),
      seeds=(0,),
      lr_grid=None,
      comparisons=(),
  )
  results = resolution.run_resolution_study(config, tmp_path / 'w', model_fn=StandIn)
  for name in resolution.FASHION_MNIST_TASKS:
    task = results['tasks'][name]
    assert task['task']['patch_size'] == 4 and task['task']['split_sizes'] == {'train': 20, 'validation': 4, 'test': 8}
    np.testing.assert_allclose(task['runs'][0]['entropy']['14'], [math.log(14 * 14)] * 2, rtol=1e-6)
  bad = _config(
      **{
          **{k: config[k] for k in ('tasks', 'data_dir', 'task_kwargs', 'seeds', 'lr_grid', 'comparisons')},
          'train_side': 7,
          'eval_sides': (7, 10),
      }
  )
  with pytest.raises(
      config_lib.ConfigError,
      match=r"config.eval_sides=\(7, 10\) is invalid for task 'fashion_mnist_upsample' \(side 10 tokens = 40 pixels"
      r'.*multiple of 28',
  ):
    resolution.run_resolution_study(bad, tmp_path / 'w2', model_fn=StandIn)


def test_finished_runs_are_re_reported_without_the_fashion_mnist_files(tmp_path, fashion_mnist_files):
  """finished_only needs no data set (a fresh machine re-reports the committed study): each Fashion-MNIST task
  is the one its runs recorded, every row and comparison as with the files, the majority baseline (it needs
  the test labels) marked absent; a config the records do not match, and a workdir without runs, are refused."""
  fashion_mnist_files(tmp_path / 'fm')
  config = _config(
      tasks=('count', 'fashion_mnist_canvas'),
      data_dir=str(tmp_path / 'fm'),
      task_kwargs={'fashion_mnist_canvas': {'num_validation': 4}},
      train_side=7,
      eval_sides=(7, 14),
      seeds=(0,),
      lr_grid=None,
      comparisons=('relu vs tanh',),
  )
  trained = resolution.run_resolution_study(config, tmp_path / 'w', model_fn=StandIn)
  shutil.rmtree(tmp_path / 'fm')
  again = resolution.run_resolution_study(config, tmp_path / 'w', model_fn=StandIn, finished_only=True)
  assert again['unfinished'] == [] and again['meta']['reused'] == 4
  assert again['tasks']['count'] == trained['tasks']['count']
  image = dict(again['tasks']['fashion_mnist_canvas'])
  assert image.pop('majority_baseline') is None
  assert image.pop('data_absent').startswith(f"config.data_dir={str(tmp_path / 'fm')!r} does not exist")
  assert image == {k: v for k, v in trained['tasks']['fashion_mnist_canvas'].items() if k != 'majority_baseline'}
  assert '| majority class (the floor) | n/a | n/a | |' in resolution.markdown(again)
  with pytest.raises(config_lib.ConfigError, match=r"config.data_dir='.*fm' \(task 'fashion_mnist_canvas'\).*exist"):
    resolution.run_resolution_study(config, tmp_path / 'w', model_fn=StandIn)  # training needs the data
  with pytest.raises(config_lib.ConfigError, match=r"config.data_dir='.*fm' \(task 'fashion_mnist_canvas'\).*exist"):
    resolution.run_resolution_study(config, tmp_path / 'empty', model_fn=StandIn, finished_only=True)
  config.task_kwargs = {'fashion_mnist_canvas': {'num_validation': 5}}
  with pytest.raises(
      config_lib.ConfigError, match=r'runs/fashion_mnist_canvas/relu/.*result.json records task .* 5 validation'
  ):
    resolution.run_resolution_study(config, tmp_path / 'w', model_fn=StandIn, finished_only=True)


def test_one_writer_per_workdir(tmp_path):
  from relpos_jax.train import workdir_lock

  with workdir_lock.held(tmp_path):
    with pytest.raises(workdir_lock.WorkdirBusyError, match=str(tmp_path)):
      resolution.run_resolution_study(_config(tasks=('count',), seeds=(0,), lr_grid=None), tmp_path, model_fn=StandIn)
  assert not (tmp_path / 'runs').exists()


def test_an_augmented_encoder_trains_with_a_key_per_step_and_evaluates_on_the_clean_grid():
  """augment_coords draws its coordinates from the step's key in training; a run is deterministic per seed, and
  differs from the base encoder's run (the draw moved the coordinates), while evaluation reads the clean grid."""
  config = _config(tasks=('direction',), lr_grid=None, steps=2, warmup_steps=0, eval_sides=(4,))
  config.model.model_dim = 16  # rope_axial: a head of 8 (a multiple of 2 x 2 axes)
  config.encoders = ('rope_axial', 'aug: augment_coords(rope_axial, jitter=1.5)')
  config.comparisons = ()
  settings = resolution.parse_config(config)
  task = resolution.make_task(settings, 'direction')
  base, augmented = resolution.parse_entries(settings.encoders)
  runs = [resolution.train_and_evaluate(settings, task, e, 0, 1e-2, resolution.vit_model) for e in (base, augmented)]
  again = resolution.train_and_evaluate(settings, task, augmented, 0, 1e-2, resolution.vit_model)
  assert runs[1]['test']['4']['loss'] == again['test']['4']['loss']  # the key per step is the seed's
  assert runs[1]['train_loss'] != runs[0]['train_loss']
  assert math.isfinite(runs[1]['test']['4']['loss'])
