"""Drift checks: no unused import or undefined name (pyflakes), every docstring example still runs (doctest), and
the tree is formatted (pyink, configured in pyproject.toml).

Both classes of drift went unnoticed before (an import left unused in train/loop.py, a docstring showing a
`model_from` signature that no longer existed); these tests make either fail the suite.
"""

from __future__ import annotations

import ast
import doctest
import functools
import importlib
import pathlib
import pkgutil
import subprocess
import sys

import pytest

import relpos_jax
from relpos_jax.train import config as config_lib
from relpos_jax.train import data_sources, inputs, text_inputs, token_inputs

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


# The one module of relpos_jax/nn that may compare an encoder's kind: it picks each part's Term.
KIND_SELECTION = ROOT / 'relpos_jax' / 'nn' / 'terms' / 'select.py'


def kind_switches(source: str) -> list[int]:
  """The lines of `source` that switch on an encoder's kind: a member of the Kind enum named (`Kind.ROTARY`,
  `contract.Kind.SCALAR_BIAS`, as in `part.kind is Kind.ROTARY` or `has_kind(parts, Kind.ROTARY)`), or a part's
  `.kind` read for anything but naming it in a message (`part.kind.value`): `p.kind in CONTENT_KINDS`, `kind =
  part.kind`. A local called `kind` (blocks.make_norm's norm kind) is no encoder's."""
  tree = ast.parse(source)
  named = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == 'value'}
  lines = set()
  for node in ast.walk(tree):
    if not isinstance(node, ast.Attribute):
      continue
    owner = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, 'attr', None)
    if owner == 'Kind' and node.attr.isupper():
      lines.add(node.lineno)
    elif node.attr == 'kind' and id(node) not in named:
      lines.add(node.lineno)
  return sorted(lines)


def test_the_kind_switch_finder_sees_the_old_switches():
  """It can fail: the switches relpos_jax/nn held outside the Terms before (blockwise, content_terms,
  position_terms, functional, models, attention, linen) are each found; a message naming a kind and a norm's
  `kind` are not."""
  old = (
      'if part.kind is Kind.SCORE_TRANSFORM:\n'
      '  pass\n'
      'plain = any(p.kind in CONTENT_KINDS for p in parts)\n'
      'rotary = position_terms.has_kind(parts, contract.Kind.ROTARY)\n'
      'allowed = (contract.Kind.ROTARY, contract.Kind.SCALAR_BIAS)\n'
      'kind = part.base.kind\n'
      "message = f'kind {part.kind.value!r}'\n"
      "if kind == 'rmsnorm':\n"
      '  pass\n'
  )
  assert kind_switches(old) == [1, 3, 4, 5, 6]


def test_no_kind_switch_outside_the_term_selection():
  """relpos_jax/nn compares an encoder's kind in one module, terms/select.py, which gives each part its Term;
  the paths, kernels, layers and models ask the Term (its stage, traits and methods: terms/base.py)."""
  nn = ROOT / 'relpos_jax' / 'nn'
  assert KIND_SELECTION.exists() and kind_switches(KIND_SELECTION.read_text())
  found = [
      f'{path.relative_to(ROOT)}:{line}'
      for path in sorted(nn.rglob('*.py'))
      if path != KIND_SELECTION
      for line in kind_switches(path.read_text())
  ]
  assert not found, "kind switches outside relpos_jax/nn/terms/select.py (ask the part's Term):\n" + '\n'.join(found)


# The modules of relpos_jax/nn that may ask whether a part reads coordinates (a grid encoder's) or dispatch on
# the type of where the tokens sit (1-D `Positions`, `Grid`, `Coordinates`), each with its reason.
GRID_DISPATCH_ALLOWED = {
    KIND_SELECTION: "chooses each part its Term by its kind and the positions' type (a grid bias on a Grid: a table)",
    ROOT / 'relpos_jax' / 'nn' / 'call.py': 'builds the position values from the layer keywords and checks them',
}
GRID_TYPES = ('Grid', 'Coordinates', 'GridTable')


