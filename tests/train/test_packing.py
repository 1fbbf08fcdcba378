"""data.packing: corpus training batches with document ids and per-document positions.

'none' leaves the training stream exactly today's (the same arrays, no new keys); every mode draws the same
tokens; document ids and positions are hand-checked on windows of a corpus of short documents; a train step
passes them to the model (its loss equals a forward with segment_ids and positions); bad keys are refused by name.
"""

from __future__ import annotations

import hashlib

import hypothesis
import hypothesis.strategies as st
import jax
import numpy as np
import pytest

from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs, loop, state, step, token_inputs


@pytest.fixture(scope='module')
def short_docs(tmp_path_factory):
  """A corpus of 300 documents of 5..20 bytes: a 16-byte window often spans several."""
  root = tmp_path_factory.mktemp('short_docs')
  rng = np.random.default_rng(0)
  for i in range(300):
    text = ''.join(rng.choice(list('abcdefgh '), size=int(rng.integers(5, 21))))
    (root / f'doc{i:03d}.txt').write_text(text)
  return str(root)


@pytest.fixture
def config_for(lm_config, short_docs):
  """config_for(packing, max_offset, encoder): the tiny LM config on the short documents."""

  def make(packing='none', max_offset=None, encoder='alibi'):
    config = lm_config()
    config.model.encoder = encoder
    config.model.dropout_rate = 0.0
    config.data.corpus = short_docs
    config.eval.lengths = (8,)
    if packing != 'none' or max_offset is not None:
      config.data.packing = packing
      config.data.packing_max_offset = max_offset
    return config

  return make


def digest(batch):
  h = hashlib.sha256()
  for key in sorted(batch):
    h.update(key.encode())
    h.update(np.ascontiguousarray(batch[key]).tobytes())
  return h.hexdigest()


def test_none_is_todays_stream(config_for):
  """'none' (and no key at all) gives the old code path's batches bit for bit: lm_batch(corpus.sample_batch(...))."""
  data = inputs.CorpusData(config_lib.parse(config_for()))
  explicit = inputs.CorpusData(config_lib.parse(config_for('none')))
  for s in range(4):
    old = inputs.lm_batch(data.corpus.sample_batch(inputs.train_rng(data.seed, s), 8, 16))
    assert digest(data.train_batch(s)) == digest(old) == digest(explicit.train_batch(s))
    assert set(data.train_batch(s)) == set(old)
  assert 'packing' not in data.describe()


@pytest.mark.parametrize('packing,max_offset', [('continue', None), ('reset', None), ('reset_offset', 7)])
def test_every_mode_draws_the_same_tokens(config_for, packing, max_offset):
  base = inputs.CorpusData(config_lib.parse(config_for()))
  data = inputs.CorpusData(config_lib.parse(config_for(packing, max_offset)))
  for s in range(3):
    batch, old = data.train_batch(s), base.train_batch(s)
    assert digest({k: batch[k] for k in old}) == digest(old)
    assert batch['segment_ids'].dtype == np.int32 and batch['segment_ids'].shape == (8, 16)
    assert ('positions' in batch) == (packing != 'continue')


def test_document_ids_and_positions_by_hand():
  inputs_ = np.array([[5, 6, 0, 7, 8, 9, 0, 0, 4]])  # 0 = DOC_SEPARATOR ends the document before it
  seg = inputs.window_documents(inputs_)
  np.testing.assert_array_equal(seg, [[0, 0, 0, 1, 1, 1, 1, 2, 3]])
  reset = inputs.packed_fields(seg, 'reset', seed=0, step=0)
  np.testing.assert_array_equal(reset['positions'], [[0, 1, 2, 0, 1, 2, 3, 0, 0]])
  assert set(inputs.packed_fields(seg, 'continue', seed=0, step=0)) == {'segment_ids'}
  assert inputs.packed_fields(seg, 'none', seed=0, step=0) == {}


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(
    seps=st.lists(st.booleans(), min_size=1, max_size=24),
    max_offset=st.integers(1, 50),
    seed=st.integers(0, 5),
    step_=st.integers(0, 5),
)
def test_reset_offset_is_reset_plus_one_offset_per_document(seps, max_offset, seed, step_):
  tokens = np.where(np.array(seps), 0, 7)[None].repeat(3, 0)
  seg = inputs.window_documents(tokens)
  reset = inputs.packed_fields(seg, 'reset', seed=seed, step=step_)['positions']
  shifted = inputs.packed_fields(seg, 'reset_offset', seed=seed, step=step_, max_offset=max_offset, batch_size=3)
  offset = shifted['positions'] - reset
  for row in range(3):
    for doc in np.unique(seg[row]):
      values = np.unique(offset[row][seg[row] == doc])
      assert values.size == 1 and 0 <= values[0] <= max_offset  # one offset per document, in range
  again = inputs.packed_fields(seg, 'reset_offset', seed=seed, step=step_, max_offset=max_offset, batch_size=3)
  np.testing.assert_array_equal(again['positions'], shifted['positions'])  # deterministic in (seed, step)
  rows = inputs.packed_fields(
      seg[1:2], 'reset_offset', seed=seed, step=step_, max_offset=max_offset, batch_size=3, rows=slice(1, 2)
  )
  np.testing.assert_array_equal(rows['positions'], shifted['positions'][1:2])  # a process's rows of the batch


