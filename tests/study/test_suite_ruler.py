"""configs/studies/suite_ruler.py end to end at toy size: RULER's two tasks train and evaluate at every length of
their protocols with GGD-BAM and the paper's GGD-BAM + Scalable-Softmax, and the summary has their cells."""

from __future__ import annotations

import json

import pytest

from relpos_jax import resources
from relpos_jax.study import suite


# About 90 s on the 2-core CPU (12 compilations): in the slow set.
@pytest.mark.slow
def test_the_ruler_suite_trains_and_evaluates_ggd_bam_on_both_tasks(tmp_path):
  config = resources.config_module('studies/suite_ruler').get_config()
  config.model.num_layers, config.model.model_dim, config.model.num_heads = 1, 16, 2
  config.train.steps, config.train.batch_size, config.train.checkpoint_every, config.train.log_every = 2, 4, 2, 2
  config.optim.warmup_steps = 1
  config.eval.num_examples, config.eval.batch_size = 4, 4
  config.suite.encoders = ('ggd_bam', 'ggd_bam+ssmax: ggd_bam + ssmax(init_s=1.0)')
  config.suite.seeds = (0,)
  config.suite.lr_grid, config.suite.selection_seed = None, None
  for task in config.suite.tasks:
    config.suite.protocols[task]['steps'] = 2
    config.suite.protocols[task]['eval_lengths'] = config.suite.protocols[task]['eval_lengths'][-1:]
  summary = suite.run_suite(config, tmp_path)
  assert summary['tasks'] == ['variable_tracking', 'common_words']
  for task, longest in (('variable_tracking', '256'), ('common_words', '128')):
    rows = {r['name']: r for r in json.load(open(tmp_path / task / 'results.json'))['runs']}
    assert list(rows) == ['ggd_bam', 'ggd_bam+ssmax']
    assert rows['ggd_bam+ssmax']['spec'] == 'ggd_bam + ssmax(init_s=1.0)'
    for row in rows.values():
      accuracy = row['exact_match_by_length_per_seed'][longest][0]
      assert 0.0 <= accuracy <= 1.0
    assert f'{task}/ggd_bam' in summary['cells']