def grid_dispatches(source: str) -> list[int]:
  """The lines of `source` that dispatch on the grid outside the Terms: asking whether a part is a grid's
  (`grid.is_grid(part)`, `part.is_grid`, `getattr(part, 'is_grid', False)`) or an `isinstance` naming a grid's
  value type (`Grid`, `Coordinates`, the old `GridTable`, bare or dotted, alone or in a tuple)."""
  lines = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Attribute) and node.attr == 'is_grid':
      lines.add(node.lineno)
    elif isinstance(node, ast.Name) and node.id == 'is_grid':
      lines.add(node.lineno)
    elif isinstance(node, ast.Constant) and node.value == 'is_grid':
      lines.add(node.lineno)
    elif isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'isinstance' and len(node.args) == 2:
      named = [getattr(n, 'attr', getattr(n, 'id', None)) for n in ast.walk(node.args[1])]
      if any(name in GRID_TYPES for name in named):
        lines.add(node.lineno)
  return sorted(lines)


def test_the_grid_dispatch_finder_sees_the_old_grid_path():
  """It can fail: the checks the grid path made beside the Terms before (attention.on_grid, grid_inputs, decode's
  refusal, attend's and the blockwise kernel's GridTable, the layer's position keywords) are each found; reading a
  grid's shape or an isinstance of 1-D Positions is not."""
  old = (
      'grid = grid_lib.is_grid(part)\n'
      "grid_parts = [p.name for p in parts if getattr(p, 'is_grid', False)]\n"
      'table = isinstance(position_bias, terms.grid.GridTable)\n'
      'value = isinstance(positions, call.Grid)\n'
      'x = isinstance(p, (Grid, Coordinates))\n'
      'shape = where.shape\n'
      'y = isinstance(p, Positions)\n'
      'z = any(p.is_grid for p in parts)\n'
  )
  assert grid_dispatches(old) == [1, 2, 3, 4, 5, 8]


def test_no_grid_dispatch_outside_the_term_selection():
  """A grid goes through the Terms: whether a part reads coordinates, and on which grid, is decided where its
  Term is chosen (terms/select.py) from the positions' type, which call.py builds; the layers, paths and kernels
  ask the Term (GRID_DISPATCH_ALLOWED says why each exception may)."""
  nn = ROOT / 'relpos_jax' / 'nn'
  assert all(path.exists() for path in GRID_DISPATCH_ALLOWED)
  found = [
      f'{path.relative_to(ROOT)}:{line}'
      for path in sorted(nn.rglob('*.py'))
      if path not in GRID_DISPATCH_ALLOWED
      for line in grid_dispatches(path.read_text())
  ]
  assert not found, "grid dispatch outside relpos_jax/nn/terms/select.py (ask the part's Term):\n" + '\n'.join(found)


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


# The package's own imports inside functions that are allowed, each with its reason: an optional dependency
# imported only when a run asks for it. Every other import of relpos_jax is at a module's top, so the import
# graph below is the whole graph and a circle cannot hide in a function body.
LOCAL_IMPORTS_ALLOWED = {
    ('relpos_jax/nn/functional.py', 'relpos_jax.nn.pallas_attention'): (
        'Pallas (jax.experimental.pallas): imported only for implementation="pallas"'
    ),
}


def _module_name(path: pathlib.Path) -> str:
  return '.'.join(path.relative_to(ROOT).with_suffix('').parts).removesuffix('.__init__')


def _package_imports(tree: ast.AST, module: str, modules: set[str], is_package: bool) -> list[tuple[ast.stmt, str]]:
  """(statement, imported relpos_jax module) for every import of the package in `tree`: `from a.b import c` is
  the module a.b.c where that is a module, else a.b; a relative import is resolved against `module` (a package's
  `__init__` when `is_package`)."""
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found += [(node, alias.name) for alias in node.names if alias.name.split('.')[0] == 'relpos_jax']
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        parts = module.split('.')
        package = parts[: len(parts) - node.level + is_package]
        base = '.'.join(package + ([base] if base else []))
      if base.split('.')[0] != 'relpos_jax':
        continue
      for alias in node.names:
        found.append((node, f'{base}.{alias.name}' if f'{base}.{alias.name}' in modules else base))
  return found


