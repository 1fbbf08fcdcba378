"""The committed suite reports re-report identically: each summary.json is what `summarize` computes from the
per-task results.json beside it, so a change to a task's generator (count_copy's alphabet) leaves them as
they are (their results record the task parameters they ran with)."""

import json
import os

import pytest

from relpos_jax.study import suite_summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORTS = ('docs/suite', 'docs/suite_contextual', 'docs/suite_ruoss', 'docs/suite_abacus')


@pytest.mark.parametrize('folder', REPORTS)
def test_each_committed_summary_is_recomputed_from_its_results(folder):
  path = os.path.join(REPO, folder)
  with open(os.path.join(path, suite_summary.SUMMARY_FILE), encoding='utf-8') as f:
    committed = json.load(f)
  again = suite_summary.summarize(
      suite_summary.load_results(path, committed['tasks']), title=committed['title'], statistic=committed['statistic']
  )
  assert json.loads(json.dumps(again)) == committed


def test_the_committed_count_copy_runs_record_the_sixteen_symbol_task():
  with open(os.path.join(REPO, 'docs/suite_contextual/count_copy/results.json'), encoding='utf-8') as f:
    results = json.load(f)
  assert results['meta']['data']['params'] == {'num_symbols': 16} and results['meta']['data']['vocab_size'] == 36
