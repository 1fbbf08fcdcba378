"""The benchmark scripts still run (tiny sizes, one repeat), and what they compare computes the same thing.

Nothing here times anything: the numbers of a tiny run mean nothing. It checks that every contender of
every measurement still compiles and runs against the current library, and that contenders which claim to
compute the same result do.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from benchmarks import attention_kinds, bias_construction, measure, report, run, train_step
from relpos_jax import encoders

TINY = 64


@pytest.mark.parametrize('name', [name for name, _ in bias_construction.ENCODERS])
def test_bias_strategies_agree(name):
  encoder = encoders.make(name)
  params = encoder.init(jax.random.PRNGKey(0), 3)
  built = {
      s: np.asarray(jax.jit(bias_construction.bias_fn(s, encoder, 40))(params)) for s in bias_construction.STRATEGIES
  }
  for strategy, bias in built.items():
    assert bias.shape == (3, 40, 40), strategy
    np.testing.assert_allclose(bias, built['toeplitz'], atol=1e-6, err_msg=strategy)


def test_naive_shaw_vector_matches_the_library():
  q, k, v, _ = attention_kinds.inputs(24)
  rows = attention_kinds.contenders_at(24, ['shaw_vector', 'shaw_vector naive'])
  outs = {name: np.asarray(jax.jit(fn)(q, k, v, params)) for name, (fn, params) in rows.items()}
  np.testing.assert_allclose(outs['shaw_vector naive'], outs['shaw_vector'], atol=1e-5, rtol=1e-5)


def test_memory_analysis_sees_fused_intermediates():
  # exp(x @ x) @ x: on CPU's default pipeline the (n, n) intermediates hide inside a library fusion.
  x = jax.numpy.ones((128, 128), jax.numpy.float32)
  use = measure.compiled_memory(lambda x: jax.numpy.exp(x @ x) @ x, (x,))
  assert use.complete
  assert use.temp >= 128 * 128 * 4
  assert use.total == use.argument + use.output - use.alias + use.temp


def test_time_interleaved_runs_each_contender_once_per_round():
  calls = []
  names = 'abcd'
  timings = measure.time_interleaved({n: (lambda n=n: calls.append(n)) for n in names}, repeats=5, warmup=1)
  assert calls[:4] == list(names)  # The warm-up round.
  rounds = [calls[i : i + 4] for i in range(4, len(calls), 4)]
  assert len(rounds) == 5 and all(sorted(r) == list(names) for r in rounds)
  assert len({tuple(r) for r in rounds}) > 1  # Shuffled: neighbours change between rounds.
  assert all(len(t.samples) == len(t.cpu_samples) == 5 for t in timings.values())
  with pytest.raises(ValueError, match='repeats=0'):
    measure.time_interleaved({'a': lambda: None}, repeats=0)


def test_ratio_to_pairs_rounds():
  fast = measure.Timing((1.0, 2.0, 1.0), (1.0, 1.0, 1.0))
  slow = measure.Timing((2.0, 4.0, 20.0), (2.0, 2.0, 2.0))
  assert slow.ratio_to(fast) == 2.0  # Per round 2, 2, 20: the burst in round 3 does not move it.
  assert slow.cpu_ratio_to(fast) == 2.0
  with pytest.raises(ValueError, match='samples'):
    slow.ratio_to(measure.Timing((1.0,)))


@pytest.mark.slow  # every benchmark row compiled once: a long end-to-end check
def test_attention_kinds_runs():
  section = attention_kinds.run(length=TINY, naive_length=0, repeats=1, warmup=0)
  names = [row[1] for row in section.rows]
  assert names == ['plain', 'core (none)'] + [name for name, *_ in attention_kinds.ENCODERS]
  with_target = {row[1]: row[-2] for row in section.rows if row[-2]}
  # Only the position-term rows of section 2 carry targets; the contextual rows are measured without one.
  assert sorted(with_target) == sorted(name for name, _, _, target, _ in attention_kinds.ENCODERS if target)
  assert all(cell.startswith(('met', '**missed**')) for cell in with_target.values())


@pytest.mark.slow  # every benchmark row compiled once: a long end-to-end check
def test_train_step_runs():
  config = train_step.default_config()
  # Smaller and faster to load and compile; the code paths are those of the default experiment.
  config.data.max_train_bytes = 1_000_000
  config.model.num_layers = 1
  section = train_step.run(lengths=(TINY,), repeats=1, warmup=0, steps_per_sample=1, config=config)
  assert [row[1] for row in section.rows] == ['framework', 'reference']


def test_run_writes_the_page_of_bias_construction(tmp_path):
  # The command line end to end, on the cheapest measurement.
  out = tmp_path / 'docs' / 'benchmarks.md'
  page = run.main(
      ['--only', 'bias_construction', '--length', str(TINY), '--repeats', '1', '--warmup', '0', '--out', str(out)]
  )
  assert out.read_text() == page
  assert '## Machine' in page and 'backend: cpu' in page and '## 1. Building the bias' in page
  for name, _ in bias_construction.ENCODERS:
    for strategy in bias_construction.STRATEGIES:
      assert f'| {name} | {TINY} | {strategy} |' in page
  with pytest.raises(SystemExit):
    run.parse(['--only', 'no_such_benchmark'])


def test_verdicts():
  assert report.verdict(1.04, 1.05).startswith('met')
  assert 'missed' in report.verdict(1.2, 1.1)


@pytest.mark.slow  # every benchmark row compiled once: a long end-to-end check
def test_blockwise_runs():
  from benchmarks import blockwise

  rows = blockwise.ENCODERS[:1] + tuple(r for r in blockwise.ENCODERS if r[0] == 'transformer_xl')
  memory, timing = blockwise.run(length=TINY, memory_length=TINY, repeats=1, warmup=0, rows=rows)
  assert [row[1] for row in memory.rows] == [row[1] for row in timing.rows] == ['alibi', 'transformer_xl']
  assert memory.rows[0][-1].startswith(('met', '**missed**')) and memory.rows[1][-1] == ''
  assert 'vs plain' in timing.rows[1][-1]


@pytest.mark.slow  # compiles and times one grid row end to end
def test_grid_runs():
  from benchmarks import grid

  rows = grid.ENCODERS[:1] + tuple(r for r in grid.ENCODERS if r[0] == 'fire2d')
  memory, timing = grid.run(
      shape=(4, 4), memory_shape=(4, 4), repeats=1, warmup=0, rows=rows, time_shapes=[(4, 4), (3, 5)]
  )
  assert [row[1] for row in memory.rows] == ['alibi2d', 'fire2d']
  assert [row[:2] for row in timing.rows] == [
      ['4x4 (16)', 'alibi2d'],
      ['4x4 (16)', 'fire2d'],
      ['3x5 (15)', 'alibi2d'],
      ['3x5 (15)', 'fire2d'],
  ]
  assert all(row[-1].startswith(('met', '**missed**')) and row[-2] != '-' for row in memory.rows)


def test_grid_sides_option():
  assert run.parse(['--only', 'grid', '--grid-sides', '32,64']).grid_sides == [32, 64]
  assert run.parse(['--only', 'grid']).grid_sides == []
  for bad in ('32,x', '0'):
    with pytest.raises(SystemExit):
      run.parse(['--grid-sides', bad])


def test_fire_pieces_runs_and_its_contenders_agree():
  from benchmarks import fire_pieces

  section = fire_pieces.run(length=16, repeats=1, warmup=0)
  assert [row[0] for row in section.rows] == ['fire (16)', 'fire2d (16)']
  assert section.rows[1][-1].startswith(('met', '**missed**'))
  for row in fire_pieces.ROWS:
    fns = fire_pieces.contenders(row, 36)
    units, pieces = [jax.jit(fns[name][0])(*fns[name][1]) for name in ('units', 'pieces')]
    # One absolute scale: the gradient of the heads' constant output bias is zero (softmax ignores a shift) up
    # to rounding, so its leaf holds noise of a few 1e-6 in both.
    scale = max(float(np.abs(b).max()) for b in jax.tree.leaves(units))
    for a, b in zip(jax.tree.leaves(units), jax.tree.leaves(pieces)):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * scale, err_msg=row)


def test_irpe_buckets_runs_and_its_contenders_agree():
  from benchmarks import irpe_buckets

  section = irpe_buckets.run(side=3, repeats=1, warmup=0, rows=irpe_buckets.ROWS[1:])
  assert len(section.rows) == 1 and section.rows[0][0] == 'irpe ctx (qkv) (10)'
  fns = irpe_buckets.contenders(irpe_buckets.ROWS[1][1], 4)
  per_pair, table = [fns[name][0](*fns[name][1]) for name in ('per pair', 'offset table')]
  # The same gradients either way: q, k, v and the encoder's tables (the coordinates and buckets take none).
  for a, b in zip(
      jax.tree.leaves(per_pair[:3] + (per_pair[3]['params'],)), jax.tree.leaves(table[:3] + (table[3]['params'],))
  ):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert len(jax.tree.leaves(per_pair[3]['params'])) == 3  # the q, k and v tables
