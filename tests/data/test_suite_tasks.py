"""The tasks added for the suite, against the reference code's examples and direct re-computation of each label."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from relpos_jax.data import make_task
from relpos_jax.data.tasks import CHOMSKY_TASKS
from relpos_jax.data.tasks.flip_flop import BIT0, IGNORE, READ, WRITE
from relpos_jax.data.tasks.recall import PASSKEY_QUESTION
from relpos_jax.data.tasks.regular import evaluate_modular_expressions


def test_the_chomsky_suite_has_its_fifteen_tasks():
  assert sorted(CHOMSKY_TASKS) == sorted(
      [
          'even_pairs',
          'modular_arithmetic',
          'parity_check',
          'cycle_navigation',
          'stack_manipulation',
          'reverse_string',
          'modular_arithmetic_brackets',
          'solve_equation',
          'duplicate_string',
          'missing_duplicate',
          'odds_first',
          'binary_addition',
          'binary_multiplication',
          'compute_sqrt',
          'bucket_sort',
      ]
  )


def test_the_one_task_list_is_what_the_suite_and_the_docs_read():
  """relpos_jax/data/tasks/registry.py is the one list: the suite's config derives its tasks from it (every task
  but `shift` and RULER's two, in the registry's order), and the guide names every registered task with the count the guide and
  the README state."""
  import os
  import re

  from relpos_jax import resources
  from relpos_jax.data.tasks import OTHER_TASKS, TASKS

  algorithmic = resources.config_module('algorithmic')
  assert algorithmic.SUITE_CHOMSKY + algorithmic.SUITE_OTHER == CHOMSKY_TASKS + tuple(
      t for t in OTHER_TASKS if t not in ('shift', 'variable_tracking', 'common_words')
  )
  assert set(CHOMSKY_TASKS + OTHER_TASKS) == set(TASKS) and len(CHOMSKY_TASKS + OTHER_TASKS) == len(TASKS)
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  with open(os.path.join(repo, 'docs', 'guide', 'README.md'), encoding='utf-8') as f:
    guide = f.read()
  start = guide.index('- `relpos_jax.data`:')  # the bullet, up to the next bullet or paragraph
  paragraph = ' '.join(re.split(r'\n- |\n\n', guide[start + 1 :])[0].split())
  assert f'{len(TASKS)} length-generalization tasks' in paragraph
  assert not [t for t in TASKS if f'`{t}`' not in paragraph], 'docs/guide does not name every registered task'
  with open(os.path.join(repo, 'README.md'), encoding='utf-8') as f:
    readme = ' '.join(f.read().split())
  assert re.search(rf'\b{len(TASKS)} length-generalization tasks', readme)


def _outputs(task, n, seed=0, batch=64):
  b = task.sample(np.random.default_rng(seed), batch, n)
  k = task.input_length(n)
  return b['inputs'][:, :k], b['targets'][:, k:], b['accuracy_mask'][:, k:]


# ---------------------------------------------------------------- regular
def _mod_expr(text, m=5):
  ids = {'+': m, '-': m + 1, '*': m + 2}
  return np.array([[ids[c] if c in ids else int(c) for c in text.replace(' ', '')]])


@pytest.mark.parametrize(
    'text, value', [('1+2*3', 2), ('1-1-1', 4), ('0*1+4*3-2', 0), ('3', 3), ('2-3*4', 0), ('4*4*4-1', 3)]
)
def test_modular_arithmetic_reference_examples(text, value):
  assert evaluate_modular_expressions(_mod_expr(text), 5)[0] == value


def test_modular_arithmetic_labels_equal_python_evaluation_and_lengths_are_odd():
  task = make_task('modular_arithmetic')
  assert task.input_length(8) == 7 and task.input_length(9) == 9 and task.total_length(8) == 8
  x, y, _ = _outputs(task, 11, batch=200)
  symbols = {5: '+', 6: '-', 7: '*'}
  for row, label in zip(x, y[:, 0]):
    text = ''.join(symbols.get(int(t), str(int(t))) for t in row)
    assert eval(text) % 5 == label  # Python's precedence: * before + and -
  assert set(x[:, 1::2].ravel()) == {5, 6, 7} and x[:, ::2].max() < 5


def test_cycle_navigation():
  task = make_task('cycle_navigation')
  x, y, _ = _outputs(task, 9, batch=200)
  assert np.array_equal(y[:, 0], (x.astype(int) - 1).sum(1) % 5)
  assert task.num_classes == 5 and task.input_alphabet_size == 3


# ---------------------------------------------------------------- context-free
def _run_stack(tokens):
  stack, actions = [], False
  for t in tokens:
    actions = actions or t >= 2
    if not actions:
      stack.append(t)
    elif t == 2:
      stack = stack[:-1]
    else:
      stack.append(t - 3)
  return stack[::-1]


def test_stack_manipulation_reference_examples_and_recomputation():
  task = make_task('stack_manipulation')
  assert _run_stack([0, 1, 1, 0, 4, 2, 2]) == [1, 1, 0] and _run_stack([1, 1, 0, 2, 2, 2]) == []
  for n in (1, 2, 7, 30):
    x, y, acc = _outputs(task, n, batch=100)
    for row, out, mask in zip(x, y, acc):
      want = _run_stack(row.tolist()) + [2]
      assert out.tolist() == want + [0] * (n + 1 - len(want))
      assert mask.tolist() == [1.0] * len(want) + [0.0] * (n + 1 - len(want))


def _decode_brackets(row, symbols):
  return ''.join(symbols[t - 5] if t >= 5 else str(t) for t in row.tolist())


def test_modular_arithmetic_brackets_evaluates_its_expression():
  task = make_task('modular_arithmetic_brackets')
  for n in (1, 2, 3, 4, 5, 12, 40):
    x, y, _ = _outputs(task, n, batch=50)
    for row, label in zip(x, y[:, 0]):
      text = _decode_brackets(row, '+-*()x=')
      assert len(text) == n and eval(text) % 5 == label, text


def test_solve_equation_answer_satisfies_the_equation():
  task = make_task('solve_equation')
  for n in (3, 4, 9, 40):
    x, y, _ = _outputs(task, n, batch=50)
    for row, answer in zip(x, y[:, 0]):
      text = _decode_brackets(row, '+-()x=')
      lhs, rhs = text.split('=')
      assert lhs.count('x') == 1 and eval(lhs.replace('x', str(answer))) % 5 == int(rhs), text
  x, y, _ = _outputs(task, 2)
  assert not x.any() and not y.any()


# ---------------------------------------------------------------- context-sensitive
def test_odds_first_follows_the_reference_code():
  task = make_task('odds_first')
  x, y, _ = _outputs(task, 8, batch=512)
  row = np.flatnonzero((x == [0, 0, 1, 1, 0, 1, 0, 1]).all(1))[0]
  assert y[row].tolist() == [0, 1, 1, 1, 0, 1, 0, 0]


def _little_endian(bits):
  return sum(b << i for i, b in enumerate(bits))


@pytest.mark.parametrize('n', [3, 4, 9, 40, 200])
def test_binary_multiplication_is_the_little_endian_product(n):
  task = make_task('binary_multiplication')
  x, y, acc = _outputs(task, n, batch=40)
  for row, out, mask in zip(x, y, acc):
    k = row.tolist().index(2)
    product = _little_endian(row[:k].tolist()) * _little_endian(row[k + 1 :].tolist())
    bits = [int(c) for c in reversed(bin(product)[2:])]
    assert out.tolist() == bits + [2] + [0] * (n - 1 - len(bits))
    assert mask.sum() == len(bits) + 1


def test_binary_multiplication_reference_example_and_short_lengths():
  task = make_task('binary_multiplication')
  x, y, _ = _outputs(task, 9, batch=20000, seed=3)
  hits = np.flatnonzero((x == [0, 0, 1, 2, 0, 1, 1, 0, 1]).all(1))
  assert hits.size and y[hits[0]].tolist() == [0, 0, 0, 1, 1, 0, 1, 2, 0]  # 4 * 22 = 88
  for n in (1, 2):
    _, y, acc = _outputs(task, n)
    assert (y == [0] * (n - 1) + [2]).all() and acc.all()


@given(n=st.integers(1, 120), seed=st.integers(0, 2**31))
def test_compute_sqrt_is_the_big_endian_integer_root(n, seed):
  task = make_task('compute_sqrt')
  x, y, _ = _outputs(task, n, seed=seed, batch=4)
  assert y.shape == (4, math.ceil(n / 2))
  for row, out in zip(x, y):
    v = int(''.join(map(str, row.tolist())), 2)
    assert 1 <= v < 2 ** n and int(''.join(map(str, out.tolist())), 2) == math.isqrt(v)


# ---------------------------------------------------------------- flip-flop, mqar, passkey
def test_flip_flop_reads_return_the_last_write():
  task = make_task('flip_flop')
  seq = task.sequences(np.random.default_rng(0), 64, 50)
  assert seq.shape == (64, 102)
  ops, bits = seq[:, ::2], seq[:, 1::2] - BIT0
  assert (ops[:, 0] == WRITE).all() and (ops[:, -1] == READ).all()
  for o, b in zip(ops, bits):
    last = None
    for op, bit in zip(o.tolist(), b.tolist()):
      if op == WRITE:
        last = bit
      elif op == READ:
        assert bit == last
  batch = task.sample(np.random.default_rng(0), 64, 50)
  assert np.array_equal(batch['accuracy_mask'][:, ::2], (batch['inputs'][:, ::2] == READ).astype(np.float32))
  assert not batch['accuracy_mask'][:, 1::2].any()


@pytest.mark.parametrize('p_ignore', [0.1, 0.8, 0.98])
def test_flip_flop_instruction_frequencies(p_ignore):
  ops = make_task('flip_flop', p_ignore=p_ignore).sequences(np.random.default_rng(1), 400, 100)[:, 2:-2:2]
  assert abs((ops == IGNORE).mean() - p_ignore) < 0.01
  assert abs((ops == WRITE).mean() - (ops == READ).mean()) < 0.01


def test_flip_flop_bad_probability_is_named():
  with pytest.raises(ValueError, match='p_ignore=1.0'):
    make_task('flip_flop', p_ignore=1.0)


def test_mqar_values_after_queries_are_the_bound_ones():
  task = make_task('mqar', num_keys=16, num_values=8)
  b = task.sample(np.random.default_rng(0), 32, 6)
  seq = np.concatenate([b['inputs'], b['targets'][:, -1:]], axis=1)
  for row, mask in zip(seq, b['accuracy_mask']):
    pairs = dict(zip(row[0:12:2].tolist(), row[1:12:2].tolist()))
    assert len(pairs) == 6 and max(pairs) < 16 and min(pairs.values()) >= 16
    assert sorted(row[12::2].tolist()) == sorted(pairs)
    for k, v in zip(row[12::2].tolist(), row[13::2].tolist()):
      assert pairs[k] == v
    assert np.flatnonzero(mask).tolist() == list(range(12, 24, 2))  # targets[t] = seq[t + 1]
  with pytest.raises(ValueError, match='num_keys=16'):
    task.sample(np.random.default_rng(0), 2, 17)


def test_passkey_text_and_scored_digits():
  task = make_task('passkey', digits=5)
  b = task.sample(np.random.default_rng(0), 8, 3)
  assert b['inputs'].shape == (8, task.total_length(3))
  for inputs, targets, mask in zip(b['inputs'], b['targets'], b['accuracy_mask']):
    text = bytes(np.append(inputs, targets[-1]).astype(np.uint8)).decode('ascii')
    key = text[-5:]
    assert key.isdigit() and text.count(f'The pass key is {key}.') == 1 and text.endswith(PASSKEY_QUESTION + key)
    assert np.flatnonzero(mask).tolist() == list(range(len(text) - 6, len(text) - 1))
  depths = {
      bytes(r.astype(np.uint8)).decode().index('pass key')
      for r in task.sample(np.random.default_rng(1), 64, 6)['inputs']
  }
  assert len(depths) >= 5  # the needle moves


def test_passkey_tokens_follows_the_template_one_token_per_sentence():
  task = make_task('passkey_tokens', digits=3)
  b = task.sample(np.random.default_rng(0), 64, 4)
  assert b['inputs'].shape == (64, task.total_length(4)) == (64, 5 * 4 + 3 * 3 + 5 - 1)
  depths = set()
  for inputs, targets, mask in zip(b['inputs'], b['targets'], b['accuracy_mask']):
    seq = np.append(inputs, targets[-1]).tolist()
    key = seq[-3:]
    needle = seq.index(16)
    assert seq[0] == 15 and seq[needle : needle + 9] == [16, *key, 17, *key, 18] and seq[-4] == 19
    filler = seq[1:needle] + seq[needle + 9 : -4]
    assert filler == [10, 11, 12, 13, 14] * 4 and all(0 <= d <= 9 for d in key)
    assert np.flatnonzero(mask).tolist() == list(range(len(seq) - 4, len(seq) - 1))  # targets[t] = seq[t + 1]
    depths.add((needle - 1) // 5)
  assert depths == set(range(5))  # every depth 0..n is drawn
  with pytest.raises(ValueError, match='digits'):
    make_task('passkey_tokens', digits=0)


# ---------------------------------------------------------------- addition with task-structured positions
def _addition_rows(name, n, batch=32, **kw):
  task = make_task(name, **kw)
  b = task.sample(np.random.default_rng(0), batch, n)
  seq = np.concatenate([b['inputs'], b['targets'][:, -1:]], axis=1)
  return task, b, seq


@pytest.mark.parametrize('n', [1, 3, 12])
def test_addition_answers_the_reversed_sum(n):
  _, b, seq = _addition_rows('addition', n)
  assert 'positions' not in b and seq.shape[1] == 3 * n + 3
  for row, mask in zip(seq, b['accuracy_mask']):
    a = int(''.join(map(str, row[:n])))
    c = int(''.join(map(str, row[n + 1 : 2 * n + 1])))
    assert row[n] == 10 and row[2 * n + 1] == 11
    assert ''.join(map(str, row[2 * n + 2 :][::-1])) == f'{a + c:0{n + 1}d}'
    assert np.flatnonzero(mask).tolist() == list(range(2 * n + 1, 3 * n + 2))


def test_addition_coupled_positions_match_the_reference_layout():
  # HanseulJo/position-coupling: '+' and '=' at start s; the digit of significance k at s + 1 + k.
  n = 3
  _, b, _ = _addition_rows('addition_coupled', n, batch=200, max_position=10)
  pos = b['positions']
  s = pos[:, n]
  want = s[:, None] + np.array([3, 2, 1, 0, 3, 2, 1, 0, 1, 2, 3])  # a2 a1 a0 + b2 b1 b0 = c0 c1 c2 (c3 is last)
  assert np.array_equal(pos, want) and s.min() == 1 and s.max() == 10 - n - 1
  with pytest.raises(ValueError, match='max_position >= 14'):
    make_task('addition_coupled', max_position=13).sample(np.random.default_rng(0), 2, 12)


def test_addition_abacus_positions_count_digits_from_the_least_significant():
  n = 4
  _, b, seq = _addition_rows('addition_abacus', n, batch=200, max_offset=7)
  pos = b['positions']
  offset = pos[:, n - 1] - 1
  want = offset[:, None] + np.array([4, 3, 2, 1, 0, 4, 3, 2, 1, 0, 1, 2, 3, 4])
  want[:, [n, 2 * n + 1]] = 0
  assert np.array_equal(pos, want) and offset.min() == 0 and offset.max() == 7
  with pytest.raises(ValueError, match='max_offset=-1'):
    make_task('addition_abacus', max_offset=-1)


def test_addition_exact_match_scores_the_whole_answer_beside_per_digit_accuracy():
  """The suite's per-sequence statistic on addition is the papers' exact match: one wrong answer digit fails
  its example, while per-digit accuracy loses only 1/(n + 1)."""
  from relpos_jax.data.tasks.metrics import per_token_accuracy, sequence_exact_match

  n = 4
  _, b, _ = _addition_rows('addition', n, batch=8)
  predictions = b['targets'].copy()
  answer = np.flatnonzero(b['accuracy_mask'][0])
  assert answer.size == n + 1
  predictions[0, answer[-1]] = (predictions[0, answer[-1]] + 1) % 10  # one digit of example 0 wrong
  assert sequence_exact_match(predictions, b['targets'], b['accuracy_mask']) == pytest.approx(7 / 8)
  assert per_token_accuracy(predictions, b['targets'], b['accuracy_mask']) == pytest.approx(1 - 1 / (8 * (n + 1)))


def test_flip_flop_sparse_and_dense_sets_score_only_reads():
  """Liu et al.'s FFL(0.98) and FFL(0.1): the scored tokens are the reads, rare in the sparse set (the closing
  read at least) and frequent in the dense one."""
  n, rows = 32, 512
  reads = {}
  for name, p in (('sparse', 0.98), ('dense', 0.1)):
    b = make_task('flip_flop', p_ignore=p).sample(np.random.default_rng(0), rows, n)
    assert (b['accuracy_mask'].sum(axis=1) >= 1).all()  # the closing read
    assert np.array_equal(b['accuracy_mask'][:, ::2], (b['inputs'][:, ::2] == READ).astype(np.float32))
    reads[name] = b['accuracy_mask'].sum() / rows
  assert reads['sparse'] == pytest.approx(1 + (n - 1) * 0.01, abs=0.2)
  assert reads['dense'] == pytest.approx(1 + (n - 1) * 0.45, abs=1.0)
  # expected_reads, by hand: the closing read plus 31 drawn instructions, each a read with (1 - p_ignore) / 2.
  assert make_task('flip_flop', p_ignore=0.98).expected_reads(32) == pytest.approx(1.31)
  assert make_task('flip_flop', p_ignore=0.1).expected_reads(32) == pytest.approx(14.95)
  assert make_task('flip_flop').expected_reads(1) == 1.0
  b = make_task('flip_flop', p_ignore=0.98).sample(np.random.default_rng(1), 20_000, n)
  assert b['accuracy_mask'].sum() / 20_000 == pytest.approx(1.31, abs=0.005)  # sd 0.0008
  with pytest.raises(ValueError, match='length=0'):
    make_task('flip_flop').expected_reads(0)


def test_addition_abacus_as_input_hands_the_indices_to_the_input_embedding_and_evaluates_without_offset():
  """McLeish et al.'s form (reference abacus.py: k random in training, 0 otherwise): the same indices, under
  'input_positions', and the evaluation task draws no offset."""
  n = 4
  task = make_task('addition_abacus', max_offset=7, as_input=True)
  batch = task.sample(np.random.default_rng(0), 200, n)
  assert 'positions' not in batch
  significance = np.array([4, 3, 2, 1, 0, 4, 3, 2, 1, 0, 1, 2, 3, 4])
  offset = batch['input_positions'][:, n - 1] - 1
  want = offset[:, None] + significance
  want[:, [n, 2 * n + 1]] = 0
  assert np.array_equal(batch['input_positions'], want) and offset.max() == 7
  evaluation = task.for_evaluation().sample(np.random.default_rng(0), 50, n)['input_positions']
  want = np.broadcast_to(significance, evaluation.shape).copy()
  want[:, [n, 2 * n + 1]] = 0
  assert np.array_equal(evaluation, want)
  assert task.max_input_position(n) == 7 + n + 1 and task.for_evaluation().max_input_position(n) == n + 1
  default = make_task('addition_abacus', max_offset=7)
  assert default.for_evaluation() is default and default.max_input_position(n) is None
  with pytest.raises(ValueError, match='as_input'):
    make_task('addition_abacus', as_input=1)


@given(n=st.integers(1, 12), m=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_selective_copy_answers_with_the_context_tokens_in_order(n, m, seed):
  """The answer is the context with its blanks removed; every m-subset of slots can hold the tokens."""
  task = make_task('selective_copy', num_symbols=5, num_copy=m)
  batch = task.sample(np.random.default_rng(seed), 8, n)
  t = task.total_length(n)
  assert batch['inputs'].shape == (8, t) == (8, 2 * m + n) and task.vocab_size == 8
  context, sep = batch['inputs'][:, : m + n], batch['inputs'][:, m + n]
  assert np.all(sep == task.sep_id) and np.all((context < 5) | (context == task.blank_id))
  assert np.all((context != task.blank_id).sum(axis=1) == m)
  scored = batch['accuracy_mask'].astype(bool)
  assert np.all(scored.sum(axis=1) == m) and np.array_equal(batch['loss_mask'], batch['accuracy_mask'])
  for row in range(8):
    want = context[row][context[row] != task.blank_id]
    assert np.array_equal(batch['targets'][row][scored[row]], want)
    assert np.array_equal(batch['inputs'][row, m + n + 1 :], want[:-1])  # teacher forcing


def test_selective_copy_places_the_tokens_uniformly_and_refuses_bad_sizes():
  task = make_task('selective_copy', num_symbols=3, num_copy=1)
  context = task.sample(np.random.default_rng(0), 4000, 3)['inputs'][:, :4]
  where = np.argmax(context != task.blank_id, axis=1)
  assert np.allclose(np.bincount(where, minlength=4) / 4000, 0.25, atol=0.03)
  for field in ('num_symbols', 'num_copy'):
    with pytest.raises(ValueError, match=f'{field}=0'):
      make_task('selective_copy', **{field: 0})
