"""The scale ladder (configs/studies/study_scale_ladder.py, relpos_jax.study.ladder and ladder_page): the reused rung
is the English BPE study run for run, bad rungs are refused up front with the key named, records survive a fresh
machine, and the page's tables and verdicts are recomputed from records (synthetic ones here, the committed ones in
the last test). Fast: no training, no corpus."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from relpos_jax import resources
from relpos_jax.study import ladder, ladder_page, runner
from relpos_jax.study.plan import parse_entries, split_study_config
from relpos_jax.train import config as config_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(REPO, 'docs')
LADDER = resources.config_module('studies/study_scale_ladder')
GiB = 2**30


def test_the_reused_rung_is_the_english_bpe_study_run_for_run(austen_laid_out_if_absent):
  """Rung d64 reuses docs/study_english_bpe's records: every recorded run config is what the rung would train (the
  corpus's files laid out empty where the system package is absent: only the configs are compared)."""
  base, study = split_study_config(LADDER.get_config(LADDER.REUSED_RUNG))
  entries = {e.label: e for e in parse_entries(study.encoders)}
  with open(os.path.join(DOCS, LADDER.REUSED_STUDY, 'results.json')) as f:
    committed = json.load(f)
  checked = 0
  for run in committed['runs']:
    if run['name'].endswith(runner.SEQUENTIAL_SUFFIX):
      continue
    config = runner.run_config(base, entries[run['name']], 0, run['learning_rate']).to_dict()
    config.pop('seed')
    assert runner._computed(json.loads(json.dumps(config))) == runner._computed(run['config']), run['name']
    checked += 1
  assert checked == len(LADDER.LABELS)  # the eight encoders and FIRE-512


def test_rungs_span_16x_and_change_only_the_model_size():
  params = {
      rung: ladder.param_estimate({**LADDER.RUNGS[rung], 'mlp_ratio': 4, 'vocab_size': 1024}) for rung in LADDER.RUNGS
  }
  assert params[LADDER.CPU_RUNGS[-1]] / params[LADDER.CPU_RUNGS[0]] >= 16
  small = LADDER.get_config('d64').to_dict()
  for rung in LADDER.RUNGS:
    other = LADDER.get_config(rung).to_dict()
    for section in ('data', 'optim', 'eval'):
      assert other[section] == small[section], (rung, section)
    assert {k: v for k, v in other['train'].items() if k != 'log_every'} == {
        k: v for k, v in small['train'].items() if k != 'log_every'
    }


def test_the_estimate_counts_the_parameters_the_runs_counted():
  """231,360 parameters counted by the d64 runs (ALiBi adds none); the estimate leaves out norms and biases."""
  counted = 231_360
  assert ladder.param_estimate({**LADDER.RUNGS['d64'], 'mlp_ratio': 4, 'vocab_size': 1024}) == pytest.approx(
      counted, rel=0.02
  )


def test_a_bad_rung_name_is_refused_with_the_rungs_allowed():
  with pytest.raises(config_lib.ConfigError, match=r"rung 'd100' is invalid: allowed: one of \['d128'"):
    LADDER.get_config('d100')


def test_a_rung_that_cannot_fit_memory_is_refused_naming_its_keys():
  big = LADDER.get_config('d256')
  big.model.model_dim = 8192
  big.model.num_layers = 48
  with pytest.raises(config_lib.ConfigError, match=r"rung 'huge': config.model.model_dim=8192 with num_layers=48"):
    ladder.check_ladder([('huge', big)], available=24 * GiB)
  # Every CPU rung fits the 24 GiB machine it runs on with room for the other jobs.
  ladder.check_ladder([(rung, LADDER.get_config(rung)) for rung in LADDER.CPU_RUNGS], available=24 * GiB)