def test_windows_span_documents(config_for):
  """On short documents some rows hold several; positions restart where the ids change."""
  data = inputs.CorpusData(config_lib.parse(config_for('reset')))
  batch = data.train_batch(0)
  seg, pos = batch['segment_ids'], batch['positions']
  assert seg.max() >= 1
  starts = np.diff(seg, axis=1) != 0
  np.testing.assert_array_equal(pos[:, 1:][starts], 0)
  np.testing.assert_array_equal(pos[:, 1:][~starts], pos[:, :-1][~starts] + 1)
  # the document changes right after a separator byte
  np.testing.assert_array_equal(starts, batch['inputs'][:, :-1] == 0)


def test_train_step_passes_documents_to_the_model(config_for):
  """The step's forward reads the batch's segment_ids and positions: its logits are the model's with them, and
  differ from the model's without them."""
  config = config_for('reset')
  data = inputs.CorpusData(config_lib.parse(config))
  model = loop.build_model(config, seed=0)
  batch = data.train_batch(0)
  parts, params = state.split_model(model)
  logits = step.forward(parts.graphdef, params, parts.rest, batch, deterministic=True, use_padding_mask=False)
  expected = model(batch['inputs'], positions=batch['positions'], segment_ids=batch['segment_ids'])
  np.testing.assert_allclose(logits, expected, atol=1e-5)
  plain = model(batch['inputs'])
  assert float(np.max(np.abs(np.asarray(plain) - np.asarray(expected)))) > 1e-4


@pytest.mark.parametrize(
    'overrides,key',
    [
        (dict(packing='shuffle'), 'data.packing'),
        (dict(packing='reset_offset'), 'data.packing_max_offset'),
        (dict(packing='reset', packing_max_offset=4), 'data.packing_max_offset'),
        (dict(packing='reset_offset', packing_max_offset=0), 'data.packing_max_offset'),
    ],
)
def test_bad_keys_are_refused_by_name(config_for, overrides, key):
  config = config_for()
  for name, value in overrides.items():
    config.data[name] = value
  with pytest.raises(config_lib.ConfigError, match=key):
    config_lib.validate(config)


def test_positions_per_document_refuse_randomized_positions(config_for):
  config = config_for('reset', encoder='randomized(rope, max_position=64)')
  with pytest.raises(config_lib.ConfigError, match='data.packing'):
    config_lib.validate(config)
  config_lib.validate(config_for('continue', encoder='randomized(rope, max_position=64)'))


def test_offsets_beyond_a_learned_table_are_refused(config_for):
  config = config_for('reset_offset', max_offset=100, encoder='learned(max_length=64) + alibi')
  with pytest.raises(config_lib.ConfigError, match='data.packing_max_offset'):
    config_lib.validate(config)
  config_lib.validate(config_for('reset_offset', max_offset=40, encoder='learned(max_length=64) + alibi'))


def test_a_packed_run_trains_and_records_its_packing(config_for, tmp_path):
  """Three jitted train steps with 'reset_offset' batches (segment_ids, positions) through the loop."""
  config = config_for('reset_offset', 5)
  config.train.steps, config.train.log_every, config.train.checkpoint_every = 3, 3, 3
  config.eval.every, config.optim.warmup_steps = 0, 1
  result = loop.train(config, tmp_path / 'run', devices=jax.devices()[:1])
  assert result.data.describe()['packing'] == 'reset_offset'
  assert int(result.state.step) == 3 and np.isfinite(result.final_metrics['loss'])


def test_bpe_documents_change_after_the_separator_token(config_for, tmp_path):
  """BPE windows: a token's document is its first byte's; the id steps up right after a token holding the
  separator byte, and the tokens are those of the 'none' stream."""
  pytest.importorskip('tokenizers')

  def bpe(packing):
    config = config_for(packing)
    config.data.tokenizer, config.data.vocab_size = 'bpe', 300
    config.data.tokenizer_cache = str(tmp_path / 'bpe')
    config.eval.lengths = (4,)
    return token_inputs.BPECorpusData(config_lib.parse(config))

  data, base = bpe('reset'), bpe('none')
  ids, starts = data.split_tokens('train')
  split = np.asarray(data.corpus.tokens('train'))
  ends = np.append(starts[1:], split.size)
  holds_separator = np.array([np.any(split[a:b] == 0) for a, b in zip(starts, ends)])
  spanning = 0
  for s in range(3):
    batch, old = data.train_batch(s), base.train_batch(s)
    assert digest({k: batch[k] for k in old}) == digest(old)
    seg = batch['segment_ids']
    for r in range(seg.shape[0]):
      # this row's first token index in the split: the window is ids[k : k + 17]
      k = np.flatnonzero(np.all(np.lib.stride_tricks.sliding_window_view(ids, 16) == batch['inputs'][r], axis=1))[0]
      np.testing.assert_array_equal(np.diff(seg[r]), holds_separator[k : k + 15].astype(int))
      spanning += int(seg[r].max() > 0)
  assert spanning > 0


def test_paths_without_a_document_mask_are_refused(config_for):
  config = config_for('continue', encoder='path + fox')
  with pytest.raises(config_lib.ConfigError, match="data.packing='continue'.*path"):
    config_lib.validate(config)
  config = config_for('reset')
  config.model.attention_implementation = 'pallas'
  with pytest.raises(config_lib.ConfigError, match="data.packing='reset'.*Pallas"):
    config_lib.validate(config)