def _in_functions(tree: ast.AST) -> set[int]:
  """The ids of the statements inside a function body (an import there runs at call time, not import time)."""
  inside = set()
  for func in ast.walk(tree):
    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      inside.update(id(node) for node in ast.walk(func) if node is not func)
  return inside


@functools.cache
def _package_sources() -> dict[str, tuple[pathlib.Path, ast.AST]]:
  """{module: (its path, its parsed source)} of every module of relpos_jax (parsed once for the checks)."""
  return {
      _module_name(path): (path, ast.parse(path.read_text(), str(path)))
      for path in sorted((ROOT / 'relpos_jax').rglob('*.py'))
  }


def import_graph(sources) -> dict[str, set[str]]:
  """{module: the relpos_jax modules it imports when it is imported}: the imports outside function bodies.

  A package's `__init__` runs before its submodules, but that edge is left out: `from relpos_jax.train import
  loop` inside relpos_jax/train/ would otherwise always close a circle through the package, one Python resolves
  because the submodule is imported by then. The imports an `__init__` itself writes are edges like any other."""
  modules = set(sources)
  graph = {}
  for module, (path, tree) in sources.items():
    inside = _in_functions(tree)
    imports = _package_imports(tree, module, modules, path.name == '__init__.py')
    graph[module] = {target for node, target in imports if id(node) not in inside} - {module}
  return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
  """One import circle as [a, b, ..., a], or None (depth-first search; a back edge closes a circle)."""
  state = {}  # module -> 'open' while on the path, 'done' after
  path = []

  def visit(node):
    state[node] = 'open'
    path.append(node)
    for nxt in sorted(graph.get(node, ())):
      if state.get(nxt) == 'open':
        return path[path.index(nxt) :] + [nxt]
      if nxt not in state and (cycle := visit(nxt)):
        return cycle
    path.pop()
    state[node] = 'done'
    return None

  for node in sorted(graph):
    if node not in state and (cycle := visit(node)):
      return cycle
  return None


def function_local_imports(sources) -> dict[tuple[str, str], list[int]]:
  """{(path relative to the root, imported relpos_jax module): [line, ...]} of the imports in function bodies."""
  modules = set(sources)
  found = {}
  for module, (path, tree) in sources.items():
    inside = _in_functions(tree)
    for node, target in _package_imports(tree, module, modules, path.name == '__init__.py'):
      if id(node) in inside:
        found.setdefault((path.relative_to(ROOT).as_posix(), target), []).append(node.lineno)
  return found


def test_the_import_graph_finders_see_a_circle_and_a_local_import():
  """The two checks below can fail: a two-module circle and an import hidden in a function are both found."""
  assert find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == ['a', 'b', 'c', 'a']
  assert find_cycle({'a': {'b'}, 'b': set(), 'c': {'a', 'b'}}) is None
  tree = ast.parse(
      'from relpos_jax.train import config\n'
      'def f():\n'
      '  from relpos_jax.train import inputs\n'
      '  from . import metrics\n'
      '  import numpy\n'
  )
  path = ROOT / 'relpos_jax' / 'train' / 'x.py'
  modules = {'relpos_jax.train.x', 'relpos_jax.train.config', 'relpos_jax.train.inputs', 'relpos_jax.train.metrics'}
  sources = {m: (path, tree if m == 'relpos_jax.train.x' else ast.parse('')) for m in modules}
  assert import_graph(sources)['relpos_jax.train.x'] == {'relpos_jax.train.config'}
  assert function_local_imports(sources) == {
      ('relpos_jax/train/x.py', 'relpos_jax.train.inputs'): [3],
      ('relpos_jax/train/x.py', 'relpos_jax.train.metrics'): [4],
  }


