"""The suite: per-task study configs from the protocols, up-front validation, resume, and the summary."""

from __future__ import annotations

import importlib.util
import json
import os

import ml_collections
import pytest

from relpos_jax import resources
from relpos_jax.study import suite, suite_summary
from relpos_jax.train import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _algorithmic(arg):
  spec = importlib.util.spec_from_file_location(
      '_algorithmic_for_suite', os.path.join(ROOT, 'configs', 'algorithmic.py')
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def tiny_suite(tasks=('even_pairs', 'flip_flop')) -> ml_collections.ConfigDict:
  config = _algorithmic('suite')
  config.model.num_layers, config.model.model_dim, config.model.num_heads = 1, 16, 2
  config.train.steps, config.train.batch_size, config.train.checkpoint_every = 3, 4, 3
  config.train.log_every = 3
  config.optim.warmup_steps = 1
  config.eval.num_examples, config.eval.batch_size = 8, 8
  config.suite.tasks = tasks
  config.suite.encoders = ('nope', 'alibi: alibi(bidirectional=True)')
  config.suite.seeds = (0, 1)
  for task in tasks:  # a protocol's own steps (2,000 and more) replace train.steps
    config.suite.protocols[task].steps = config.train.steps
  return config


def test_the_presets_cover_every_suite_task_and_validate():
  for arg, tasks in (('suite', 24), ('published,suite', 25)):  # the CPU grid leaves byte-level passkey out (cost)
    config = _algorithmic(arg)
    assert len(config.suite.tasks) == tasks and len(config.suite.encoders) >= 6
    assert set(config.suite.protocols) == set(_algorithmic('published,suite').suite.tasks)
    studies = suite.validate_suite(config)
    assert [t for t, _ in studies] == list(config.suite.tasks)
  published = dict(suite.validate_suite(_algorithmic('published,suite')))['reverse_string']
  assert published.base.data.max_length == 40 and max(published.base.eval.lengths) == 491
  assert published.base.model.num_layers == 5 and published.base.train.batch_size == 128


def test_study_config_applies_the_protocol():
  config = tiny_suite()
  base, section, protocols = suite.split_config(config)
  study = suite.study_config(base, section, 'flip_flop', protocols['flip_flop'])
  assert study.base.data.task == 'flip_flop' and study.base.data.max_length == 32
  assert tuple(study.base.eval.lengths) == (16, 32, 64, 128) and tuple(study.study.seeds) == (0, 1)


def test_bad_suite_sections_are_named_before_training():
  config = tiny_suite()
  config.suite.tasks = ('even_pairs', 'shift')  # a registered task the suite has no protocol for
  with pytest.raises(ValueError, match='shift.*without a protocol'):
    suite.validate_suite(config)
  config = tiny_suite()
  config.suite.protocols.even_pairs.max_length = 0
  with pytest.raises(ValueError, match='config.suite.protocols.even_pairs.max_length=0'):
    suite.validate_suite(config)
  config = tiny_suite()
  config.suite.encoders = ('short: learned(max_length=8)',)
  with pytest.raises(ValueError, match="task 'even_pairs'.*entry 'short'"):
    suite.validate_suite(config)


def _fake_results(task, train_length, values):
  lengths = sorted({int(n) for run in values.values() for n in run})
  config = {
      'data': {'min_length': 1, 'max_length': train_length, 'task_kwargs': {'num_keys': 8}},
      'train': {'steps': 250, 'batch_size': 4},
      'optim': {'learning_rate': 1e-3},
      'model': {'num_layers': 2, 'model_dim': 16, 'num_heads': 2, 'mlp_ratio': 4, 'dropout_rate': 0.0},
  }
  return {
      'metric': 'accuracy',
      'lower_is_better': False,
      'train_length': train_length,
      'eval_lengths': lengths,
      'runs': [
          {
              'name': name,
              'spec': name,
              'by_length': {str(n): sum(v) / len(v) for n, v in run.items()},
              'by_length_per_seed': {str(n): v for n, v in run.items()},
          }
          for name, run in values.items()
      ],
      'meta': {'title': task, 'config': config},
  }


def _two_tasks():
  return {
      'learned': _fake_results(
          'learned',
          10,
          {
              'a': {10: [1.0, 1.0], 20: [0.8, 0.6], 40: [0.6, 0.4]},
              'b': {10: [0.9, 0.8], 20: [0.5, 0.5], 40: [0.5, 0.5]},
          },
      ),
      'hard': _fake_results('hard', 10, {'a': {10: [0.6, 0.5], 20: [0.5, 0.5], 40: [0.5, 0.5]}}),
  }


def test_summary_means_over_seeds_and_flags_what_was_not_learned(tmp_path):
  summary = suite_summary.summarize(_two_tasks(), title='tiny')
  cell = summary['cells']['learned/a']
  assert cell['in_distribution'] == pytest.approx(1.0) and cell['out_of_distribution'] == pytest.approx(0.6)
  assert (
      cell['out_of_distribution_std'] == pytest.approx(0.1 * 2**0.5) and cell['seeds'] == 2
  )  # seeds 0.7, 0.5: sample std
  # b's in-distribution mean is 0.85 < ID_LEARNED: its cell is marked even though the task was learned by a.
  assert cell['learned'] and not summary['cells']['learned/b']['learned']
  assert summary['learned_in_distribution'] == {'learned': True, 'hard': False}
  assert summary['encoders'] == ['a', 'b'] and 'hard/b' not in summary['cells']
  table = suite_summary.markdown(summary)
  assert '| learned | 0.60 ± 0.14 (1.00) | 0.50 ± 0.00 (0.85) ✗ |' in table
  assert '| hard (not learned) | 0.50 ± 0.00 (0.55) ✗ | — |' in table
  assert table.rstrip().endswith('| *learned in distribution (of 2)* | 1 | 0 |')
  paths = suite_summary.write_summary(summary, str(tmp_path))
  assert os.path.getsize(paths['heatmap']) > 0 and json.load(open(paths['json']))['tasks'] == ['learned', 'hard']


def test_a_training_range_above_length_1_puts_shorter_lengths_out_of_distribution():
  """selective_copy trains at 16 blanks only: its dense split (8) is scored with the lengths beyond."""
  results = _fake_results('copy', 16, {'a': {8: [0.2, 0.0], 16: [1.0, 1.0], 32: [0.4, 0.6]}})
  results['meta']['data'] = {'train_lengths': [16, 16]}
  cell = suite_summary.summarize({'copy': results})['cells']['copy/a']
  assert cell['in_distribution'] == pytest.approx(1.0) and cell['out_of_distribution'] == pytest.approx(0.3)
  del results['meta']['data']  # reports without the range: training from length 1, as before
  assert suite_summary.summarize({'copy': results})['cells']['copy/a']['in_distribution'] == pytest.approx(0.55)


def test_the_readme_states_the_protocol_that_ran_and_keeps_hand_written_notes(tmp_path):
  summary = suite_summary.summarize(_two_tasks(), title='tiny')
  path = suite_summary.write_summary(summary, str(tmp_path))['markdown']
  text = open(path).read()
  assert text.startswith('# tiny\n') and '| learned | 1..10 | 10, 20, 40 | 250 | — | 0.001 | num_keys=8 |' in text
  assert 'Model: 2 layers, model_dim 16, 2 heads' in text and text.rstrip().endswith(suite_summary.NOTES_MARKER)
  with open(path, 'a') as f:
    f.write('\nFindings written by hand.\n')
  suite_summary.write_summary(suite_summary.summarize(_two_tasks(), title='tiny, rerun'), str(tmp_path))
  text = open(path).read()
  assert text.startswith('# tiny, rerun\n') and text.endswith(
      suite_summary.NOTES_MARKER + '\n\nFindings written by hand.\n'
  )
  assert text.count(suite_summary.NOTES_MARKER) == 1


def test_each_task_states_its_seeds_and_its_learning_rate_fixed_or_the_grid_it_was_chosen_from(tmp_path):
  """A suite whose tasks ran under different protocols (one moved to a rate grid and 3 seeds, one not yet) says
  so per task, and `rewrite` (the command that re-summarizes a committed directory) reads the results alone."""
  tasks = _two_tasks()
  tasks['learned'].update(seeds=[0, 1, 2], protocol={'lr_grid': [3e-4, 1e-3, 3e-3]})
  tasks['hard']['seeds'] = [0, 1]
  table = suite_summary.protocol_markdown(suite_summary.summarize(tasks))
  assert '| learned | 1..10 | 10, 20, 40 | 250 | 0, 1, 2 | per encoder at seed 0, from 0.0003, 0.001, 0.003 |' in table
  assert '| hard | 1..10 | 10, 20, 40 | 250 | 0, 1 | 0.001 | num_keys=8 |' in table
  assert 'learning rate 0.001' not in table  # the model line no longer states one rate for every task
  for task, results in tasks.items():
    os.makedirs(tmp_path / task)
    (tmp_path / task / 'results.json').write_text(json.dumps(results))
  suite_summary.write_summary(suite_summary.summarize({'hard': tasks['hard']}, title='tiny'), str(tmp_path))
  again = suite_summary.rewrite(str(tmp_path))  # the summary listed 'hard'; the folder 'learned' is added after it
  assert again['tasks'] == ['hard', 'learned'] and again['title'] == 'tiny'
  assert json.loads((tmp_path / 'summary.json').read_text())['protocols']['learned']['seeds'] == [0, 1, 2]
  assert suite_summary.main(['suite_summary', str(tmp_path / 'nowhere')]) == 2


@pytest.mark.slow
def test_a_tiny_suite_runs_resumes_and_summarizes(tmp_path):
  config = tiny_suite()
  summary = suite.run_suite(config, tmp_path, tasks=['even_pairs'])
  assert summary['tasks'] == ['even_pairs'] and set(summary['encoders']) == {'nope', 'alibi'}
  assert summary['cells']['even_pairs/alibi']['seeds'] == 2
  calls = []
  again = suite.run_suite(
      config, tmp_path, tasks=['even_pairs'], train_fn=lambda *a, **k: calls.append(a)
  )  # everything is reused
  assert not calls and again == summary
  with pytest.raises(config_lib.ConfigError, match='not in config.suite.tasks'):
    suite.run_suite(config, tmp_path, tasks=['parity_check'])


# --------------------------------------------------------------- the papers' protocol, statistics
def test_bad_input_is_named_before_any_run(tmp_path):
  """An unknown task or statistic, a draw count <= 0, a max_position below the longest test sequence: each
  refused with the key named, before anything is written."""
  workdir = tmp_path / 'never'
  config = tiny_suite()
  config.suite.tasks = ('even_pairs', 'no_such_task')
  config.suite.protocols.no_such_task = dict(config.suite.protocols.even_pairs)
  with pytest.raises(config_lib.ConfigError, match=r"config.suite.tasks names unknown task\(s\) \['no_such_task'\]"):
    suite.run_suite(config, workdir)
  config = tiny_suite()
  config.suite.statistic = 'median'
  with pytest.raises(config_lib.ConfigError, match=r"config.suite.statistic='median'.*token_mean"):
    suite.run_suite(config, workdir)
  for draws in (0, -2):
    config = tiny_suite()
    config.eval.position_draws = draws
    with pytest.raises(config_lib.ConfigError, match=rf'config.eval.position_draws={draws}'):
      suite.run_suite(config, workdir)
  config = tiny_suite()
  config.suite.encoders = ('rope', 'rand: randomized(rope, max_position=40)')  # even_pairs tests 64 + 1 tokens
  with pytest.raises(
      config_lib.ConfigError,
      match=r"entry 'rand'.*task 'even_pairs': max_position=40 is below the longest test sequence, 65",
  ):
    suite.run_suite(config, workdir)
  config = tiny_suite()
  config.suite.encoders = ('rand: randomized(rope, max_position={2*shortest})',)
  with pytest.raises(config_lib.ConfigError, match=r"entry 'rand: .*placeholder other than \{longest\}"):
    suite.run_suite(config, workdir)
  config = tiny_suite()
  config.suite.protocols.flip_flop.held_out = {'sparse': {'p_ignore': 1.5}}
  config.suite.protocols.flip_flop.held_out_examples_by_set = {'sparse': 8}  # its sets must be held_out's
  with pytest.raises(config_lib.ConfigError, match=r"flip_flop.held_out\['sparse'\].*p_ignore=1.5"):
    suite.run_suite(config, workdir)
  assert not workdir.exists()
  with pytest.raises(config_lib.ConfigError, match='config.suite.statistic'):
    suite_summary.markdown(suite_summary.summarize(_two_tasks()), 'best')


def test_max_position_follows_each_tasks_longest_test_sequence():
  studies = dict(suite.validate_suite(_algorithmic('ruoss')))
  assert list(studies) == [
      'even_pairs',
      'reverse_string',
      'bucket_sort',
      'cycle_navigation',
      'missing_duplicate',
      'flip_flop',
  ]
  # even_pairs at 64 symbols: 65 tokens; reverse_string: 128; flip_flop at 128 pairs: 257.
  for task, longest in (('even_pairs', 65), ('reverse_string', 128), ('flip_flop', 257)):
    encoders = studies[task].study.encoders
    assert encoders[1] == f'rope+rand.2x: randomized(rope, max_position={2 * longest})'
    assert encoders[2] == f'rope+rand.8x: randomized(rope, max_position={8 * longest})'
    assert encoders[3] == 'rope+rand.2048: randomized(rope, max_position=2048)'
  assert tuple(studies['even_pairs'].study.seeds) == (0, 1, 2) and studies['even_pairs'].study.lr_grid == (
      3e-4,
      1e-3,
      3e-3,
  )
  assert studies['flip_flop'].base.train.steps == 2_000 and studies['reverse_string'].base.train.steps == 2_500
  with pytest.raises(ValueError, match="'ruoss' is a CPU-scale suite"):
    _algorithmic('ruoss,published')


def test_a_tasks_own_learning_rate_grid_replaces_the_suites_and_a_bad_one_is_named():
  config = _algorithmic('contextual')
  config.suite.protocols.mqar.lr_grid = (1e-3, 1e-2)
  studies = dict(suite.validate_suite(config))
  assert tuple(studies['mqar'].study.lr_grid) == (1e-3, 1e-2)
  assert tuple(studies['flip_flop'].study.lr_grid) == (3e-4, 1e-3, 3e-3)  # the suite's
  config.suite.protocols.mqar.lr_grid = (0.0, 1e-2)
  with pytest.raises(config_lib.ConfigError, match=r'config.suite.protocols.mqar.lr_grid=\(0.0, 0.01\) is invalid'):
    suite.validate_suite(config)


def test_the_contextual_suite_runs_the_causal_only_encoders_on_the_causal_tasks():
  """CoPE, FoX and stick-breaking refuse a bidirectional model; the causal tasks take them, checked up front."""
  studies = dict(suite.validate_suite(_algorithmic('contextual')))
  assert list(studies) == [
      'flip_flop',
      'mqar',
      'passkey_tokens',
      'count_copy',
      'addition',
      'selective_copy',
      'cope_counting',
  ]
  for study in studies.values():
    labels = [e.partition(':')[0] for e in study.study.encoders]
    assert labels == ['nope', 'rope', 'alibi', 'cope', 'fox', 'stick_breaking']
    # The study protocol: 3 seeds, each encoder's rate chosen from the grid at seed 0; count_copy, where the
    # shared grid's edge bound, chooses from its own grid two rungs wider (the protocol's lr_grid over the suite's).
    wider = (1e-2, 3e-2) if study.base.data.task == 'count_copy' else ()
    assert tuple(study.study.seeds) == (0, 1, 2) and tuple(study.study.lr_grid) == (3e-4, 1e-3, 3e-3) + wider
  assert studies['flip_flop'].base.train.steps == 1_000 and studies['mqar'].base.train.steps == 2_000
  assert studies['passkey_tokens'].base.train.steps == 1_000 and tuple(studies['passkey_tokens'].base.eval.lengths) == (
      8,
      16,
      32,
      64,
  )
  assert studies['count_copy'].base.data.task == 'count_copy' and max(studies['count_copy'].base.eval.lengths) == 64
  assert studies['count_copy'].base.data.task_kwargs == {'num_symbols': 16}  # 16 distinct sequences a length
  counting = studies['cope_counting']  # CoPE's counting task: 3..32 statements (the paper's 3..512), tested to 4x
  assert (counting.base.data.min_length, counting.base.data.max_length, tuple(counting.base.eval.lengths)) == (
      3,
      32,
      (16, 32, 64, 128),
  )
  copy = studies['selective_copy']  # CoPE's in-distribution, dense and sparse splits, scaled by 1/8
  assert (copy.base.data.min_length, copy.base.data.max_length, tuple(copy.base.eval.lengths)) == (
      16,
      16,
      (8, 16, 32, 64),
  )
  with pytest.raises(ValueError, match='different suites'):
    _algorithmic('ruoss,contextual')
  with pytest.raises(ValueError, match="'contextual' is a CPU-scale suite"):
    _algorithmic('contextual,published')


def test_the_abacus_suite_embeds_the_digit_indices_beside_each_attention_encoding():
  """McLeish et al.'s pairings: one learned input table, NoPE / FIRE / RoPE in attention, tested to 6x."""
  studies = dict(suite.validate_suite(_algorithmic('abacus')))
  assert list(studies) == ['addition_abacus']
  study = studies['addition_abacus']
  assert [e.partition(':')[0] for e in study.study.encoders] == ['abacus+nope', 'abacus+fire', 'abacus+rope']
  assert dict(study.base.data.task_kwargs) == {'max_offset': 40, 'as_input': True}
  assert max(study.base.eval.lengths) == 6 * study.base.data.max_length
  with pytest.raises(ValueError, match='different suites'):
    _algorithmic('abacus,contextual')


def _with_exact_match(results, exact):
  for run in results['runs']:
    per_seed = exact[run['name']]
    run['exact_match_by_length_per_seed'] = {str(n): v for n, v in per_seed.items()}
    run['exact_match_by_length'] = {str(n): sum(v) / len(v) for n, v in per_seed.items()}
  return results


def test_both_statistics_mean_with_sample_std_and_max_over_seeds(tmp_path):
  tasks = _two_tasks()
  _with_exact_match(
      tasks['learned'],
      {
          'a': {10: [1.0, 0.8], 20: [0.5, 0.1], 40: [0.3, 0.1]},
          'b': {10: [0.5, 0.4], 20: [0.0, 0.0], 40: [0.0, 0.0]},
      },
  )
  summary = suite_summary.summarize(tasks, title='tiny', statistic='token_max')
  cell = summary['cells']['learned/a']
  # Per token: seeds' out-of-distribution means 0.7 and 0.5; per sequence: 0.4 and 0.1.
  assert cell['token']['out_of_distribution']['per_seed'] == pytest.approx([0.7, 0.5])
  assert cell['token']['out_of_distribution']['max'] == pytest.approx(0.7)
  assert cell['sequence']['out_of_distribution']['mean'] == pytest.approx(0.25)
  assert cell['sequence']['out_of_distribution']['std'] == pytest.approx(0.3 / 2**0.5)  # ddof 1
  assert cell['sequence']['out_of_distribution']['max'] == pytest.approx(0.4)
  assert cell['sequence']['in_distribution']['max'] == pytest.approx(1.0)
  # b: in-distribution per-token mean 0.85 (not learned by the mean), max 0.9 (learned by the max).
  assert not summary['cells']['learned/b']['learned'] and summary['cells']['learned/b']['learned_max']
  assert '| learned | 0.70 (1.00) | 0.50 (0.90) |' in suite_summary.markdown(summary)
  assert '| learned | 0.60 ± 0.14 (1.00) | 0.50 ± 0.00 (0.85) ✗ |' in suite_summary.markdown(summary, 'token_mean')
  assert '| learned | 0.25 ± 0.21 (0.90) | 0.00 ± 0.00 (0.45) ✗ |' in suite_summary.markdown(summary, 'sequence_mean')
  assert '| learned | 0.40 (1.00) | 0.00 (0.50) |' in suite_summary.markdown(summary, 'sequence_max')
  assert '| hard (not learned) | — | — |' in suite_summary.markdown(summary, 'sequence_max')  # no per-sequence values
  assert 'max over seeds' in suite_summary.caption('token_max') and 'ddof 1' in suite_summary.caption('sequence_mean')
  text = open(suite_summary.write_summary(summary, str(tmp_path))['markdown']).read()
  assert text.startswith('# tiny\n\nStatistic: token_max. Per-token accuracy, max over seeds')
  for statistic in ('token_mean', 'sequence_mean', 'sequence_max'):
    assert f'### {statistic}\n' in text
  assert '| a | 0..L-1 | — |' in text  # the evaluation positions, recorded per encoder


def test_randomized_rows_record_their_positions_and_max_position():
  results = _fake_results('t', 10, {'rand': {10: [1.0], 20: [0.5]}, 'rand@0..L-1': {10: [1.0], 20: [0.4]}})
  results['runs'][0].update(
      spec='randomized(rope, max_position=80)',
      positions='random: ordered positions from [0, 80), mean over 4 draws',
      position_draws=4,
  )
  results['runs'][1].update(spec='randomized(rope, max_position=80)', positions='0..L-1', position_draws=1)
  summary = suite_summary.summarize({'t': results})
  assert summary['cells']['t/rand']['max_position'] == 80 and summary['cells']['t/rand']['position_draws'] == 4
  assert summary['cells']['t/rand@0..L-1']['positions'] == '0..L-1'
  table = suite_summary.positions_markdown(summary)
  assert '| rand | random: ordered positions from [0, 80), mean over 4 draws | t 80 |' in table


def test_a_glitch_rate_above_zero_never_prints_as_zero():
  """One glitch in Liu et al.'s 31,511 dense reads is 0.0317 per thousand: printed with one decimal it read as a
  clean run (docs/suite_contextual, RoPE). Two decimals, and two significant digits below 0.005."""
  assert suite_summary.glitch_rate_text(1000 / 31_511) == '0.03'
  assert suite_summary.glitch_rate_text(1000 / 1_000_000) == '0.001'
  assert suite_summary.glitch_rate_text(0.0) == '0.00'
  assert suite_summary.glitch_rate_text(12.7257) == '12.73'


def test_glitch_rates_over_seeds():
  record = lambda accuracy: {
      'sets': {
          'sparse': {
              'by_length': {'32': {'accuracy': accuracy, 'glitch_rate': 1000 * (1 - accuracy), 'scored_tokens': 1600.0}}
          }
      }
  }
  results = _fake_results('flip_flop', 10, {'a': {10: [1.0, 1.0], 20: [1.0, 1.0]}})
  results['held_out'] = {
      'request': {'sets': {'sparse': {'p_ignore': 0.98}}},
      'runs': {'a': {'seeds': [0, 1], 'per_seed': [record(0.99), record(0.995)]}},
  }
  summary = suite_summary.summarize({'flip_flop': results})
  cell = summary['held_out']['flip_flop']['a']['sparse']['32']
  assert cell['per_seed'] == pytest.approx([10.0, 5.0]) and cell['mean'] == pytest.approx(7.5)
  assert cell['std'] == pytest.approx(5 / 2**0.5) and cell['min'] == pytest.approx(5.0)
  assert '| a | 7.50 ± 3.54 [5.00; 10.00, 5.00] |' in suite_summary.held_out_markdown(summary)
  assert "sparse: {'p_ignore': 0.98} at length 32" in suite_summary.held_out_markdown(summary)
  # The bound a clean run gives: 3 / 1,600 reads = 1.875 per thousand (the rule of three).
  assert (
      '1,600 scored tokens a run at 32, so a run without an error there bounds its rate below 1.9 per thousand'
      in suite_summary.held_out_markdown(summary)
  )


def test_held_out_sets_take_their_own_example_counts():
  """Liu et al.'s sparse set has about 1.3 reads an example at 32 pairs, the dense one 15: each gets the examples
  that make 30,000 reads (a clean run then bounds the glitch rate below 0.1 per thousand)."""
  config = _algorithmic('contextual')
  base, section, protocols = suite.split_config(config)
  protocol = protocols['flip_flop']
  assert protocol.held_out_examples_by_set == {'sparse': 24_046, 'dense': 2_108}
  study = suite.study_config(base, section, 'flip_flop', protocol)
  assert suite.held_out_config(study.base, protocol, 'sparse').eval.num_examples == 24_046
  assert suite.held_out_config(study.base, protocol, 'dense').eval.num_examples == 2_108
  request = suite._held_out_request(study.base, protocol, 1)
  assert request['examples'] == {'sparse': 24_046, 'dense': 2_108}
  # 24,046 x 1.31 and 2,108 x 14.95 expected reads: both 1.05 x 30,000, whose clean-run bound is 0.1 per thousand.
  assert 24_046 * 1.31 >= 31_500 and 2_108 * 14.95 >= 31_500
  # One count for every set: the request keeps the form the committed runs wrote (so they are reused).
  single = suite.Protocol(**{**protocol.__dict__, 'held_out_examples_by_set': None, 'held_out_examples': 1_024})
  assert suite._held_out_request(study.base, single, 1)['examples'] == 1_024
  for bad in ({'medium': 10}, {'sparse': 0}, {'sparse': 2.5}):
    config = _algorithmic('contextual')
    config.suite.protocols.flip_flop.held_out_examples_by_set = bad
    with pytest.raises(config_lib.ConfigError, match=r'flip_flop.held_out_examples_by_set=.*allowed: .*sparse'):
      suite.split_config(config)


@pytest.mark.slow
def test_a_tiny_suite_evaluates_randomized_encoders_at_random_positions_and_the_flip_flop_sets(tmp_path):
  """End to end on the LM study's evaluation code: randomized RoPE is evaluated at random positions (K draws,
  deterministic per seed) and at 0..L-1; exact match beside accuracy; the flip-flop sets' glitch rates."""
  config = tiny_suite(tasks=('flip_flop',))
  config.suite.encoders = ('rope', 'rand: randomized(rope, max_position={2*longest})')
  config.suite.seeds = (0,)
  config.eval.position_draws = 2
  config.suite.protocols.flip_flop.held_out_examples_by_set = {'sparse': 16, 'dense': 8}
  summary = suite.run_suite(config, tmp_path)
  results = json.load(open(tmp_path / 'flip_flop' / 'results.json'))
  rows = {r['name']: r for r in results['runs']}
  assert list(rows) == ['rope', 'rand', 'rand@0..L-1']
  assert rows['rand']['spec'] == 'randomized(rope, max_position=514)'
  assert rows['rand']['positions'] == 'random: ordered positions from [0, 514), mean over 2 draws'
  assert rows['rand']['position_draws'] == 2 and rows['rope']['positions'] == '0..L-1'
  assert set(rows['rand']['exact_match_by_length_per_seed']) == {'16', '32', '64', '128'}
  assert summary['cells']['flip_flop/rand']['max_position'] == 514
  assert summary['cells']['flip_flop/rand']['sequence']['out_of_distribution']['per_seed']
  held = json.load(open(tmp_path / 'flip_flop' / 'runs' / 'rand' / 'seed0' / 'held_out.json'))
  sparse = held['sets']['sparse']
  assert sparse['task_kwargs'] == {'p_ignore': 0.98} and sparse['positions'] == rows['rand']['positions']
  at = sparse['by_length']['32']
  assert at['glitch_rate'] == pytest.approx(1000 * (1 - at['accuracy'])) and 16 <= at['scored_tokens'] < 16 * 33
  assert held['request']['examples'] == {'sparse': 16, 'dense': 8}
  dense = held_out_of(tmp_path, 'rope')['sets']['dense']['by_length']['32']
  assert 8 <= dense['scored_tokens'] < 8 * 33 and dense['scored_tokens'] != at['scored_tokens']
  assert 'sequential' in sparse and 'sequential' not in held_out_of(tmp_path, 'rope')['sets']['dense']
  assert set(summary['held_out']['flip_flop']) == {'rope', 'rand', 'rand@0..L-1'}
  # Deterministic per seed: evaluating again (the records removed) gives the same numbers.
  os.remove(tmp_path / 'flip_flop' / 'runs' / 'rand' / 'seed0' / 'held_out.json')
  assert suite.run_suite(config, tmp_path, train_fn=lambda *a, **k: pytest.fail('retrained')) == summary
  text = open(tmp_path / 'README.md').read()
  assert '## Held-out sets' in text and '| rand |' in text


def held_out_of(workdir, label):
  return json.load(open(workdir / 'flip_flop' / 'runs' / label / 'seed0' / 'held_out.json'))


def test_a_selection_seed_outside_the_reported_ones_reaches_every_tasks_study_and_bad_ones_are_named(tmp_path):
  """suite.selection_seed: each task's study chooses its rate at that seed (the cross-corpus protocol); one among
  the reported seeds, or a task without a rate grid, is refused naming config.suite.selection_seed."""
  config = tiny_suite()
  config.suite.lr_grid = (1e-3, 3e-3)
  config.suite.selection_seed = 100
  studies = dict(suite.validate_suite(config))
  assert {task: study.study.selection_seed for task, study in studies.items()} == {'even_pairs': 100, 'flip_flop': 100}
  assert all(tuple(study.study.seeds) == (0, 1) for study in studies.values())
  config.suite.selection_seed = 1
  with pytest.raises(
      config_lib.ConfigError, match=r'config.suite.selection_seed=1 is one of the reported seeds \(0, 1\)'
  ):
    suite.validate_suite(config)
  config = tiny_suite()
  config.suite.selection_seed = 100  # no grid anywhere: nothing to choose
  with pytest.raises(
      config_lib.ConfigError,
      match=r"config.suite.selection_seed=100 is invalid without a rate grid: tasks \['even_pairs'",
  ):
    suite.validate_suite(config)
  assert not (tmp_path / 'never').exists()


# About 20 s on the 2-core CPU (grid, seeds, evaluation compiled): in the slow set, as the other tiny suites.
@pytest.mark.slow
def test_a_tiny_suite_chooses_its_rate_at_the_selection_seed_and_reports_only_the_others(tmp_path):
  config = tiny_suite(tasks=('even_pairs',))
  config.suite.encoders = ('nope',)
  config.suite.lr_grid = (1e-3, 3e-3)
  config.suite.selection_seed = 7
  config.suite.protocols.even_pairs.eval_lengths = (16,)
  suite.run_suite(config, tmp_path)
  results = json.load(open(tmp_path / 'even_pairs' / 'results.json'))
  (row,) = results['runs']
  assert row['seeds'] == [0, 1] and set(row['lr_grid']) == {'0.001', '0.003'}
  runs = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob('even_pairs/runs/nope/*/seed*'))
  assert [r for r in runs if r.endswith('seed7')] == [
      'even_pairs/runs/nope/lr0.001/seed7',
      'even_pairs/runs/nope/lr0.003/seed7',
  ]


def test_an_edge_check_trains_at_the_suites_selection_seed():
  """configs/algorithmic.edge_config: the edge rate trains where the grid did, the selection seed of a suite that
  has one (suite_ruler: lm.SELECTION_SEED), as that suite's only seed; the suites that chose at seed 0 keep 0."""
  algorithmic = resources.config_module('algorithmic')
  edge = algorithmic.edge_config('suite_ruler', {'common_words': ('nope',)}, 'common_words', 'edge')
  assert tuple(edge.suite.seeds) == (resources.config_module('lm').SELECTION_SEED,)
  assert edge.suite.selection_seed is None and tuple(edge.suite.lr_grid) == (1e-2,)
  assert tuple(edge.suite.tasks) == ('common_words',) and tuple(edge.suite.encoders) == ('nope',)
  suite.validate_suite(edge)
  assert tuple(resources.config_module('studies/suite_contextual_edge').get_config('addition').suite.seeds) == (0,)
