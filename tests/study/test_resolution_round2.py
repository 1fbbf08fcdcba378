"""The resolution study's round-two protocol (issue 49; configs/studies/resolution_round2.py) at toy sizes: the rate
chosen at a selection seed outside the reported ones (scored on validation only), the edge check past the grid's
top, class-token rows beside the mean-pooled ones, the Holm family of distinct, informative comparisons stated on
the page, and the binomial standard error beside the seed spread."""

import json
import math

import pytest

from relpos_jax.study import resolution, stats
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from tests.study.test_resolution import StandIn, _config

ROUND2 = 'configs/studies/resolution_round2.py'


def _round2(**overrides):
  protocol = dict(
      selection_seed=7,
      edge_rates=(1e-1,),
      extra_pools={'cls': ('relu',)},
      family_tasks=('life', 'count'),
      comparisons=('relu vs tanh', 'relu@cls vs relu'),
  )
  return _config(**{**protocol, **overrides})


def test_the_rate_is_chosen_at_the_selection_seed_and_that_seed_is_not_reported(tmp_path):
  results = resolution.run_resolution_study(_round2(), tmp_path, model_fn=StandIn)
  saved = [json.loads(p.read_text()) for p in tmp_path.rglob('result.json')]
  selection = [r for r in saved if r['run_config']['seed'] == 7]
  reported = [r for r in saved if r['run_config']['seed'] != 7]
  # life: relu, tanh; count: relu, tanh, relu@cls -- 5 rows, each 2 selection rates + 2 seeds (+ edge runs)
  assert {r['run_config']['seed'] for r in reported} == {0, 1} and len(reported) == 5 * 2
  assert all(r['run_config'].get('selection_only') and 'test' not in r for r in selection)
  assert all('selection_only' not in r['run_config'] and set(r['test']) == {'4', '8'} for r in reported)
  rows = [row for task in results['tasks'].values() for row in task['runs']]
  assert len(rows) == 5
  for row in rows:
    assert row['seeds'] == [0, 1] and row['selection_seed'] == 7
    grid = {float(k): v for k, v in row['lr_grid'].items()}
    assert row['learning_rate'] == min(grid, key=grid.get)
    # the edge: checked (one more selection run at 1e-1) exactly where the choice is the grid's top
    at_top = row['learning_rate'] == 3e-2
    assert (row['edge'] is not None) == at_top
    if at_top:
      (edge_loss,) = row['edge'].values()
      assert row['edge_binds'] == (edge_loss < grid[3e-2])
  edge_runs = [r for r in selection if r['run_config']['learning_rate'] == 1e-1]
  assert len(edge_runs) == sum(row['learning_rate'] == 3e-2 for row in rows)
  assert len(selection) == 5 * 2 + len(edge_runs)
  # the class-token row: only on the classification task, at pool 'cls', labelled <label>@cls
  assert [r['name'] for r in results['tasks']['life']['runs']] == ['relu', 'tanh']
  assert [r['name'] for r in results['tasks']['count']['runs']] == ['relu', 'tanh', 'relu@cls']
  cls_runs = [r for r in saved if r['run_config']['model']['pool'] == 'cls']
  assert len([r for r in cls_runs if r['run_config']['seed'] != 7]) == 2  # relu@cls on count, seeds 0 and 1
  assert all(r['run_config']['task']['name'] == 'count' for r in cls_runs)
  page = resolution.markdown(results)
  assert 'at seed 7 (not reported; its runs score no test example)' in page
  assert 'edge holds' in page or 'edge binds' in page
  # the resume reuses every run, selection and edge runs included
  again = resolution.run_resolution_study(_round2(), tmp_path, model_fn=StandIn)
  assert again['meta']['trained'] == 0 and again['meta']['reused'] == len(saved)