def test_no_import_circles():
  """The package's import graph, computed from the code, has no circle: every module builds on modules below
  it (a shared piece lives in the lower room, as study/plan.py and study/record.py under runner and reevaluate)."""
  cycle = find_cycle(import_graph(_package_sources()))
  assert cycle is None, 'import circle: ' + ' -> '.join(cycle) + ' (move the shared piece to a module below both)'


def test_no_function_local_imports_of_the_package():
  """An import of relpos_jax inside a function hides an edge of the graph (often a circle); only the optional
  dependencies of LOCAL_IMPORTS_ALLOWED import there, and each entry of it still exists."""
  found = function_local_imports(_package_sources())
  extra = {
      f'{path}:{lines}: {module}'
      for (path, module), lines in found.items()
      if (path, module) not in LOCAL_IMPORTS_ALLOWED
  }
  assert not extra, 'function-local imports of relpos_jax (move them to the top):\n' + '\n'.join(sorted(extra))
  assert set(LOCAL_IMPORTS_ALLOWED) <= set(
      found
  ), f'stale LOCAL_IMPORTS_ALLOWED: {set(LOCAL_IMPORTS_ALLOWED) - set(found)}'


def test_importing_the_entry_points_modules_starts_no_jax_backend():
  """The entry points import relpos_jax.train.cli (and through it the training loop) and the study modules
  before a multi-process run calls jax.distributed.initialize(), which must come before any backend starts:
  importing them computes nothing."""
  code = (
      'import relpos_jax.train.cli, relpos_jax.study.suite, relpos_jax.study.reevaluate\n'
      'from jax._src import xla_bridge\n'
      'print(xla_bridge.backends_are_initialized())\n'
  )
  result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == 'False', 'importing the modules started a JAX backend (a module-level computation?)'


def test_every_data_section_has_its_data_class():
  """train/config.py's data sections and the data builders (train/data_sources.py) are one table (`data_sources.DATA`), kept
  there so that the config does not import the data: a new source adds one entry to each."""
  assert set(data_sources.DATA) == set(config_lib.SOURCES.values())


# What the study and the training loop read of a data source: `inputs.Data`'s answers beside the batches.
SOURCE_ANSWERS = ('metric', 'lower_is_better', 'diverged_at_every_length', 'has_documents', 'position_curve_in_bits')


def test_every_data_class_answers_what_evaluation_reads_of_its_source():
  """Each data class states its metric and the rest (`inputs.Data`) itself, so the study never guesses the source
  from a metric name or an attribute it happens to have."""
  classes = {inputs.CorpusData, inputs.TaskData, token_inputs.BPECorpusData, text_inputs.TextFileData}
  for data_class in classes:
    missing = [name for name in SOURCE_ANSWERS if not hasattr(data_class, name)]
    assert not missing, f'{data_class.__name__} does not state {missing}'
    assert callable(getattr(data_class, 'protocol_record', None)), data_class.__name__
  assert isinstance(inputs.CorpusData.metric, str) and isinstance(inputs.TaskData.lower_is_better, bool)


def test_no_switch_on_the_data_source_by_metric_name_or_attribute():
  """`metric == 'bits_per_char'`, `hasattr(data, ...)` and `objective.kind == ...` outside the data classes and the
  objectives are disguised data-source switches (issue 32): ask the data object instead (`inputs.Data`)."""
  import re

  allowed = {'relpos_jax/train/objectives.py'}  # the loss families define the metrics the data classes name
  # (A table's rows naming 'accuracy', as the grid study's, are rows, not a source guessed from its metric.)
  pattern = r"[!=]=\s*'bits_per_char'|'bits_per_char'\s*[!=]=|hasattr\([^)]*data\b|objective\.kind\s*[!=]="
  found = [
      f'{path}:{n}: {line.strip()}'
      for path in sorted((ROOT / 'relpos_jax').rglob('*.py'))
      if path.relative_to(ROOT).as_posix() not in allowed
      for n, line in enumerate(path.read_text().splitlines(), 1)
      if re.search(pattern, line)
  ]
  assert not found, 'switches on the data source (ask the data object, inputs.Data):\n' + '\n'.join(found)


