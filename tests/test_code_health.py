"""Drift checks: no unused import or undefined name (pyflakes), every docstring example still runs (doctest), and
the tree is formatted (pyink, configured in pyproject.toml).

Both classes of drift went unnoticed before (an import left unused in train/loop.py, a docstring showing a
`model_from` signature that no longer existed); these tests make either fail the suite.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import pathlib
import pkgutil
import subprocess
import sys

import pytest

import relpos_jax

ROOT = pathlib.Path(relpos_jax.__file__).parent.parent
LINTED = ('relpos_jax', 'tests', 'experiments', 'benchmarks', 'configs')


def _lint_messages() -> list[str]:
  api = pytest.importorskip('pyflakes.api', reason='pyflakes is a dev extra: pip install -e ".[dev]"')
  from pyflakes import messages

  found = []

  class Collect:

    def unexpectedError(self, filename, msg):
      found.append(f'{filename}: {msg}')

    def syntaxError(self, filename, msg, lineno, offset, text):
      found.append(f'{filename}:{lineno}: {msg}')

    def flake(self, message):
      # A package's __init__ imports names to re-export them.
      if isinstance(message, messages.UnusedImport) and message.filename.endswith('__init__.py'):
        return
      found.append(str(message))

  paths = [str(ROOT / d) for d in LINTED if (ROOT / d).exists()]
  api.checkRecursive(paths, Collect())
  return found


def test_no_unused_imports_or_undefined_names():
  found = _lint_messages()
  assert not found, 'pyflakes:\n' + '\n'.join(found)


def _modules():
  yield relpos_jax
  for info in pkgutil.walk_packages(relpos_jax.__path__, 'relpos_jax.'):
    yield importlib.import_module(info.name)


def test_docstring_examples_run():
  attempted = 0
  failures = []
  for module in _modules():
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False)
    attempted += result.attempted
    if result.failed:
      failures.append(f'{module.__name__}: {result.failed} of {result.attempted} examples failed')
  assert not failures, '\n'.join(failures) + '\n(run python -m doctest -v on the module to see them)'
  assert attempted > 0  # The examples are found at all.


def test_tree_is_formatted():
  """`pyink --check .` passes: run `pyink .` (the settings are pyproject.toml's [tool.pyink]) before committing."""
  pytest.importorskip('pyink', reason='pyink is a dev extra: pip install -e ".[dev]"')
  result = subprocess.run(
      [sys.executable, '-m', 'pyink', '--check', '--quiet', '.'], cwd=ROOT, capture_output=True, text=True, check=False
  )
  assert result.returncode == 0, f'pyink --check . failed; run `pyink .`:\n{result.stdout}{result.stderr}'


def _private_imports(path: pathlib.Path) -> list[str]:
  """`from relpos_jax.x import _name` or `x._name` (x a relpos_jax module) in a module other than x."""
  module = '.'.join(path.relative_to(ROOT).with_suffix('').parts).removesuffix('.__init__')
  tree = ast.parse(path.read_text(), str(path))
  modules = {}  # local name -> the relpos_jax module it is bound to
  found = []

  def private(name):
    return name.startswith('_') and not name.startswith('__')

  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.startswith('relpos_jax'):
          modules[alias.asname or alias.name.split('.')[0]] = alias.asname and alias.name or 'relpos_jax'
    elif isinstance(node, ast.ImportFrom) and (node.module or '').startswith('relpos_jax') and node.level == 0:
      for alias in node.names:
        if private(alias.name) and node.module != module:
          found.append(f'{path}:{node.lineno}: from {node.module} import {alias.name}')
        modules[alias.asname or alias.name] = f'{node.module}.{alias.name}'
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name):
      owner = modules.get(node.value.id)
      if owner is not None and owner != module:
        found.append(f'{path}:{node.lineno}: {node.value.id}.{node.attr} ({owner})')
  return found


def test_no_private_name_imported_across_modules():
  """A name one module of relpos_jax uses from another is public: shared means part of that module's interface
  (rename it without the underscore), not an implementation detail reached into."""
  found = [line for path in sorted((ROOT / 'relpos_jax').rglob('*.py')) for line in _private_imports(path)]
  assert not found, 'private names used across modules:\n' + '\n'.join(found)


def test_no_data_source_switch_outside_the_source_sections():
  """What depends on the data source is a method of its section (train/config.py's CorpusSource, TaskSource):
  no `source == 'corpus'` switch elsewhere."""
  import re

  found = [
      f'{path}:{n}: {line.strip()}'
      for path in sorted((ROOT / 'relpos_jax').rglob('*.py'))
      for n, line in enumerate(path.read_text().splitlines(), 1)
      if re.search(r'\bsource\s*[!=]=|[!=]=\s*[\w.]*\bsource\b', line)
  ]
  assert not found, 'switches on the data source (make them a method of the source section):\n' + '\n'.join(found)


def test_positions_is_the_ground_floor():
  """relpos_jax.positions (relative positions, the Toeplitz expansion) imports no encoder and no layer: the
  encoders build on it (encoders.matrices.bias_matrix), never the reverse; no function-local import hides a
  cycle either."""
  tree = ast.parse((ROOT / 'relpos_jax' / 'positions.py').read_text())
  imported = [
      node.module if isinstance(node, ast.ImportFrom) else alias.name
      for node in ast.walk(tree)
      if isinstance(node, (ast.Import, ast.ImportFrom))
      for alias in node.names
  ]
  assert not [m for m in imported if m and m.startswith(('relpos_jax.encoders', 'relpos_jax.nn', 'relpos_jax.train'))]
  local = [
      f'{path}:{node.lineno}'
      for path in sorted((ROOT / 'relpos_jax' / 'encoders').glob('*.py'))
      for func in ast.walk(ast.parse(path.read_text()))
      if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
      for node in ast.walk(func)
      if isinstance(node, ast.ImportFrom)
      and node.module == 'relpos_jax'
      and any(a.name == 'positions' for a in node.names)
  ]
  assert not local, f'function-local imports of positions in the encoders: {local}'
