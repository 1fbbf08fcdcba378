"""Tests for relpos_jax.data.tasks and relpos_jax.data.buckets."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from relpos_jax.data import (
    BatchSpec,
    bucket_for,
    length_buckets,
    make_task,
    pad_batch,
    per_token_accuracy,
    sample_bucketed,
    sequence_exact_match,
    task_buckets,
    task_names,
)

ENCODER_TASKS = (
    'even_pairs',
    'parity_check',
    'reverse_string',
    'duplicate_string',
    'binary_addition',
    'bucket_sort',
    'shift',
    'missing_duplicate',
    'modular_arithmetic',
    'cycle_navigation',
    'stack_manipulation',
    'modular_arithmetic_brackets',
    'solve_equation',
    'odds_first',
    'binary_multiplication',
    'compute_sqrt',
)
CAUSAL_TASKS = (
    'count_copy',
    'cope_counting',
    'selective_copy',
    'flip_flop',
    'mqar',
    'passkey',
    'passkey_tokens',
    'variable_tracking',
    'common_words',
    'addition',
    'addition_coupled',
    'addition_abacus',
)
ALL_TASKS = ENCODER_TASKS + CAUSAL_TASKS
# Tasks whose scored positions are not the last output_length(n) ones: flip_flop scores its read bits (a varying
# number, at most n), mqar the value after each query (n, interleaved with the queries).
SCATTERED_SCORING = ('flip_flop', 'mqar')
# Tasks whose examples of one length differ in tokens: each row is right-padded to total_length(n) by the task,
# which hands its own padding_mask (cope_counting: statements of 1, 2 or 4 tokens; its answer is one token).
RAGGED = ('cope_counting',)


def _bits(s):
  return [int(ch) for ch in s]


def _find_row(task, n, pattern, seed=0, batch=4096):
  """Sample a big batch and return (inputs row, targets row) whose input string equals `pattern`."""
  b = task.sample(np.random.default_rng(seed), batch, n)
  hits = np.flatnonzero(np.all(b['inputs'][:, :n] == np.asarray(pattern), axis=1))
  assert hits.size, f'pattern {pattern} not drawn; increase batch'
  return b['inputs'][hits[0]], b['targets'][hits[0]]


def _output(task, n, pattern, **kw):
  _, tgt = _find_row(task, n, pattern, **kw)
  return tgt[n:].tolist()


# ------------------------------------------------------------------ registry
def test_registry():
  assert set(task_names()) == set(ALL_TASKS)
  with pytest.raises(ValueError, match="'nope'.*allowed: .*binary_addition"):
    make_task('nope')
  with pytest.raises(ValueError, match='shift'):
    make_task('shift', bogus=1)
  for name in ALL_TASKS:
    t = make_task(name)
    assert t.name == name and t.metadata['name'] == name
    assert t.kind == ('causal' if name in CAUSAL_TASKS else 'bidirectional')


# ------------------------------------------------------------------ hand-checked examples
def test_even_pairs_examples():
  t = make_task('even_pairs')
  assert _output(t, 6, _bits('001110')) == [0]  # one '01', one '10'
  assert _output(t, 7, _bits('0101001')) == [1]  # 3 x '01', 2 x '10'
  assert _output(t, 1, [1]) == [0]
  b = t.sample(np.random.default_rng(1), 256, 9)
  assert np.array_equal(b['targets'][:, 9], (b['inputs'][:, 0] != b['inputs'][:, 8]).astype(np.int32))
  assert t.output_length(9) == 1 and t.num_classes == 2 and t.vocab_size == 4 and t.placeholder_id == 2


def test_parity_check_examples():
  t = make_task('parity_check')
  assert _output(t, 7, _bits('1010100')) == [1]
  assert _output(t, 5, _bits('01111')) == [0]


def test_reverse_string():
  t = make_task('reverse_string')
  assert _output(t, 6, _bits('011010')) == _bits('010110')
  b = t.sample(np.random.default_rng(2), 64, 11)
  assert np.array_equal(b['targets'][:, 11:], b['inputs'][:, :11][:, ::-1])


def test_duplicate_string():
  t = make_task('duplicate_string')
  assert _output(t, 3, _bits('101')) == _bits('101101')
  b = t.sample(np.random.default_rng(2), 64, 10)
  x = b['inputs'][:, :10]
  assert b['inputs'].shape == (64, 30) and np.array_equal(b['targets'][:, 10:], np.concatenate([x, x], 1))


def test_bucket_sort():
  t = make_task('bucket_sort')
  assert t.num_classes == 5 and t.input_alphabet_size == 5
  assert _output(t, 4, [3, 1, 0, 3], batch=8192) == [0, 1, 3, 3]
  b = t.sample(np.random.default_rng(3), 64, 12)
  assert np.array_equal(b['targets'][:, 12:], np.sort(b['inputs'][:, :12], axis=1))
  inp, tgt = b['inputs'][0], b['targets'][0]
  assert sorted(inp[:12].tolist()) == tgt[12:].tolist()
  assert make_task('bucket_sort', alphabet_size=2).sample(np.random.default_rng(0), 4, 5)['inputs'][:, :5].max() <= 1


def test_shift():
  t = make_task('shift')  # offset 1: rotate left by one
  assert _output(t, 4, _bits('0011')) == _bits('0110')
  b = t.sample(np.random.default_rng(4), 32, 9)
  assert np.array_equal(b['targets'][:, 9:], np.roll(b['inputs'][:, :9], -1, axis=1))
  t3 = make_task('shift', offset=3, alphabet_size=4)
  b = t3.sample(np.random.default_rng(4), 32, 2)  # offset wraps: 3 mod 2 = 1
  assert np.array_equal(b['targets'][:, 2:], b['inputs'][:, [1, 0]])
  b = make_task('shift', offset=0).sample(np.random.default_rng(4), 8, 5)
  assert np.array_equal(b['targets'][:, 5:], b['inputs'][:, :5])
  with pytest.raises(ValueError, match='offset=-1'):
    make_task('shift', offset=-1)


def _le_int(bits):
  return sum(int(v) << i for i, v in enumerate(bits))


@pytest.mark.parametrize('n', [3, 4, 9, 40, 500])
def test_binary_addition_is_little_endian_sum(n):
  t = make_task('binary_addition')
  b = t.sample(np.random.default_rng(n), 64 if n < 500 else 8, n)
  for x, y, acc in zip(b['inputs'], b['targets'], b['accuracy_mask']):
    expr, out = x[:n].tolist(), y[n:].tolist()
    assert expr.count(2) == 1
    p = expr.index(2)
    a, c = expr[:p], expr[p + 1 :]
    assert 1 <= len(a) <= n - 2 and len(a) + len(c) == n - 1
    assert _le_int(a) >= 1 and _le_int(c) >= 1
    term = out.index(2)
    assert out[term - 1] == 1  # no high-order zeros
    assert _le_int(out[:term]) == _le_int(a) + _le_int(c)
    assert out[term + 1 :] == [0] * (n - term) and len(out) == n + 1
    assert acc[n:].tolist() == [1.0] * (term + 1) + [0.0] * (n - term)
  assert np.array_equal(b['loss_mask'][:, n:], np.ones((b['inputs'].shape[0], n + 1)))


def test_binary_addition_examples():
  t = make_task('binary_addition')
  # reference example 001 + 01101 (4 + 22 = 26 = 01011 little-endian); the reference CODE pads the output
  # to n + 1 = 10 tokens (its docstring shows one zero fewer)
  expr = _bits('001') + [2] + _bits('01101')
  assert _output(t, 9, expr, batch=20000) == _bits('01011') + [2] + [0, 0, 0, 0]
  # n <= 2: a single number v in [0, 2^n - 2], written as itself, no '+'
  b = t.sample(np.random.default_rng(0), 200, 1)
  assert np.all(b['inputs'] == [[0, 3, 3]]) and np.all(b['targets'][:, 1:] == [[0, 2]])
  b = t.sample(np.random.default_rng(0), 200, 2)
  rows = {tuple(x[:2]): tuple(y[2:]) for x, y in zip(b['inputs'].tolist(), b['targets'].tolist())}
  assert rows == {(0, 0): (0, 2, 0), (1, 0): (1, 2, 0), (0, 1): (0, 1, 2)}


def test_missing_duplicate_and_its_shortcut():
  t = make_task('missing_duplicate')
  assert t.has_shortcut and 'parity' in t.shortcut_reason and t.metadata['has_shortcut']
  assert t.input_alphabet_size == 4 and t.num_classes == 2 and t.placeholder_id == 4
  for n in (2, 7, 8, 101):
    b = t.sample(np.random.default_rng(n), 128, n)
    x, y = b['inputs'][:, :n], b['targets'][:, n]
    h = n // 2
    assert np.all(np.sum(x == 2, axis=1) == 1)
    if n % 2:
      assert np.all(x[:, -1] == 3)
    filled = np.where(x[:, : 2 * h] == 2, y[:, None], x[:, : 2 * h])
    assert np.array_equal(filled[:, :h], filled[:, h:])  # the answer completes w w
    visible = np.where(x < 2, x, 0)
    assert np.array_equal(y, np.sum(visible, axis=1) % 2)  # ...and is the parity of the rest
  assert _output(t, 8, [0, 1, 1, 0, 0, 2, 1, 0]) == [1]  # reference example 01100210 -> 1
  b = t.sample(np.random.default_rng(0), 4, 1)
  assert np.all(b['inputs'][:, 0] == 1) and np.all(b['targets'][:, 1] == 1)
  assert not make_task('parity_check').has_shortcut


def test_count_copy_format():
  t = make_task('count_copy', num_symbols=1)  # the task as docs/suite_contextual ran it: one sequence per length
  a, bb, bos, sep, eos, pad = 0, 1, t.bos_id, t.sep_id, t.eos_id, t.pad_id
  assert (bos, sep, eos, pad, t.vocab_size) == (2, 3, 4, 5, 6)
  n = 3
  seq = [bos, a, a, a, sep, bb, bb, bb, eos]
  b = t.sample(np.random.default_rng(0), 2, n)
  assert b['inputs'].tolist() == [seq[:-1]] * 2 and b['targets'].tolist() == [seq[1:]] * 2
  assert b['loss_mask'].tolist() == [[0, 0, 0, 0, 1, 1, 1, 1]] * 2
  assert t.total_length(n) == 8 and t.prompt_length(n) == 5 and t.output_length(n) == 4
  # exact match: the whole answer (n copies + EOS) must be right
  preds = b['targets'].copy()
  assert sequence_exact_match(preds, b['targets'], b['loss_mask']) == 1.0
  preds[1, -1] = bb  # forgot to stop
  assert sequence_exact_match(preds, b['targets'], b['loss_mask']) == 0.5
  preds[0, 0] = 5  # prompt positions are not scored
  assert sequence_exact_match(preds, b['targets'], b['loss_mask']) == 0.5
  t2 = make_task('count_copy', num_symbols=3)
  s = t2.sequences(np.random.default_rng(1), 64, 4)
  assert np.array_equal(s[:, 6:10], s[:, 1:5] + 3) and np.all(s[:, 5] == t2.sep_id)
  assert len(set(s[:, 1].tolist())) == 3


def test_count_copy_draws_many_distinct_sequences_per_length():
  # Kazemnejad et al.'s first copy variant draws the repeated word from the vocabulary: by default 16 symbols,
  # so 16 distinct sequences of each length, each drawn uniformly (4,096 draws: every one, none under 180).
  t = make_task('count_copy')
  assert (t.num_symbols, t.bos_id, t.sep_id, t.eos_id, t.pad_id, t.vocab_size) == (16, 32, 33, 34, 35, 36)
  for n in (1, 5, 16):
    s = t.sequences(np.random.default_rng(n), 4096, n)
    assert len({tuple(row) for row in s.tolist()}) == 16
    counts = np.bincount(s[:, 1], minlength=16)
    assert counts.min() > 180 and counts.max() < 340  # expected 256 each, sd 15.5
    for row in s[:40]:  # BOS s^n SEP (16 + s)^n EOS
      assert row.tolist() == [32] + [row[1]] * n + [33] + [16 + row[1]] * n + [34]
  b = t.sample(np.random.default_rng(0), 64, 8)
  assert np.array_equal(b['inputs'][:, 10:18], b['inputs'][:, 1:9] + 16)  # the answer maps each example's symbol
  # num_symbols=1 is the old generator exactly: it draws nothing, so the same rng continues unchanged.
  old, rng = make_task('count_copy', num_symbols=1), np.random.default_rng(5)
  assert np.all(old.sequences(rng, 3, 4) == [2, 0, 0, 0, 0, 3, 1, 1, 1, 1, 4]) and rng.integers(1000) == (
      np.random.default_rng(5).integers(1000)
  )


# ------------------------------------------------------------------ common properties
def _check_batch(task, b, n, bsz):
  t = task.total_length(n)
  m = task.output_length(n)
  for key in ('inputs', 'targets', 'loss_mask', 'accuracy_mask'):
    assert b[key].shape == (bsz, t), key
  assert b['inputs'].dtype == np.int32 and b['targets'].dtype == np.int32
  assert b['loss_mask'].dtype == np.float32 and b['accuracy_mask'].dtype == np.float32
  if task.name in RAGGED:
    real = b['padding_mask'].sum(1)
    assert b['padding_mask'].dtype == bool and np.all(b['padding_mask'] == (np.arange(t)[None] < real[:, None]))
    assert np.all(b['loss_mask'].sum(1) == 1) and np.all(b['loss_mask'][np.arange(bsz), real - 1] == 1)
    assert np.all(b['inputs'][~b['padding_mask']] == task.pad_id)
    assert not np.any(b['inputs'][b['padding_mask']] == task.pad_id)
  elif task.name in SCATTERED_SCORING:
    scored = b['loss_mask'].sum(1)
    assert np.all(scored >= 1) and np.all(scored <= m) and set(np.unique(b['loss_mask'])) <= {0.0, 1.0}
  else:
    expect = np.zeros(t, np.float32)
    expect[t - m :] = 1
    assert np.array_equal(b['loss_mask'], np.broadcast_to(expect, (bsz, t)))
  assert np.all(b['accuracy_mask'] <= b['loss_mask']) and np.all(b['accuracy_mask'].sum(1) >= 1)
  assert b['inputs'].min() >= 0 and b['inputs'].max() < task.vocab_size
  assert task.name in RAGGED or not np.any(b['inputs'] == task.pad_id)
  assert b['targets'].min() >= 0 and b['targets'].max() < task.num_classes
  if task.kind == 'bidirectional':
    k = task.input_length(n)
    assert t == k + m and k in (n, n - 1)
    assert np.all(b['inputs'][:, k:] == task.placeholder_id)
    assert np.all(b['inputs'][:, :k] < task.input_alphabet_size)
    assert np.all(b['targets'][:, :k] == 0)


@pytest.mark.parametrize('name', ALL_TASKS)
def test_shapes_masks_reproducible_long(name):
  task = make_task(name)
  for n in (1, 2, 3, 17, 500):
    b = task.sample(np.random.default_rng(7), 4, n)
    _check_batch(task, b, n, 4)
    b2 = task.sample(np.random.default_rng(7), 4, n)
    assert all(np.array_equal(b[k], b2[k]) for k in b)
  x1 = task.sample(np.random.default_rng(1), 8, 30)['inputs']
  x2 = task.sample(np.random.default_rng(2), 8, 30)['inputs']
  assert not np.array_equal(x1, x2)


@pytest.mark.parametrize('name', ALL_TASKS)
def test_bad_arguments_are_named(name):
  task = make_task(name)
  rng = np.random.default_rng(0)
  for bad in (0, -3):
    with pytest.raises(ValueError, match=f'length={bad}'):
      task.sample(rng, 2, bad)
  with pytest.raises(ValueError, match='length=2.5'):
    task.sample(rng, 2, 2.5)
  with pytest.raises(ValueError, match='batch_size=0'):
    task.sample(rng, 0, 3)
  with pytest.raises(TypeError, match='Generator'):
    task.sample(0, 2, 3)


@given(name=st.sampled_from(ALL_TASKS), n=st.integers(1, 200), bsz=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_property_any_length(name, n, bsz, seed):
  task = make_task(name)
  _check_batch(task, task.sample(np.random.default_rng(seed), bsz, n), n, bsz)


# ------------------------------------------------------------------ metrics
def test_metrics_numpy_and_logits():
  targets = np.array([[0, 0, 1, 1], [0, 0, 1, 0]])
  mask = np.array([[0, 0, 1, 1], [0, 0, 1, 1]], np.float32)
  preds = np.array([[1, 1, 1, 1], [0, 0, 1, 1]])
  assert per_token_accuracy(preds, targets, mask) == pytest.approx(0.75)
  assert sequence_exact_match(preds, targets, mask) == pytest.approx(0.5)
  logits = np.eye(2)[preds] * 3.0
  assert per_token_accuracy(logits, targets, mask) == pytest.approx(0.75)
  assert per_token_accuracy(preds, targets, np.zeros_like(mask)) == 0.0
  with pytest.raises(ValueError, match='shape'):
    per_token_accuracy(preds[:, :3], targets, mask)


def test_metrics_jax_under_jit():
  import jax
  import jax.numpy as jnp

  targets = jnp.array([[0, 1, 1], [1, 1, 0]])
  mask = jnp.array([[0, 1, 1], [0, 1, 1]], jnp.float32)
  logits = jax.nn.one_hot(jnp.array([[1, 1, 0], [1, 1, 0]]), 2)
  acc, em = jax.jit(lambda l, t, m: (per_token_accuracy(l, t, m), sequence_exact_match(l, t, m)))(logits, targets, mask)
  assert float(acc) == pytest.approx(0.75) and float(em) == pytest.approx(0.5)


# ------------------------------------------------------------------ buckets
def test_length_buckets():
  assert length_buckets(120, 4) == (30, 60, 90, 120)
  assert length_buckets(10, 3) == (4, 7, 10)
  assert length_buckets(5, 10) == (1, 2, 3, 4, 5)
  assert length_buckets(100, 1) == (100,)
  assert length_buckets(100, 2, min_total_len=51) == (75, 100)
  with pytest.raises(ValueError, match='num_buckets=0'):
    length_buckets(10, 0)
  with pytest.raises(ValueError, match='max_total_len=0'):
    length_buckets(0, 3)
  task = make_task('duplicate_string')  # totals are 3n
  assert task_buckets(task, 40, 4) == (30, 60, 90, 120)
  assert bucket_for(61, (30, 60, 90)) == 90 and bucket_for(60, (30, 60, 90)) == 60
  with pytest.raises(ValueError, match='total length 91'):
    bucket_for(91, (30, 60, 90))


@pytest.mark.parametrize('name', ALL_TASKS)
def test_bucketed_batches_compile_at_most_num_buckets_shapes(name):
  task = make_task(name)
  spec = BatchSpec(batch_size=4, max_length=40, num_buckets=5)
  buckets = spec.buckets(task)
  assert len(buckets) <= 5 and buckets[-1] == task.total_length(40)
  rng = np.random.default_rng(0)
  shapes, lengths = set(), set()
  for _ in range(300):
    b = sample_bucketed(task, rng, spec)
    n = int(b['input_length'][0])
    t = task.total_length(n)
    lengths.add(n)
    shapes.add(tuple((k, v.shape) for k, v in sorted(b.items())))
    tb = b['inputs'].shape[1]
    assert tb == bucket_for(t, buckets) and tb >= t
    assert b['padding_mask'].dtype == bool
    assert np.all(b['padding_mask'].sum(1) <= t) if name in RAGGED else np.all(b['padding_mask'].sum(1) == t)
    assert not b['padding_mask'][:, t:].any() and np.all(b['inputs'][:, t:] == task.pad_id)
    assert np.all(b['loss_mask'][:, t:] == 0) and np.all(b['accuracy_mask'][:, t:] == 0)
    if name == 'flip_flop':  # a varying number of read bits, at most n each
      assert 4 <= b['loss_mask'][:, :t].sum() <= 4 * n
    else:
      unpadded = task.sample(np.random.default_rng(1), 4, n)
      assert b['loss_mask'][:, :t].sum() == unpadded['loss_mask'].sum()
  assert len(shapes) <= 5
  assert min(lengths) <= 3 and max(lengths) >= 38  # uniform over 1..40
  # reproducible stream
  r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
  for _ in range(5):
    a, b = sample_bucketed(task, r1, spec), sample_bucketed(task, r2, spec)
    assert all(np.array_equal(a[k], b[k]) for k in a)
  with pytest.raises(ValueError, match='exceeds the largest bucket'):
    sample_bucketed(task, rng, spec, length=41)


def test_pad_batch_and_spec_errors():
  task = make_task('reverse_string')
  b = task.sample(np.random.default_rng(0), 2, 3)
  p = pad_batch(b, 10, task.pad_id)
  assert p['inputs'].shape == (2, 10) and p['padding_mask'][:, :6].all() and not p['padding_mask'][:, 6:].any()
  assert np.array_equal(p['targets'][:, :6], b['targets'])
  with pytest.raises(ValueError, match='target_len=5'):
    pad_batch(b, 5, task.pad_id)
  with pytest.raises(ValueError, match='min_length=9'):
    BatchSpec(batch_size=2, max_length=8, num_buckets=2, min_length=9)
  with pytest.raises(ValueError, match='num_buckets=0'):
    BatchSpec(batch_size=2, max_length=8, num_buckets=0)


@given(name=st.sampled_from(ALL_TASKS), max_length=st.integers(1, 120), k=st.integers(1, 12))
def test_property_buckets_cover_every_length(name, max_length, k):
  task = make_task(name)
  buckets = task_buckets(task, max_length, k)
  assert 1 <= len(buckets) <= k and list(buckets) == sorted(set(buckets))
  used = {bucket_for(task.total_length(n), buckets) for n in range(1, max_length + 1)}
  assert used <= set(buckets) and buckets[-1] == task.total_length(max_length)
