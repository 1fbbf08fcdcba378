"""Several writers of one results file (suite processes with --tasks all write summary.json): every write is
atomic and none fails, so the file always holds one writer's complete JSON."""

from __future__ import annotations

import json
import threading

from relpos_jax.study import report


def test_concurrent_writers_of_one_results_file_never_tear_it(tmp_path):
  path = str(tmp_path / 'summary.json')
  errors = []

  def write(n):
    try:
      for i in range(200):
        report.write_json({'writer': n, 'i': i, 'padding': 'x' * 20_000}, path)
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert not errors, errors[:1]
  assert json.load(open(path))['i'] == 199
  assert sorted(p.name for p in tmp_path.iterdir()) == ['summary.json']
