"""The claims' reports as they are read from a docs folder: a report that exists must be whole (a task its
summary lists without its results.json, or a file that is no report, is refused naming the file), and a claim
whose report folder is absent says so in every table, the README's included."""

from __future__ import annotations

import os
import shutil

import pytest

from relpos_jax.study import claims
from relpos_jax.train import config as config_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _abacus(tmp_path):
  """docs/ holding only the committed suite_abacus report (its summary and its one task)."""
  docs = tmp_path / 'docs'
  shutil.copytree(os.path.join(REPO, 'docs', 'suite_abacus'), docs / 'suite_abacus')
  return docs


def test_a_task_missing_from_a_report_is_refused_naming_its_file(tmp_path):
  docs = _abacus(tmp_path)
  assert set(claims.load_reports(str(docs))) == {'suite_abacus'}
  os.remove(docs / 'suite_abacus' / 'addition_abacus' / 'results.json')
  with pytest.raises(
      config_lib.ConfigError,
      match=r"addition_abacus/results.json is missing: .*suite_abacus/summary.json lists task 'addition_abacus'",
  ):
    claims.load_reports(str(docs))
  before = os.listdir(docs)
  with pytest.raises(SystemExit, match=r'^ConfigError: claims: .*addition_abacus/results.json is missing'):
    claims.main(['claims', str(docs)])
  assert os.listdir(docs) == before  # no claims.md from part of a report


@pytest.mark.parametrize(
    'name, text, message',
    [
        ('summary.json', '[]', r'summary.json is not a suite summary .* found list'),
        ('summary.json', '{"cells": {}}', r"summary.json is not a suite summary .*: expected .*'tasks', 'cells'"),
        ('summary.json', '{"tasks": ', r'summary.json is not valid JSON'),
        ('addition_abacus/results.json', '{"seeds": [0]}', r"results.json is not a study report .* \['seeds'\]"),
        ('addition_abacus/results.json', '', r'results.json is not valid JSON'),
    ],
)
def test_a_file_that_is_no_report_is_refused_naming_it(tmp_path, name, text, message):
  docs = _abacus(tmp_path)
  (docs / 'suite_abacus' / name).write_text(text, encoding='utf-8')
  with pytest.raises(config_lib.ConfigError, match=message):
    claims.load_reports(str(docs))


def test_an_absent_report_is_named_in_the_verdict_tables(tmp_path):
  """The README's table carries the verdicts alone: a claim whose report is absent must not read as a result
  of the rule ('not tested at this scale')."""
  table = claims.summary_table(str(_abacus(tmp_path)))
  ruoss = [line for line in table.splitlines() if 'Ruoss et al. 2023' in line]
  assert len(ruoss) == 1 and f'**{claims.REPORT_ABSENT}**' in ruoss[0]
  abacus = [line for line in table.splitlines() if 'McLeish et al. 2024' in line]
  assert len(abacus) == 1 and claims.REPORT_ABSENT not in abacus[0]