# The modules of relpos_jax that may read a ConfigDict. A config comes in as one from its file and the command-line
# overrides (train/config_files.py loads and overrides it; the command line, train/cli.py, goes through it), and
# train/schema.py's `is_section` is where the parser recognizes one as a section. Everything else (the loop, the
# data, the study, the suite, the re-evaluation, the resolution study) is handed the typed `Config` an entry point
# parsed once, and derives every run from it (`Config.derive`, `Config.to_dict`): a deep-copied and mutated
# ConfigDict below the entry points would be checked only when something parses it again, maybe after training.
CONFIG_DICT_READERS = {'relpos_jax/train/schema.py', 'relpos_jax/train/config_files.py'}
# Methods only a ConfigDict has (a Config or a dict has none of them).
CONFIG_DICT_METHODS = ('to_json_best_effort', 'get_ref', 'copy_and_resolve_references', 'ignore_type', 'unlock')
# Deep copies of a config are the copy-and-mutate pattern; where the study and the training code copy, they derive.
NO_DEEP_COPIES = ('relpos_jax/train/', 'relpos_jax/study/')


def config_dict_reads(source: str, *, deep_copies: bool = True) -> list[int]:
  """The lines of `source` that read a ConfigDict: an import of ml_collections, a call of a method only a
  ConfigDict has (`CONFIG_DICT_METHODS`), or (`deep_copies`) a `copy.deepcopy`."""
  lines = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import) and any(a.name.split('.')[0] == 'ml_collections' for a in node.names):
      lines.add(node.lineno)
    elif isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'ml_collections':
      lines.add(node.lineno)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CONFIG_DICT_METHODS:
      lines.add(node.lineno)
    elif deep_copies and isinstance(node, ast.Call):
      name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, 'id', None)
      if name == 'deepcopy':
        lines.add(node.lineno)
  return sorted(lines)


def test_the_config_dict_finder_finds_what_the_old_study_code_did():
  """The finder flags the helpers the typed Config replaced (each as it was written), and none of their typed forms."""
  old_run_config = (
      'import copy\nimport ml_collections\n\n'
      'def run_config(base, entry, seed=None):\n'
      '  config = copy.deepcopy(base)\n'
      '  config.model.encoder = entry.spec\n'
      '  return config\n'
  )
  assert config_dict_reads(old_run_config) == [2, 5]
  old_record = 'import json\n\ndef record(recorded):\n  return json.loads(recorded.to_json_best_effort())\n'
  assert config_dict_reads(old_record) == [4]
  old_held_out = 'from ml_collections import ConfigDict\n\ndef held_out(study):\n  return ConfigDict(study.to_dict())\n'
  assert config_dict_reads(old_held_out) == [1]
  assert config_dict_reads('from copy import deepcopy\nx = deepcopy(y)\n') == [2]
  assert config_dict_reads('from copy import deepcopy\nx = deepcopy(y)\n', deep_copies=False) == []
  typed = (
      'import json\n\ndef run_config(base, entry, seed=None):\n'
      '  return base.derive(encoder=entry.spec, seed=seed)\n\n'
      'def record(recorded):\n  return json.loads(json.dumps(recorded.to_dict()))\n'
  )
  assert config_dict_reads(typed) == []


def test_only_the_config_files_and_the_parser_read_a_config_dict():
  """Below the command line and the config files, code reads the typed Config (`CONFIG_DICT_READERS` says why)."""
  found = []
  for path in sorted((ROOT / 'relpos_jax').rglob('*.py')):
    name = path.relative_to(ROOT).as_posix()
    if name in CONFIG_DICT_READERS:
      continue
    deep_copies = name.startswith(NO_DEEP_COPIES)
    found += [f'{name}:{n}' for n in config_dict_reads(path.read_text(), deep_copies=deep_copies)]
  assert not found, (
      'ConfigDicts read below the entry points (parse the user config once there, then derive: Config.derive, '
      'Config.to_dict):\n' + '\n'.join(found)
  )


