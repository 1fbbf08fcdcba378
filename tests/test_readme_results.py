"""The README's result tables are the committed reports', line for line (results come from the code)."""

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r'<!-- study-table: .*copied from (docs/[\w/]+) -->')


def _tables_after_markers(readme: str):
  lines = readme.splitlines()
  for i, line in enumerate(lines):
    match = MARKER.search(line)
    if match:
      table = []
      for row in lines[i + 1 :]:
        if not row.startswith('|'):
          break
        table.append(row)
      yield match.group(1), table


def test_every_marked_readme_table_is_its_committed_report():
  with open(os.path.join(REPO, 'README.md'), encoding='utf-8') as f:
    found = list(_tables_after_markers(f.read()))
  assert {folder for folder, _ in found} >= {'docs/study', 'docs/study_contextual'}
  for folder, table in found:
    assert len(table) > 2, f'README: the table marked as copied from {folder} is empty'
    with open(os.path.join(REPO, folder, 'results.md'), encoding='utf-8') as f:
      report = f.read().splitlines()
    missing = [row for row in table if row not in report]
    assert not missing, f'README rows not in {folder}/results.md (rerun the report and copy it): {missing[:2]}'