def test_a_missing_tokenizer_is_refused_naming_the_key(monkeypatch):
  monkeypatch.setitem(sys.modules, 'tokenizers', None)  # `import tokenizers` raises ImportError
  with pytest.raises(config_lib.ConfigError, match=r"config.data.tokenizer='bpe' needs the package tokenizers"):
    ladder.check_ladder([('d64', LADDER.get_config('d64'))], available=24 * GiB)


def _run_tree(root, name='distance/lr0.03/seed0', finished=True):
  folder = os.path.join(root, 'runs', *name.split('/'))
  os.makedirs(os.path.join(folder, 'checkpoints', '400'))
  open(os.path.join(folder, 'checkpoints', '400', 'state'), 'w').write('big')
  open(os.path.join(folder, 'metrics.jsonl'), 'w').write('{"step": 20, "loss": 5.0}\n')
  if finished:
    open(os.path.join(folder, 'result.json'), 'w').write('{"seed": 0}')
  return folder


def test_records_go_to_the_repo_without_checkpoints_and_come_back_to_a_fresh_workdir(tmp_path):
  workdir, docs, fresh = str(tmp_path / 'work'), str(tmp_path / 'docs'), str(tmp_path / 'fresh')
  _run_tree(workdir)
  _run_tree(workdir, 'fire/lr0.03/seed1', finished=False)  # still training: not a record yet
  assert ladder.export_records(workdir, docs) == 1
  exported = os.path.join(docs, 'runs', 'distance', 'lr0.03', 'seed0')
  assert sorted(os.listdir(exported)) == ['metrics.jsonl', 'result.json']
  assert not os.path.exists(os.path.join(docs, 'runs', 'fire'))
  assert ladder.import_records(docs, fresh) == 1
  assert os.path.exists(os.path.join(fresh, 'runs', 'distance', 'lr0.03', 'seed0', 'result.json'))
  # A workdir's own finished record is never overwritten by the committed one.
  open(os.path.join(fresh, 'runs', 'distance', 'lr0.03', 'seed0', 'result.json'), 'w').write('{"seed": 0, "own": 1}')
  assert ladder.import_records(docs, fresh) == 0


R = ('d64', 'd128', 'd256')


def _row(mean, resolved):
  return {'mean': mean, 'resolved_holm': resolved}


@pytest.mark.parametrize(
    'rows, expected',
    [
        ([_row(-0.1, True), _row(-0.12, True), _row(-0.09, True)], 'holds at every rung'),
        ([_row(-0.1, True), _row(-0.06, True), _row(-0.04, True)], 'shrinks'),  # 40% left: under SHRINK
        ([_row(-0.1, True), _row(-0.02, False), _row(+0.03, False)], 'shrinks'),  # gone, reversed but unresolved
        ([_row(-0.1, True), _row(0.0, False), _row(+0.08, True)], 'flips'),
        ([_row(-0.1, False), _row(-0.1, True), _row(-0.1, True)], 'not resolved'),
        ([_row(-0.1, True), _row(-0.1, False), _row(-0.1, True)], 'not resolved'),  # kept its size, lost a rung
        ([_row(-0.1, True), None, _row(-0.1, True)], 'not resolved (d128: not run on two seeds yet)'),
        ([_row(-0.1, True), _row(-0.1, True), {'mean': -0.1}], 'not resolved (d256: not run on two seeds yet)'),
    ],
)
def test_verdicts_by_hand(rows, expected):
  assert ladder_page.verdict(rows, R) == expected


def _results(rung, per_seed, params):
  """A rung's results.json: every encoder reads 1.0 at the training length and `per_seed[name]` at 16x."""
  seeds = list(range(len(next(iter(per_seed.values())))))
  size = LADDER.RUNGS[rung]
  config = {
      'model': {**size, 'mlp_ratio': 4},
      'train': {'steps': 400, 'batch_size': 32},
  }
  runs = [
      {
          'name': name,
          'seeds': seeds,
          'by_length': {'64': 1.0, '1024': sum(values) / len(values)},
          'by_length_per_seed': {'64': [1.0] * len(values), '1024': values},
          'num_params': params,
          'config': config,
          'train_seconds': 60.0 * len(values),
          'scored_sets': {'1024': {'num_characters': 65_565}},
      }
      for name, values in per_seed.items()
  ]
  return {
      'runs': runs,
      'seeds': seeds,
      'eval_lengths': [64, 1024],
      'train_length': 64,
      'protocol': {'lr_grid': [0.003, 0.01, 0.03], 'selection_seed': 100},
      'meta': {'data': {'tokenizer': {'num_tokens': {'train': 965_528}}}},
  }


