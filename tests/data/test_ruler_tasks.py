"""RULER's variable tracking and common-word extraction at token level: every example is solved by a reference
reader of its tokens (so it is solvable and its answer correct by construction), lengths and masks, determinism per
seed, and the refusals of sizes that cannot be drawn."""

from __future__ import annotations

import collections

import ml_collections
import numpy as np
import pytest

from relpos_jax import resources
from relpos_jax.data import make_task
from relpos_jax.train import config as config_lib


def _sequences(batch):
  """The full token rows: inputs then the last target."""
  return np.concatenate([batch['inputs'], batch['targets'][:, -1:]], axis=1)


def _track(task, row):
  """Reads a variable-tracking row as RULER's question asks: the statements' assignments, the queried value, then
  every variable that ends up holding it, in chain order; also the answer the row gives."""
  answer_len = task.num_hops + 1
  context, query, answer = row[: -answer_len - 2], row[-answer_len - 2 :][:2], row[-answer_len:]
  assert query[0] == task.query_id
  holds, order = {}, []
  i = 0
  while i < len(context):
    if context[i] == task.noise_id:
      i += 1
      continue
    assert context[i] == task.var_id, (i, context)
    name, source = int(context[i + 1]), int(context[i + 2])
    assert name < task.num_names and name not in holds  # every variable is assigned once
    # A value token, or a name assigned before (the chain's order survives the shuffle into the noise).
    holds[name] = source if source >= task.num_names else holds[source]
    order.append(name)
    i += 3
  return [name for name in order if holds[name] == query[1]], answer.tolist()


@pytest.mark.parametrize('kwargs', [{}, {'num_chains': 3, 'num_hops': 2}, {'num_chains': 4, 'num_hops': 1}])
@pytest.mark.parametrize('n', [1, 7, 64])
def test_variable_tracking_answers_are_the_variables_holding_the_queried_value(kwargs, n):
  task = make_task('variable_tracking', **kwargs)
  batch = task.sample(np.random.default_rng(n), 32, n)
  rows = _sequences(batch)
  assert rows.shape == (32, task.sequence_length(n))
  for row in rows:
    expected, given = _track(task, row)
    assert given == expected and len(given) == task.num_hops + 1
    assert np.sum(row == task.noise_id) == n
  # Scored: exactly the answer tokens, at the end.
  assert np.all(batch['loss_mask'].sum(1) == task.num_hops + 1) and np.all(batch['loss_mask'][:, -1] == 1)
  assert np.array_equal(batch['loss_mask'], batch['accuracy_mask'])


def test_variable_tracking_hand_example():
  # One chain of 2 hops among 2 noise sentences, RULER's "VAR A = v, VAR B = VAR A, VAR C = VAR B".
  task = make_task('variable_tracking', num_chains=1, num_hops=2, num_names=3, num_values=1)
  row = _sequences(task.sample(np.random.default_rng(0), 1, 2))[0].tolist()
  noise, var, query, value = task.noise_id, task.var_id, task.query_id, 3
  a, b, c = row[-3:]
  statements = [[var, a, value], [var, b, a], [var, c, b]]
  context = row[:-5]
  assert sorted([a, b, c]) == [0, 1, 2] and row[-5:-3] == [query, value]
  assert [t for t in context if t != noise] == sum(statements, []) and context.count(noise) == 2


def test_variable_tracking_distractor_chains_hold_other_values():
  task = make_task('variable_tracking', num_chains=3, num_hops=1, num_names=6, num_values=3)
  rows = _sequences(task.sample(np.random.default_rng(3), 64, 5))
  for row in rows:
    values = [t for t in row[:-4] if task.num_names <= t < task.noise_id]
    assert len(values) == 3 and len(set(values)) == 3  # one per chain, all distinct
    assert row[-3] in values  # the query names one of the chains' values


def test_common_words_answer_is_the_most_frequent_words_in_ascending_order():
  task = make_task('common_words', num_common=3, freq_common=4, freq_uncommon=1, num_words=64)
  for n in (1, 5, 61):
    batch = task.sample(np.random.default_rng(n), 16, n)
    rows = _sequences(batch)
    assert rows.shape == (16, task.sequence_length(n)) and task.list_length(n) == 12 + n
    for row in rows:
      listed, query, answer = row[: task.list_length(n)], row[task.list_length(n)], row[-3:]
      counts = collections.Counter(listed.tolist())
      assert query == task.query_id and len(counts) == 3 + n
      top = sorted(word for word, count in counts.items() if count == 4)
      assert answer.tolist() == top and sorted(counts.values())[-3:] == [4, 4, 4]
      assert all(count == 1 for word, count in counts.items() if word not in top)
    assert np.all(batch['loss_mask'].sum(1) == 3) and np.all(batch['loss_mask'][:, -3:] == 1)


def test_common_words_defaults_are_rulers_short_context_setting():
  task = make_task('common_words')
  assert (task.num_common, task.freq_common, task.freq_uncommon) == (10, 6, 1)
  assert task.vocab_size == task.num_words + 2 and task.query_id == task.num_words


@pytest.mark.parametrize('name', ['variable_tracking', 'common_words'])
def test_a_seed_reproduces_a_batch_and_another_seed_does_not(name):
  task = make_task(name)
  a, b = (task.sample(np.random.default_rng(5), 8, 20) for _ in range(2))
  assert all(np.array_equal(a[k], b[k]) for k in a)
  assert not np.array_equal(a['inputs'], task.sample(np.random.default_rng(6), 8, 20)['inputs'])


@pytest.mark.parametrize(
    'name, kwargs, key',
    [
        ('variable_tracking', {'num_chains': 2, 'num_hops': 4, 'num_names': 9}, 'num_names=9'),
        ('variable_tracking', {'num_chains': 3, 'num_values': 2}, 'num_values=2'),
        ('variable_tracking', {'num_hops': 0}, 'num_hops=0'),
        ('common_words', {'freq_common': 1, 'freq_uncommon': 1}, 'freq_common=1'),
        ('common_words', {'num_common': 8, 'num_words': 8}, 'num_words=8'),
    ],
)
def test_sizes_that_cannot_work_are_refused_by_name(name, kwargs, key):
  with pytest.raises(ValueError, match=key):
    make_task(name, **kwargs)


def test_a_list_longer_than_the_vocabulary_is_refused_naming_num_words():
  task = make_task('common_words', num_common=3, num_words=16)
  task.sample(np.random.default_rng(0), 2, 13)  # 3 + 13 words: fits
  with pytest.raises(ValueError, match=r'num_words=16 is invalid.*num_common \+ length = 3 \+ 14'):
    task.sample(np.random.default_rng(0), 2, 14)


def test_a_run_whose_evaluation_length_cannot_fit_is_refused_before_training():
  algorithmic = resources.config_module('algorithmic')
  config = algorithmic.run_config()
  config.data.task = 'common_words'
  config.data.task_kwargs = ml_collections.ConfigDict({'num_common': 3, 'num_words': 40})
  config.data.max_length = 8
  config.eval.lengths = (8, 37)
  config_lib.parse(config)  # 3 + 37 = 40 words: fits
  config.eval.lengths = (8, 38)
  with pytest.raises(config_lib.ConfigError, match=r'config.eval.lengths \(length 38\).*num_words=40'):
    config_lib.parse(config)
  config.eval.lengths = (8,)
  config.data.max_length = 38
  with pytest.raises(config_lib.ConfigError, match=r'config.data.max_length \(length 38\).*num_words=40'):
    config_lib.parse(config)