# ----------------------------------------------------------------------------------------------------------
# The attention call's shape: few parameters, the grid chosen with the Terms, no hidden imports.

MAX_PARAMETERS = 8
# Layer and model constructors take their configuration as keywords (as Flax modules do): each is one value
# built once, not a list copied through every path. Named here so a new one is a decision, not drift.
CONSTRUCTORS_ALLOWED = {
    ('relpos_jax/nn/attention.py', 'RelativeMultiHeadAttention.__init__'),
    ('relpos_jax/nn/blocks.py', 'TransformerBlock.__init__'),
    ('relpos_jax/nn/vit.py', 'ViT.__init__'),
}


def wide_functions(source: str) -> dict[str, int]:
  """{qualified name: parameter count} of the functions in `source` taking more than MAX_PARAMETERS parameters
  (positional, keyword-only, *args and **kwargs each count one; `self` and `cls` do not)."""
  found = {}

  def visit(node, prefix):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, ast.ClassDef):
        visit(child, f'{prefix}{child.name}.')
      elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = child.args
        names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ('self', 'cls')]
        count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
        if count > MAX_PARAMETERS:
          found[prefix + child.name] = count
        visit(child, f'{prefix}{child.name}.')

  visit(ast.parse(source), '')
  return found


def test_the_wide_function_finder_sees_the_old_attend():
  """It can fail: the keyword list `functional.attend` took (19) is found, a method's `self` is not counted."""
  old = (
      'def attend(query, key, value, *, parts, params, causal=False, key_mask=None, mask=None, q_offset=0,\n'
      '           q_positions=None, k_positions=None, position_bias=None, implementation=None, block_size=None,\n'
      '           debug_checks=False, window=None, features=None, q_segment_ids=None, k_segment_ids=None):\n'
      '  pass\n'
      'class A:\n'
      '  def f(self, a, b, c, d, e, f, g, h):\n'
      '    pass\n'
      '  def g(self, a, b, c, d, e, f, g, h, *rest):\n'
      '    pass\n'
  )
  assert wide_functions(old) == {'attend': 19, 'A.g': 9}


def test_no_function_in_nn_takes_more_than_eight_parameters():
  """relpos_jax/nn passes what one attention call takes as values (`nn/call.py`: Positions, AttentionInputs,
  AttentionSettings), so no function there takes more than MAX_PARAMETERS parameters, but for the layer and model
  constructors of CONSTRUCTORS_ALLOWED (each entry still exists)."""
  nn = ROOT / 'relpos_jax' / 'nn'
  found = {
      (path.relative_to(ROOT).as_posix(), name): count
      for path in sorted(nn.rglob('*.py'))
      for name, count in wide_functions(path.read_text()).items()
  }
  extra = sorted(
      f'{path}: {name} ({count})' for (path, name), count in found.items() if (path, name) not in CONSTRUCTORS_ALLOWED
  )
  assert not extra, f'functions in relpos_jax/nn with more than {MAX_PARAMETERS} parameters:\n' + '\n'.join(extra)
  assert CONSTRUCTORS_ALLOWED <= set(found), f'stale CONSTRUCTORS_ALLOWED: {CONSTRUCTORS_ALLOWED - set(found)}'


def module_imports_by_name(source: str, package_init: bool) -> list[int]:
  """The lines of `source` that import a module by a computed name (`importlib.import_module(...)`, however
  importlib is bound, or `__import__`), which the import graph (`import_graph`) cannot see: a circle hides there.
  A package's `__init__` importing its own submodules at its top level (f'{__name__}.{module}': the registries
  that import every family module) is an edge downward, which cannot close a circle, and is not flagged."""
  tree = ast.parse(source)
  top_calls = {
      id(n) for stmt in tree.body for n in ast.walk(stmt) if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))
  }
  lines = []
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
      continue
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', None)
    if name not in ('import_module', '__import__'):
      continue
    own_child = (
        package_init
        and id(node) in top_calls
        and node.args
        and isinstance(node.args[0], ast.JoinedStr)
        and isinstance(node.args[0].values[0], ast.FormattedValue)
        and getattr(node.args[0].values[0].value, 'id', None) == '__name__'
    )
    if not own_child:
      lines.append(node.lineno)
  return sorted(lines)