def test_the_holm_family_drops_degenerate_and_duplicate_comparisons_and_is_stated(tmp_path):
  # The stand-in pools every way by the mean: 'relu@cls' is relu's runs again (degenerate); life is outside.
  config = _round2(tasks=('life', 'count'), family_tasks=('count',))
  results = resolution.run_resolution_study(config, tmp_path, model_fn=StandIn)
  members = resolution.holm_family(results)
  why = {}
  for task in ('life', 'count'):
    for c in results['tasks'][task]['comparisons']:
      why[(c['a'], c['b'], c['side'], task)] = c['family']
  assert [w for _, w in members] == [c['family'] for t in ('life', 'count') for c in results['tasks'][t]['comparisons']]
  assert why[('relu@cls', 'relu', 4, 'count')].startswith('degenerate')
  assert why[('relu@cls', 'relu', 8, 'count')].startswith('degenerate')
  assert why[('relu', 'tanh', 4, 'life')] == 'task outside the family'
  inside = [c for c, w in members if w is None]
  rows = {r['name']: r for r in results['tasks']['count']['runs']}
  informative = [  # relu vs tanh on count, where the two differ at some seed and a p-value exists
      c
      for c in results['tasks']['count']['comparisons']
      if c['a'] == 'relu'
      and c['p_value'] is not None
      and rows['relu']['accuracy_per_seed'][str(c['side'])] != rows['tanh']['accuracy_per_seed'][str(c['side'])]
  ]
  assert inside == informative and results['protocol']['holm_family'] == len(inside) >= 1
  assert all(c['p_holm'] is None for c, w in members if w is not None)
  holm = stats.holm([c['p_value'] for c in inside])
  assert [c['p_holm'] for c in inside] == pytest.approx(holm['adjusted'])
  page = resolution.markdown(results)
  assert (
      f'**The Holm family** ({len(inside)} comparisons): the paired comparisons of config.comparisons on count' in page
  )
  degenerate = [f'{c["a"]} vs {c["b"]} on count at {c["side"]}' for c, w in members if w and w.startswith('degenerate')]
  assert 'relu@cls vs relu on count at 4' in degenerate and 'relu@cls vs relu on count at 8' in degenerate
  assert f'Left out, degenerate: {len(degenerate)} ({"; ".join(degenerate)}).' in page
  assert 'Left out, task outside the family: 2 (relu vs tanh on life at 4; relu vs tanh on life at 8).' in page
  assert 'not in the family: degenerate' in page


def test_a_shared_run_is_counted_once():
  """Two tasks whose runs are the same (the Fashion-MNIST protocols at their shared 7 x 7 side): the second's
  comparison is a duplicate, not a second test."""
  same = {'7': [0.80, 0.84, 0.87], '14': [0.5, 0.6, 0.55]}
  other = {'7': [0.70, 0.71, 0.72], '14': [0.3, 0.5, 0.2]}
  moved = {'7': same['7'], '14': [0.4, 0.45, 0.41]}
  runs = lambda a: [
      {'name': 'A', 'seeds': [0, 1, 2], 'accuracy_per_seed': a},
      {'name': 'B', 'seeds': [0, 1, 2], 'accuracy_per_seed': other},
  ]
  results = {
      'comparison_requests': [{'a': 'A', 'b': 'B', 'sides': [7, 14]}],
      'tasks': {'canvas': {'runs': runs(same)}, 'upsample': {'runs': runs(moved)}},
      'task_order': ['canvas', 'upsample'],
      'protocol': {'family_tasks': ['canvas', 'upsample']},
  }
  for name in results['tasks']:
    results['tasks'][name]['comparisons'] = resolution.comparisons(results, name)
  resolution.adjust_over_page(results)
  flags = [
      (name, c['side'], c['family']) for name in ('canvas', 'upsample') for c in results['tasks'][name]['comparisons']
  ]
  assert flags == [
      ('canvas', 7, None),
      ('canvas', 14, None),
      ('upsample', 7, 'duplicate of canvas at 7 (the same runs)'),
      ('upsample', 14, None),
  ]
  assert results['protocol']['holm_family'] == 3


def test_the_page_shows_the_binomial_error_beside_the_seed_spread(tmp_path):
  results = resolution.run_resolution_study(_round2(), tmp_path, model_fn=StandIn)
  page = resolution.markdown(results)
  row = results['tasks']['count']['runs'][0]
  p = row['accuracy']['8']
  se = math.sqrt(p * (1 - p) / 12)
  assert f'{p:.3f} ± {stats.std(row["accuracy_per_seed"]["8"]):.3f} (SE {se:.3f})' in page
  assert resolution.binomial_se(0.5, 2000) == pytest.approx(0.01118, abs=1e-5)
  assert resolution.binomial_se(None, 10) is None