# kerple_log beats fire by 0.2 on every seed at d64, by 0.05 at d128 and d256: resolved everywhere, but the
# largest keeps 25% of it (shrinks). t5 vs distance: +0.3 at d64, -0.3 at d256 (flips).
SMALL = {'kerple_log': [2.0, 2.1, 2.2], 'fire': [2.2, 2.3, 2.4], 't5': [2.3, 2.4, 2.5], 'distance': [2.0, 2.1, 2.2]}
MIDDLE = {'kerple_log': [1.9, 2.0, 2.1], 'fire': [1.95, 2.05, 2.15], 't5': [2.0, 2.1, 2.2], 'distance': [2.0, 2.1, 2.2]}
LARGE = {'kerple_log': [1.8, 1.9, 2.0], 'fire': [1.85, 1.95, 2.05], 't5': [1.7, 1.8, 1.9], 'distance': [2.0, 2.1, 2.2]}


def _ladder_on_disk(tmp_path):
  docs = tmp_path / 'docs'
  ladder_docs = docs / 'study_scale_ladder'
  for rung, values, params in (('d64', SMALL, 231_360), ('d128', MIDDLE, 1_053_312), ('d256', LARGE, 4_469_000)):
    folder = docs / LADDER.REUSED_STUDY if rung == LADDER.REUSED_RUNG else ladder_docs / rung
    folder.mkdir(parents=True, exist_ok=True)
    (folder / 'results.json').write_text(json.dumps(_results(rung, values, params)))
  curve = ladder_docs / 'd128' / 'runs' / 'fire' / 'lr0.01' / 'seed0'
  curve.mkdir(parents=True)
  # 300 -> 400: 4.0 -> 3.96, a 1% drop over the last quarter.
  (curve / 'metrics.jsonl').write_text(
      ''.join(json.dumps({'step': s, 'loss': l}) + '\n' for s, l in ((100, 5.0), (200, 4.2), (300, 4.0), (400, 3.96)))
  )
  selection = ladder_docs / 'd128' / 'runs' / 'fire' / 'lr0.01' / 'seed100'
  selection.mkdir(parents=True)
  (selection / 'metrics.jsonl').write_text(json.dumps({'step': 400, 'loss': 9.0}) + '\n')  # not a reported run
  (selection / 'result.json').write_text(json.dumps({'selection_only': True, 'train_seconds': 120.0}))
  return str(ladder_docs)


def test_the_page_recomputes_findings_and_verdicts_from_the_records(tmp_path):
  ladder_docs = _ladder_on_disk(tmp_path)
  path = ladder_page.write(ladder_docs)
  text = open(path).read()
  # Three seeds with identical differences: zero-width intervals, resolved after Holm.
  assert '| kerple_log vs fire | -0.200 [-0.200, -0.200] ✓ (n=3) | -0.050 [-0.050, -0.050] ✓ (n=3) | ' in text
  assert '-0.050 [-0.050, -0.050] ✓ (n=3) | shrinks |' in text
  assert '| t5 vs distance | +0.300 [+0.300, +0.300] ✓ (n=3) | +0.000 [+0.000, +0.000] (n=3) | ' in text
  assert '-0.300 [-0.300, -0.300] ✓ (n=3) | flips |' in text
  # A finding whose encoders no rung ran.
  assert '| fire vs fire-512 | not run | not run | not run | not resolved (d64: not run on two seeds yet) |' in text
  verdicts = ladder_page.verdicts(ladder_page.load(ladder_docs), ladder_page.findings_wanted())
  assert verdicts['kerple_log vs fire'] == 'shrinks' and verdicts['t5 vs distance'] == 'flips'
  # The rung table: parameters, tokens per parameter, the selection minutes and the curve's last-quarter drop.
  assert '| d128 | 4 x 128 (4 heads) | 1,053,312 | 0.78 | 4 | 3 | 12 + 2 | 1.0% (mean of 1 runs): flattened |' in text
  assert '| d64 | 2 x 64 (4 heads) | 231,360 | 3.54 | 4 | 3 | 12 + not in the records | no curves' in text
  assert 'IN PROGRESS' in text  # four encoders of nine
  assert os.path.exists(os.path.join(ladder_docs, 'ladder.png')) and os.path.exists(
      os.path.join(ladder_docs, 'curves.png')
  )


