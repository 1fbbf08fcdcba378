"""Per-document totals of a run add up to the loop's bits per character, for bytes and for BPE."""

from __future__ import annotations

import numpy as np
import pytest

from relpos_jax import resources
from relpos_jax.study import documents, stats
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import data_sources, loop

LM = str(resources.configs_dir() / 'lm.py')


def _config(variant, tiny_lm, tmp_path, **more):
  overrides = {
      **tiny_lm,
      'eval.lengths': (16, 32),
      'eval.num_examples': 40,
      'eval.batch_size': 16,
      **more,
  }
  if variant == 'bpe':
    overrides.update({'data.vocab_size': 280, 'data.tokenizer_cache': str(tmp_path / 'bpe')})
  return config_files.load_config(f'{LM}:{variant}' if variant else LM, overrides)


@pytest.mark.parametrize('variant', [None, 'bpe'])
def test_totals_add_up_to_the_loop_metric(variant, tiny_lm, tmp_path):
  config = _config(variant, tiny_lm, tmp_path)
  data = data_sources.build_data(config_lib.parse(config))
  model = loop.build_model(config_lib.parse(config))
  for length in (16, 32):
    totals = documents.document_totals(model, data, length, 'test')
    metrics = loop.evaluate_set(model, data, length, split='test', mesh=None).metrics
    assert totals['num_documents'] == len(data.corpus.split_files('test'))
    assert totals['bits'].sum() / totals['characters'].sum() == pytest.approx(metrics['bits_per_char'], rel=1e-5)
    assert np.count_nonzero(totals['characters']) >= 2  # the windows spread over several documents
  # The bootstrap takes them as they are: a model against itself differs by exactly 0.
  out = stats.document_bootstrap(totals['bits'], totals['characters'], totals['bits'], totals['characters'])
  assert out['low'] == out['high'] == 0.0 and not out['resolved']


@pytest.mark.parametrize('variant', [None, 'bpe'])
def test_totals_from_the_evaluation_pass_equal_a_second_pass(variant, tiny_lm, tmp_path):
  """The study sums the per-target losses of its reported evaluation (`token_losses=True`) instead of scoring the
  set again: the same totals, and over all documents exactly that pass's bits per character."""
  config = _config(variant, tiny_lm, tmp_path)
  data = data_sources.build_data(config_lib.parse(config))
  model = loop.build_model(config_lib.parse(config))
  for length in (16, 32):
    evaluation = loop.evaluate_set(model, data, length, split='test', token_losses=True)
    reused = documents.document_totals(model, data, length, 'test', nats_by_batch=evaluation.token_nll)
    again = documents.document_totals(model, data, length, 'test')
    np.testing.assert_array_equal(reused['characters'], again['characters'])
    np.testing.assert_allclose(reused['bits'], again['bits'], rtol=1e-5)
    assert reused['tokens'] == again['tokens']
    doubled = documents.document_totals(
        model, data, length, 'test', nats_by_batch=[2 * n for n in evaluation.token_nll]
    )
    np.testing.assert_allclose(doubled['bits'], 2 * reused['bits'])  # the losses given are the ones summed
    bits_per_char = reused['bits'].sum() / reused['characters'].sum()
    assert bits_per_char == pytest.approx(evaluation.metrics['bits_per_char'], rel=1e-6)
  with pytest.raises(ValueError, match=r'nats_by_batch has shapes .*; allowed: one per batch'):
    documents.document_totals(model, data, 32, 'test', nats_by_batch=evaluation.token_nll[:-1])
  with pytest.raises(ValueError, match='token_losses keeps one loss per target, so positions must draw once, not 4'):
    loop.evaluate_set(model, data, 16, token_losses=True, positions=loop.EvalPositions(draws=4))
