"""benchmarks/accelerator.py end to end on CPU at a toy size: every path of (a) is a row (measured, or skipped with
its reason, never a crash), and (b) trains the ladder's accelerator rung, exports its records without checkpoints
and puts its column, with the device named, on the ladder's page. The numbers of a toy run mean nothing."""

from __future__ import annotations

import os
import shutil

import pytest

from benchmarks import accelerator

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUSTEN = '/usr/lib/R/site-library/janeaustenr'


def _table(path):
  return [line for line in open(path).read().splitlines() if line.startswith('| 32 |')]


def test_every_path_is_a_row_measured_or_skipped_with_its_reason(tmp_path):
  out = tmp_path / 'gpu.md'
  assert accelerator.main(['--toy', '--skip_ladder', '--out', str(out)]) == 0
  rows = _table(out)
  # plain through xla and cudnn, then each toy row on the default, blockwise and pallas paths.
  assert len(rows) == len(accelerator.PLAIN_PATHS) + len(accelerator.TOY['rows']) * len(accelerator.LIBRARY_PATHS)
  assert any(r.startswith('| 32 | plain | xla | ') and not r.endswith('skipped') for r in rows)
  assert any(r.startswith('| 32 | plain | cudnn | — | — | skipped: ') for r in rows)  # no cuDNN on a CPU
  assert any(
      r.startswith('| 32 | fire | pallas | — | — | skipped: ValueError: attention implementation "pallas"')
      for r in rows
  )
  measured = [r for r in rows if r.startswith(('| 32 | alibi | pallas |', '| 32 | fire | blockwise |'))]
  assert len(measured) == 2 and all(float(r.split('|')[4]) > 0 for r in measured)


def test_a_spent_budget_leaves_rows_that_say_so():
  section = accelerator.attention_section((32,), ('alibi',), repeats=1, budget_s=-1.0)
  assert all(row[-1] == 'not measured: the -1 s budget of (a) was spent' for row in section.rows)


@pytest.mark.skipif(
    not os.path.isfile(os.path.join(AUSTEN, 'data', 'Rdata.rdb')),
    reason=f'the English corpus is not installed ({AUSTEN}: apt-get install r-cran-janeaustenr)',
)
def test_the_ladder_rung_trains_and_reaches_the_page(tmp_path):
  pytest.importorskip('tokenizers', reason='BPE tokens need the package tokenizers')
  docs = tmp_path / 'docs'
  shutil.copytree(os.path.join(REPO, 'docs', 'study_english_bpe'), docs / 'study_english_bpe')  # the rates it inherits
  ladder_docs = docs / 'study_scale_ladder'
  out = tmp_path / 'gpu.md'
  args = ['--toy', '--out', str(out), '--ladder_docs', str(ladder_docs), '--workdir', str(tmp_path / 'work')]
  assert accelerator.main(args) == 0
  text = out.read_text()
  assert '(b) rung d512 on cpu: every run finished' in text
  runs = ladder_docs / 'd512' / 'runs'
  finished = sorted(p.parent.relative_to(runs).as_posix() for p in runs.rglob('result.json'))
  assert finished == ['distance/lr0.03/seed0', 'monotone-lin/lr0.03/seed0']  # the rate d64 chose, inherited
  assert not list(runs.rglob('checkpoints'))
  page = (ladder_docs / 'README.md').read_text()
  assert '| finding (A − B at 16x) | d64 | d128 | d256 | d512 | across sizes |' in page
  assert 'Trained on cpu by benchmarks/accelerator.py, each encoder at the learning rate rung d64 chose' in page