def test_the_computed_import_finder_sees_the_registry_load():
  """It can fail: grid/registry.py's old `_load` (importlib inside a function, naming the package that imports
  the registry) and a top-level import_module of another package are found; an __init__'s own families are not."""
  old = (
      'def _load():\n'
      '  import importlib\n'
      "  importlib.import_module('relpos_jax.grid.encoders')\n"
      "importlib.import_module('relpos_jax.nn')\n"
      "mod = __import__('relpos_jax.train')\n"
  )
  assert module_imports_by_name(old, package_init=False) == [3, 4, 5]
  families = 'for _m in names:\n  _importlib.import_module(f"{__name__}.{_m}")\n'
  assert module_imports_by_name(families, package_init=True) == []
  assert module_imports_by_name(families, package_init=False) == [2]


def test_no_module_imported_by_a_computed_name():
  """Every import of the package is a plain import statement the import graph sees (so `test_no_import_circles`
  sees every edge), but for a package's own family modules (see `module_imports_by_name`)."""
  found = [
      f'{path.relative_to(ROOT)}:{line}'
      for path in sorted((ROOT / 'relpos_jax').rglob('*.py'))
      for line in module_imports_by_name(path.read_text(), path.name == '__init__.py')
  ]
  assert not found, 'modules imported by a computed name (import them with an import statement):\n' + '\n'.join(found)


# The one place each: the optimizer is built in train/optim.py, gradients are taken and applied in train/step.py
# (`guarded_update`); a study owns its loss, never its own optimizer or update (issue 51: the grid study had both).
TRAINING_CALLS = {
    'value_and_grad': 'relpos_jax/train/step.py',
    'grad': 'relpos_jax/train/step.py',
    'apply_updates': 'relpos_jax/train/step.py',
    'Optimizer': 'relpos_jax/train/step.py',  # nnx.Optimizer: an update outside guarded_update
    'adamw': 'relpos_jax/train/optim.py',
    'adam': 'relpos_jax/train/optim.py',
    'scale_by_adam': 'relpos_jax/train/optim.py',
}


def training_calls(source: str) -> dict[str, list[int]]:
  """{name: lines} of the calls in `source` to a name of TRAINING_CALLS (`jax.value_and_grad(...)`,
  `optax.adamw(...)`, `nnx.Optimizer(...)`, bare or through a module)."""
  found: dict[str, list[int]] = {}
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Call):
      func = node.func
      name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', None)
      if name in TRAINING_CALLS:
        found.setdefault(name, []).append(node.lineno)
  return found


def test_the_training_call_finder_sees_a_study_of_its_own():
  old_grid = (
      'tx = optax.chain(optax.scale_by_adam(), optax.add_decayed_weights(0.0))\n'
      'optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)\n'
      'loss, grads = nnx.value_and_grad(loss_fn)(model)\n'
  )
  assert training_calls(old_grid) == {'scale_by_adam': [1], 'Optimizer': [2], 'value_and_grad': [3]}


def test_one_optimizer_and_one_update_in_the_package():
  """Every study trains through train/optim.py's OptimizerSpec and train/step.py's guarded_update."""
  strays = [
      f'{path.relative_to(ROOT).as_posix()}:{line}: {name}'
      for path in sorted((ROOT / 'relpos_jax').rglob('*.py'))
      for name, lines in training_calls(path.read_text()).items()
      if path.relative_to(ROOT).as_posix() != TRAINING_CALLS[name]
      for line in lines
  ]
  assert not strays, 'an optimizer or update outside train/optim.py and train/step.py:\n' + '\n'.join(strays)
