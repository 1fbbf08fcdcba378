"""One run-record type for every study: each committed result.json (the LM studies' and the grid study's) reads
into a RunRecord and back to the same object, and writes back to the same bytes; a record of neither layout is
refused, named."""

from __future__ import annotations

import glob
import json
import pathlib

import pytest

from relpos_jax.study import record as record_lib
from relpos_jax.train import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMMITTED = sorted(glob.glob(str(ROOT / 'docs' / '**' / record_lib.RESULT_FILE), recursive=True))


def _layout(record: dict) -> record_lib.RecordLayout:
  return record_lib.GRID_LAYOUT if 'run_config' in record else record_lib.LM_LAYOUT


def test_every_committed_record_reads_back_identically():
  assert len(COMMITTED) > 1000  # both families: the LM studies' runs and the grid study's
  layouts = set()
  for path in COMMITTED:
    saved = json.loads(pathlib.Path(path).read_text())
    run = record_lib.RunRecord.from_json(saved, _layout(saved))
    assert run.to_json() == saved, path
    layouts.add(run.layout.name)
  assert layouts == {'lm', 'grid'}


def test_a_record_writes_the_bytes_it_was_read_from(tmp_path):
  grid = next(p for p in COMMITTED if 'resolution' in p)
  lm = next(p for p in COMMITTED if 'resolution' not in p)
  for path, layout in ((grid, record_lib.GRID_LAYOUT), (lm, record_lib.LM_LAYOUT)):
    target = tmp_path / f'{layout.name}.json'
    record_lib.RunRecord.read(path, layout).write(str(target))
    assert target.read_bytes() == pathlib.Path(path).read_bytes(), path


def test_the_cost_is_training_plus_evaluation_once():
  lm = record_lib.RunRecord(record_lib.LM_LAYOUT, 0, {}, 12.0, {}, eval_seconds=2.0)  # evaluation inside
  again = record_lib.RunRecord(record_lib.LM_LAYOUT, 0, {}, 0.0, {}, eval_seconds=3.5)  # a re-evaluation
  grid = record_lib.RunRecord(record_lib.GRID_LAYOUT, 0, {'seed': 0}, 12.0, {}, eval_seconds=2.0)
  assert (lm.cost, again.cost, grid.cost) == (12.0, 3.5, 14.0)


def test_a_key_left_out_stays_out():
  diverged = {'name': 'a', 'seed': 1, 'config': {}, 'train_seconds': 1.0, 'diverged': {'step': 3, 'message': 'm'}}
  run = record_lib.RunRecord.from_json(diverged, record_lib.LM_LAYOUT)
  assert run.num_params is None and run.eval_seconds is None and run.to_json() == diverged


def test_a_record_of_neither_layout_is_refused_named(tmp_path):
  path = tmp_path / record_lib.RESULT_FILE
  path.write_text(json.dumps({'config': {}, 'train_seconds': 1.0}))  # an LM record without its seed
  with pytest.raises(config_lib.ConfigError, match=r"lacks \['seed'\]"):
    record_lib.RunRecord.read(str(path), record_lib.LM_LAYOUT)
  with pytest.raises(config_lib.ConfigError, match=r"is not a run's record: expected an object with \['run_config'"):
    record_lib.RunRecord.read(str(path), record_lib.GRID_LAYOUT)
  with pytest.raises(ValueError, match=r"values name \['num_params'\]"):
    record_lib.RunRecord(record_lib.LM_LAYOUT, 0, {}, 1.0, {'num_params': 3})
