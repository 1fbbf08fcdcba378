"""A learning rate's run directory and `lr_grid` key (`plan.rate_name`): exact, so two rates never share a run.

Under f'{rate:g}' 1e-3 and 1.0000001e-3 both named lr0.001: the second rate of a grid reused (or overwrote) the
first one's runs, in the resolution study and in an LM study's grid or edge check (issue 53)."""

from __future__ import annotations

import glob
import os

import pytest

from relpos_jax.study import plan, resolution, runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALIKE = (1e-3, 1.0000001e-3)  # print alike under :g


@pytest.mark.parametrize('rate', [1e-3, 3e-2, 2.5e-4, 1e-7, 1.0, 0.1, 1.0000001e-3, 0.1 + 0.2, 5e300])
def test_a_name_reads_back_as_its_rate(rate):
  assert float(plan.rate_name(rate)) == rate


def test_rates_that_print_alike_get_their_own_directories(tmp_path):
  dirs = {resolution.run_dir(str(tmp_path), 'count', 'nope', r, 0) for r in ALIKE}
  assert len(dirs) == 2
  assert {runner.LearningRate(r, 'grid').directory for r in ALIKE} == {'lr0.001', 'lr0.0010000001'}


def test_every_committed_run_directory_keeps_its_name():
  """The names the committed studies have (docs/**/lr*) are the :g names: nothing re-reported is orphaned."""
  names = {os.path.basename(p) for p in glob.glob(os.path.join(REPO, 'docs', '**', 'lr*'), recursive=True)}
  names = {n for n in names if n[2:3].isdigit()}
  assert {'lr0.001', 'lr0.003', 'lr0.01', 'lr0.03'} <= names
  for name in names:
    assert 'lr' + plan.rate_name(float(name[2:])) == name