def test_the_readme_line_names_each_larger_rungs_findings_beside_the_smallest(tmp_path):
  line = ladder_page.readme_summary(_ladder_on_disk(tmp_path))
  assert line.startswith('In progress: at 4 x 128 (1.05M parameters), A − B at 16x [95% t over n seeds]: ')
  assert (
      'kerple_log − fire -0.050 [-0.050, -0.050], resolved, n=3 (2 x 64: -0.200 [-0.200, -0.200], resolved, n=3)'
      in line
  )
  assert (
      't5 − distance 0.000 [+0.000, +0.000], not resolved, n=3 (2 x 64: 0.300 [+0.300, +0.300], resolved, n=3)' in line
  )
  assert '. at 5 x 256 (4.47M parameters)' in line
  assert (
      line.count('of the 7 findings not yet run there on two seeds') == 2
  )  # fire-512 and the randomized pair: not run
  assert line.endswith('; no accelerator rung has run') and 'across sizes' not in line


def test_the_readme_line_names_a_finding_only_once_it_has_an_interval(tmp_path):
  ladder_docs = _ladder_on_disk(tmp_path)
  one_seed = {name: values[:1] for name, values in LARGE.items()}  # d256 at one seed: no interval yet
  with open(os.path.join(ladder_docs, 'd256', 'results.json'), 'w') as f:
    json.dump(_results('d256', one_seed, 4_469_000), f)
  line = ladder_page.readme_summary(ladder_docs)
  assert 'at 4 x 128' in line and 'at 5 x 256' not in line


def test_the_page_with_no_rung_says_so(tmp_path):
  with pytest.raises(ValueError, match='no rung under'):
    ladder_page.write(str(tmp_path / 'docs' / 'study_scale_ladder'))


def test_the_committed_page_is_what_its_records_give(tmp_path):
  """docs/study_scale_ladder/README.md regenerated from the committed results and records, text for text."""
  committed = os.path.join(DOCS, 'study_scale_ladder')
  copy = tmp_path / 'docs'
  shutil.copytree(committed, copy / 'study_scale_ladder')
  shutil.copytree(os.path.join(DOCS, LADDER.REUSED_STUDY), copy / LADDER.REUSED_STUDY)
  shutil.copytree(os.path.join(DOCS, ladder_page.EDGE_STUDY), copy / ladder_page.EDGE_STUDY)  # the reused rung's edge
  ladder_page.write(str(copy / 'study_scale_ladder'))
  with open(os.path.join(committed, 'README.md')) as f:
    assert (copy / 'study_scale_ladder' / 'README.md').read_text() == f.read()


def _with_rates(results, chosen: dict[str, float]):
  """`results` whose rows chose `chosen[name]` from the grid, with the grid's losses (the chosen rate lowest)."""
  for row in results['runs']:
    rate = chosen[row['name']]
    row.update(
        learning_rate=rate,
        lr_choice='grid',
        lr_grid={name: 4.0 - (0.5 if float(name) == rate else 0.0) for name in ('0.003', '0.01', '0.03')},
    )
  return results


