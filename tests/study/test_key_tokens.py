"""The key-token loss (LongPPL's definition): the rule by hand, per-document totals, the refusals, and the path from
a tiny model's evaluation sets to the report (an initialised one: the path, not a finding)."""

from __future__ import annotations

import numpy as np
import pytest

from relpos_jax import resources
from relpos_jax.study import documents, key_tokens
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files, data_sources, loop

LM = str(resources.configs_dir() / 'lm.py')
LN2 = np.log(2.0)


def test_the_rule_is_lsd_above_alpha_and_lcl_above_beta():
  # LSD = short - long: 2.1, 3.0, 1.9, 2.1, 2.4, 2.0; LCL = -long: -0.1, -3.0, -0.5, -1.9, -2.1, -0.3.
  long_nats = [0.1, 3.0, 0.5, 1.9, 2.1, 0.3]
  short_nats = [2.2, 6.0, 2.4, 4.0, 4.5, 2.3]
  mask = key_tokens.key_token_mask(long_nats, short_nats)
  # Key: the first (both hold) and the fourth; the second and fifth are predicted too badly at long context
  # (LCL <= -2), the third gains too little, the last gains exactly alpha (strict, as the reference's `>`).
  assert mask.tolist() == [True, False, False, True, False, False]
  assert (key_tokens.ALPHA, key_tokens.BETA) == (2.0, -2.0)
  assert key_tokens.key_token_mask(long_nats, short_nats, alpha=1.8).tolist() == [True, False, True, True, False, True]


def _targets(nats, documents, positions=None, num_documents=3):
  nats = np.asarray(nats, np.float64)
  positions = np.arange(len(nats)) if positions is None else np.asarray(positions)
  return {'nats': nats, 'documents': np.asarray(documents), 'positions': positions, 'num_documents': num_documents}


def test_totals_sum_the_key_tokens_per_document_in_bits():
  targets = _targets([LN2, 2 * LN2, 4 * LN2, 8 * LN2], [0, 2, 2, 2])
  out = key_tokens.key_token_totals(targets, np.array([True, False, True, True]))
  assert out['key_tokens'] == 3 and out['key_bits'] == pytest.approx(13.0)
  assert out['bits_per_key_token'] == pytest.approx(13 / 3) and out['long_ppl'] == pytest.approx(np.exp(13 * LN2 / 3))
  assert out['tokens'] == 4 and out['bits_per_token'] == pytest.approx(15 / 4)
  assert out['documents'] == [0, 2] and out['document_key_bits'] == pytest.approx([1.0, 12.0])
  assert out['document_key_tokens'] == [1, 2] and out['num_documents'] == 3
  none = key_tokens.key_token_totals(targets, np.zeros(4, bool))
  assert none['key_tokens'] == 0 and none['bits_per_key_token'] is None and none['long_ppl'] is None


def _runs():
  # The reference gains > 2 nats at long context on targets 0 and 2 only; the other run is scored there.
  ref = {64: _targets([3.0, 3.0, 3.0], [0, 1, 1]), 256: _targets([0.5, 2.9, 0.2], [0, 1, 1])}
  other = {64: _targets([1.0, 1.0, 1.0], [0, 1, 1]), 256: _targets([LN2, 9.0, 3 * LN2], [0, 1, 1])}
  return {'alibi': ref, 'rope': other}


def test_the_report_scores_every_run_on_the_references_key_tokens():
  report = key_tokens.key_token_report(_runs(), 'alibi', 64)
  assert report['reference'] == 'alibi' and report['short_length'] == 64 and report['key_tokens'] == {256: 2}
  rope = report['runs']['rope'][256]
  assert rope['key_tokens'] == 2 and rope['bits_per_key_token'] == pytest.approx(2.0)  # (1 + 3) / 2 bits
  assert rope['documents'] == [0, 1] and rope['document_key_bits'] == pytest.approx([1.0, 3.0])
  assert report['runs']['alibi'][256]['key_bits'] == pytest.approx((0.5 + 0.2) / LN2)
  assert 64 not in report['runs']['rope']  # the short length has no key tokens of its own


def test_a_reference_run_that_does_not_exist_is_refused_naming_it_and_the_runs():
  with pytest.raises(
      ValueError, match=r"reference='fire' is invalid; allowed: the label of a run .*\['alibi', 'rope'\]"
  ):
    key_tokens.key_token_report(_runs(), 'fire', 64)
  with pytest.raises(ValueError, match=r'short_length=128 is invalid; .*one of \[64, 256\]'):
    key_tokens.key_token_report(_runs(), 'alibi', 128)
  runs = _runs()
  del runs['alibi'][256]
  with pytest.raises(ValueError, match=r"reference='alibi' is invalid; .*lacks \[256\]"):
    key_tokens.key_token_report(runs, 'alibi', 64)


def test_other_targets_at_another_length_are_refused():
  runs = _runs()
  runs['rope'][256]['positions'] = np.array([0, 1, 5])
  with pytest.raises(ValueError, match=r'rope at 256=.*the 3 targets of the long context'):
    key_tokens.key_token_report(runs, 'alibi', 64)
  with pytest.raises(ValueError, match=r'short_nats=\(2,\) is invalid'):
    key_tokens.key_token_mask([1.0, 2.0, 3.0], [1.0, 2.0])


def test_a_tiny_model_path_from_its_evaluation_to_the_report(tiny_lm):
  overrides = {
      **tiny_lm,
      'eval.lengths': (16, 32, 64),
      'eval.scored_tail': 16,
      'eval.num_tokens': 64,
      'eval.batch_size': 4,
  }
  runs, metrics = {}, {}
  for label, encoder in (('alibi', 'alibi'), ('ggd_bam', 'ggd_bam')):
    config = config_lib.parse(config_files.load_config(LM, {**overrides, 'model.encoder': encoder}))
    data, model = data_sources.build_data(config), loop.build_model(config)
    runs[label], metrics[label] = {}, {}
    for n in (16, 32, 64):
      evaluation = loop.evaluate_set(model, data, n, split='test', token_losses=True)
      runs[label][n] = documents.scored_targets(model, data, n, 'test', nats_by_batch=evaluation.token_nll)
      metrics[label][n] = evaluation.metrics['bits_per_char']
  assert np.array_equal(runs['alibi'][16]['positions'], runs['alibi'][64]['positions'])  # the same 64 targets
  assert len(runs['alibi'][64]['nats']) == 64
  # Every token a key token (thresholds -inf): the key-token loss is the average, the loop's bits per byte.
  everything = key_tokens.key_token_report(runs, 'alibi', 16, alpha=-np.inf, beta=-np.inf)
  for label in runs:
    for n in (32, 64):
      assert everything['runs'][label][n]['bits_per_key_token'] == pytest.approx(metrics[label][n], rel=1e-5)
      assert sum(everything['runs'][label][n]['document_key_tokens']) == 64
  # The paper's thresholds: a subset, the same tokens for both runs, each run scored on them.
  report = key_tokens.key_token_report(runs, 'ggd_bam', 16)
  for n in (32, 64):
    assert 0 <= report['key_tokens'][n] <= 64
    assert (
        report['runs']['alibi'][n]['key_tokens']
        == report['runs']['ggd_bam'][n]['key_tokens']
        == report['key_tokens'][n]
    )
