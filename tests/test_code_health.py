"""Drift checks: no unused import or undefined name (pyflakes), every docstring example still runs (doctest), and
the tree is formatted (pyink, configured in pyproject.toml).

Both classes of drift went unnoticed before (an import left unused in train/loop.py, a docstring showing a
`model_from` signature that no longer existed); these tests make either fail the suite.
"""

from __future__ import annotations

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
