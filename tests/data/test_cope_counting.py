"""cope_counting: CoPE's counting task (Golovneva et al. 2024) as its reference generator draws it.

Hand-checked: the reference tokenizer's words, the only program one statement can be, the probabilities of the
two-statement programs (derived below from count_data_gen.py's weights and redraws), and an interpreter of the
reference's text that recomputes every answer.
"""

import numpy as np
import pytest

from relpos_jax.data import make_task, sequence_exact_match


def _interpret(text: str, num_vars: int, max_value: int) -> tuple[int, str, int]:
  """(statements, printed variable, its value) of one example's text, by running the program it writes."""
  words = text.split()
  assert words[-3] == 'print', text
  values, i, statements = {}, 0, 0
  body = words[:-3]
  while i < len(body):
    statements += 1
    if body[i] == 'pass;':
      i += 1
    elif body[i + 1] == '=':
      assert body[i + 2 : i + 4] == ['0', ';'], text
      values[body[i]] = 0
      i += 4
    else:
      assert body[i + 1] == '++;' and body[i] in values, text  # only a variable already set is incremented
      values[body[i]] += 1
      assert values[body[i]] <= max_value, text
      i += 2
  assert set(values) <= set('abcdefghijklmnopqrstuvwxyz'[:num_vars])
  return statements, words[-2], values[words[-2]]


def test_ids_are_the_reference_tokenizers_words():
  t = make_task('cope_counting')  # num_vars 3, max_value 10: values 0..10, then = ; pass; ++; print, a b c, pad
  assert (t.vocab_size, t.pad_id, t.num_classes) == (20, 19, 20)
  # SimpleTokenizer.encode: lower case, split on spaces; 'pass;' and '++;' stay one word, 'a = 0 ;' is four.
  assert t.encode('A = 0 ; pass; a ++; print a 1') == [16, 11, 0, 12, 13, 16, 14, 15, 16, 1]
  assert t.decode([16, 11, 0, 12, 13, 16, 14, 15, 16, 1, 19, 19]) == 'a = 0 ; pass; a ++; print a 1'
  assert t.encode('print c 10') == [15, 18, 10]
  with pytest.raises(ValueError, match="word='d'.*allowed"):
    t.encode('d = 0 ;')
  with pytest.raises(ValueError, match="word='11'"):
    t.encode('a 11')


def test_one_statement_is_always_a_set_then_its_print():
  # With n = 1 the program must set a variable (else nothing can be printed), so it is "x = 0 ; print x 0".
  t = make_task('cope_counting')
  b = t.sample(np.random.default_rng(0), 300, 1)
  assert b['inputs'].shape == (300, 6) == (300, t.total_length(1))
  x = b['inputs'][:, 0]
  assert set(x.tolist()) == {16, 17, 18}  # a, b, c: the variable set is uniform over num_vars
  expect_in = np.stack([x, 11 + 0 * x, 0 * x, 12 + 0 * x, 15 + 0 * x, x], 1)
  expect_out = np.stack([11 + 0 * x, 0 * x, 12 + 0 * x, 15 + 0 * x, x, 0 * x], 1)
  assert np.array_equal(b['inputs'], expect_in) and np.array_equal(b['targets'], expect_out)
  assert b['loss_mask'].tolist() == [[0, 0, 0, 0, 0, 1]] * 300 and b['padding_mask'].all()
  assert np.array_equal(b['accuracy_mask'], b['loss_mask']) and np.all(t.answers(b) == 0)


def test_two_statement_programs_have_the_references_probabilities():
  # count_data_gen.py draws set:pass:increment as 1:50:7 and redraws a failed increment, so with no variable
  # set a statement is set 1/51, pass 50/51; with one set: set 1/58, pass 50/58, increment 7/58. A program that
  # set nothing is redrawn whole. At n = 2: P(kept) = 1/51 + 50/51 * 1/51 = 101/2601, of which "set first" is
  # 51/2601: P(first is a set | kept) = 51/101; then P(second is pass) = 50/58, increment 7/58, set 1/58.
  t = make_task('cope_counting')
  b = t.sample(np.random.default_rng(1), 12_000, 2)
  first_set = b['inputs'][:, 1] == 11
  assert abs(first_set.mean() - 51 / 101) < 0.02  # 4.4 standard errors
  second, after = b['inputs'][first_set, 4], b['inputs'][first_set, 5]  # 'pass;', or a variable then '++;' / '='
  assert abs(np.mean(second == 13) - 50 / 58) < 0.02
  assert abs(np.mean(np.isin(second, [16, 17, 18]) & (after == 14)) - 7 / 58) < 0.015
  assert abs(np.mean(np.isin(second, [16, 17, 18]) & (after == 11)) - 1 / 58) < 0.008
  # "pass; x = 0 ;" is the only program that sets second: it prints x = 0.
  assert np.all(b['inputs'][~first_set, 0] == 13) and np.all(t.answers(b)[~first_set] == 0)


@pytest.mark.parametrize('n', [3, 17, 64])
@pytest.mark.parametrize('kwargs', [{}, {'num_vars': 1, 'max_value': 2}, {'num_vars': 5}])
def test_every_answer_is_the_value_the_program_prints(n, kwargs):
  t = make_task('cope_counting', **kwargs)
  b = t.sample(np.random.default_rng(n), 64, n)
  answers = t.answers(b)
  for row in range(64):
    real = int(b['padding_mask'][row].sum())
    text = t.decode(np.append(b['inputs'][row, :real], b['targets'][row, real - 1]))
    statements, _, value = _interpret(text, t.num_vars, t.max_value)
    assert statements == n and value == answers[row]
  if kwargs.get('max_value') == 2 and n == 64:  # one variable, 64 statements: the cap is reached, never passed
    assert answers.max() == 2


def test_exact_match_reads_only_the_answer():
  t = make_task('cope_counting')
  b = t.sample(np.random.default_rng(3), 4, 10)
  preds = b['targets'].copy()
  assert sequence_exact_match(preds, b['targets'], b['accuracy_mask']) == 1.0
  preds[~b['accuracy_mask'].astype(bool)] = 0  # every context prediction wrong: not scored
  assert sequence_exact_match(preds, b['targets'], b['accuracy_mask']) == 1.0
  row, col = 2, int(np.flatnonzero(b['accuracy_mask'][2])[0])
  preds[row, col] = (preds[row, col] + 1) % 11  # a wrong count
  assert sequence_exact_match(preds, b['targets'], b['accuracy_mask']) == 0.75


def test_bad_arguments_are_named():
  for kwargs, match in (
      ({'num_vars': 0}, 'num_vars=0'),
      ({'num_vars': 27}, 'num_vars=27.*<= 26'),
      ({'max_value': 0}, 'max_value=0'),
  ):
    with pytest.raises(ValueError, match=match):
      make_task('cope_counting', **kwargs)