@pytest.mark.parametrize(
    'overrides, message',
    [
        (
            {'selection_seed': 1},
            r'config.selection_seed=1 is one of the reported seeds \(0, 1\).*allowed: a seed outside',
        ),
        ({'lr_grid': None}, r'config.selection_seed=7 is invalid without config.lr_grid'),
        ({'edge_rates': (3e-2,)}, r'config.edge_rates=\(0.03,\) is invalid: allowed: distinct rates above the top'),
        ({'selection_seed': None}, r'config.edge_rates=\(0.1,\) is invalid without config.selection_seed'),
        (
            {'extra_pools': {'mean': ('relu',)}},
            r"config.extra_pools.mean is invalid: allowed: a pool of \('mean', 'cls'\)",
        ),
        ({'extra_pools': {'cls': ('gelu',)}}, r"config.extra_pools.cls=\('gelu',\) is invalid: allowed: .*labels"),
        ({'family_tasks': ('shift',)}, r"config.family_tasks=\('shift',\) is invalid: allowed: None"),
        ({'selection_seed': 2**32}, r'config.selection_seed=4294967296 is invalid'),
    ],
)
def test_bad_protocol_keys_are_refused_naming_the_key(tmp_path, overrides, message):
  with pytest.raises(config_lib.ConfigError, match=message):
    resolution.run_resolution_study(_round2(**overrides), tmp_path / 'w', model_fn=StandIn)
  assert not (tmp_path / 'w').exists()


def test_a_draw_range_that_does_not_cover_the_sides_is_refused_naming_the_entry():
  config = _round2(encoders=('r: randomize_coords(rope_axial, max_side=6)',), comparisons=(), extra_pools=None)
  with pytest.raises(config_lib.ConfigError, match=r"config.encoders entry 'r' .*max_side=6.*allowed: max_side >= 8"):
    resolution.parse_config(config)


def test_a_tiny_vit_run_of_the_new_encoders_end_to_end(tmp_path):
  """The real ViT at toy size: the resized tables, the randomized coordinates and a class-token row, trained at
  4 x 4 and evaluated at 8 x 8 under the selection-seed protocol."""
  config = _round2(
      encoders=(
          'learned2d: learned2d(max_size=4, resize=bicubic)',
          'swin_v1: swin(window=4, resize=bicubic)',
          'random: randomize_coords(rope_axial, max_side=8)',
      ),
      tasks=('count',),
      family_tasks=('count',),
      comparisons=('learned2d vs swin_v1', 'random vs learned2d'),
      extra_pools={'cls': ('learned2d',)},
      lr_grid=(1e-3, 3e-3),
      edge_rates=(1e-2,),
      steps=2,
      warmup_steps=0,
      seeds=(0, 1),
  )
  config.model.model_dim, config.model.num_heads = 16, 2
  results = resolution.run_resolution_study(config, tmp_path)
  rows = {r['name']: r for r in results['tasks']['count']['runs']}
  assert set(rows) == {'learned2d', 'swin_v1', 'random', 'learned2d@cls'}
  for row in rows.values():
    assert all(math.isfinite(v) for s in ('4', '8') for v in row['accuracy_per_seed'][s])
  assert results['protocol']['holm_family'] >= 1


def test_the_round_two_config_is_the_protocol_of_issue_49():
  config = config_files.config_from_file(ROUND2)
  settings = resolution.parse_config(config)
  assert settings.selection_seed not in settings.seeds and len(settings.seeds) == 5
  assert settings.eval_examples >= 2000
  assert settings.model.model_dim // settings.model.num_heads >= 32  # rotary encoders at head_dim >= 32
  specs = ' '.join(settings.encoders)
  for baseline in (
      'swin(window=7, resize=bicubic)',
      'learned2d(max_size=7, resize=bicubic)',
      'sincos2d(resize=bicubic',
      'lookhere',
      'randomize_coords(rope_axial, max_side=28)',
  ):
    assert baseline in specs
  assert 'fashion_mnist_canvas' in settings.tasks and 'fashion_mnist_canvas' not in settings.family_tasks
  assert min(settings.edge_rates) > max(settings.lr_grid)
  comparisons = resolution.parse_comparisons(settings)
  pairs = [(c['a'], c['b']) for c in comparisons]
  assert len(set(pairs)) == len(pairs) and not any((b, a) in pairs for a, b in pairs)  # no pair asked twice
  with pytest.raises(ValueError, match='takes no argument'):
    config_files.config_from_file(ROUND2 + ':quick')