def test_the_edge_check_names_the_top_choosers_and_a_choice_that_moves_by_hand():
  results = _with_rates(_results('d128', MIDDLE, 1), {'kerple_log': 0.03, 'fire': 0.01, 't5': 0.03, 'distance': 0.003})
  assert ladder.top_choosers(results) == ['kerple_log', 't5']
  edge = ladder.edge_record(results, {'kerple_log': {'0.1': 3.6}, 't5': {'0.1': 3.4}}, 0.1, 61.0)
  assert edge['selection_seed'] == 100 and edge['encoders']['t5']['grid']['0.03'] == 3.5
  # kerple_log: 3.6 - 3.5 = +0.1 (stands); t5: 3.4 - 3.5 = -0.1 (moves)
  verdict = ladder.edge_verdict(edge)
  assert verdict['checked'] == ['kerple_log', 't5'] and verdict['moved'] == ['t5']
  assert verdict['margin'] == pytest.approx(-0.1)


def test_the_page_states_each_rungs_edge_check(tmp_path):
  ladder_docs = _ladder_on_disk(tmp_path)
  path = os.path.join(ladder_docs, 'd128', 'results.json')
  results = _with_rates(json.load(open(path)), {'kerple_log': 0.03, 'fire': 0.01, 't5': 0.03, 'distance': 0.01})
  json.dump(results, open(path, 'w'))
  table = ladder_page.edge_table(ladder_page.load(ladder_docs), ladder_docs)
  assert '| d128 | 2 of 4 (kerple_log, t5) | not yet |  |  |' in table
  assert '| d64 | 0 of 0 | none needed |  |  |' in table  # its synthetic rows carry no grid choice
  edge = ladder.edge_record(results, {'t5': {'0.1': 3.52}}, 0.1, 61.0)
  json.dump(edge, open(os.path.join(ladder_docs, 'd128', ladder.EDGE_FILE), 'w'))
  table = ladder_page.edge_table(ladder_page.load(ladder_docs), ladder_docs)
  assert '| d128 | 2 of 4 (kerple_log, t5) | 1 at 0.1 (not yet: kerple_log) | none | +0.0200 |' in table


def test_the_ladder_checks_the_edge_only_for_top_choosers_not_yet_checked(tmp_path, monkeypatch):
  sys.path.insert(0, REPO)
  from experiments import scale_ladder  # pylint: disable=import-outside-toplevel

  results = _with_rates(_results('d128', MIDDLE, 1), {'kerple_log': 0.03, 'fire': 0.01, 't5': 0.03, 'distance': 0.01})
  calls = []

  def fake_edge_check(config, workdir, rates, *, encoders=None, train_fn=None):
    calls.append((tuple(rates), tuple(encoders)))
    return {label: {'0.1': 3.6} for label in encoders}

  monkeypatch.setattr(runner, 'edge_check', fake_edge_check)
  docs_rung = str(tmp_path / 'd128')
  first = scale_ladder.check_edge('d128', (0,), results, str(tmp_path / 'work'), docs_rung)
  assert calls == [((LADDER.EDGE_RATE,), ('kerple_log', 't5'))] and LADDER.EDGE_RATE == 0.1
  assert sorted(first['encoders']) == ['kerple_log', 't5']
  json.dump(
      {**first, 'encoders': {'t5': first['encoders']['t5']}}, open(os.path.join(docs_rung, ladder.EDGE_FILE), 'w')
  )
  again = scale_ladder.check_edge('d128', (0,), results, str(tmp_path / 'work'), docs_rung)
  assert calls[-1] == ((0.1,), ('kerple_log',)) and sorted(again['encoders']) == ['kerple_log', 't5']
  assert json.load(open(os.path.join(docs_rung, ladder.EDGE_FILE))) == again
  calls.clear()
  scale_ladder.check_edge('d128', (0,), results, str(tmp_path / 'work'), docs_rung)
  assert not calls  # every top chooser checked: nothing trains
