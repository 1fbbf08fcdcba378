"""tests/measured_slow.txt names whole pytest node ids: a line cut at a space (a parametrized id holds spaces:
`[rope + alibi-False-None-None]`) matched no test, so the case it meant stayed in the fast set unnoticed."""

from __future__ import annotations

import ast
import pathlib

TESTS = pathlib.Path(__file__).parent


def _node_ids(text: str) -> list[str]:
  return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith('#')]


def _malformed(node_id: str) -> str | None:
  """Why `node_id` can name no test (None: it can), from the source alone: collecting every test takes minutes."""
  path, sep, name = node_id.partition('::')
  if not sep:
    return 'no "::" between the file and the test'
  function, bracket, params = name.partition('[')
  if bracket and (not params.endswith(']') or params.count('[') + 1 != params.count(']')):
    return f'unbalanced parameter brackets in {name!r} (a line cut at a space?)'
  file = TESTS.parent / path
  if not file.is_file():
    return f'no file {path}'
  defined = {n.name for n in ast.walk(ast.parse(file.read_text())) if isinstance(n, ast.FunctionDef)}
  if function not in defined:
    return f'no test function {function} in {path}'
  return None


def test_the_check_sees_a_cut_line_and_a_missing_test():
  assert 'unbalanced' in _malformed('tests/test_measured_slow_list.py::test_every_line_names_a_test[rope')
  assert 'no test function' in _malformed('tests/test_measured_slow_list.py::test_nothing')
  assert 'no file' in _malformed('tests/nowhere.py::test_x')
  assert _malformed('tests/test_measured_slow_list.py::test_every_line_names_a_test') is None
  assert _malformed('tests/test_measured_slow_list.py::test_every_line_names_a_test[rope + alibi-False]') is None


def test_every_line_names_a_test():
  ids = _node_ids((TESTS / 'measured_slow.txt').read_text(encoding='utf-8'))
  problems = {i: _malformed(i) for i in ids if _malformed(i)}
  assert not problems, problems
  assert len(ids) == len(set(ids)), 'a node id is listed twice'
