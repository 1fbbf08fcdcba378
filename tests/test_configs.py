"""Each study its own config file (configs/studies/<name>.py, big_vision's layout): each builds what the committed
study ran, and passes the study's (or suite's) checks before anything is trained.

tests/configs_expected.txt holds every shipped config, one dotted key a line, as the variant algebra of
configs/lm.py and configs/algorithmic.py built it before the studies got their files (the old path follows each
section's name). The old variant names stay as aliases that load the studies file; they are pinned here too, so a
command recorded in a committed study still builds that study. Fast: only ConfigDicts are built.

A new studies file gets its section in configs_expected.txt, printed from the file (check each line: it is what
the study will run):

    python -c "from tests import test_configs as t; print(t.section('configs/studies/<name>.py'))"
"""

import ast
import glob
import os

import pytest

from relpos_jax import resources
from relpos_jax.study import resolution, runner, suite
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPECTED_FILE = os.path.join(REPO, 'tests', 'configs_expected.txt')


def _expected() -> dict[str, tuple[str, dict]]:
  """{config path: (the old variant path it was written from, {dotted key: value})}."""
  sections, current = {}, None
  with open(EXPECTED_FILE, encoding='utf-8') as f:
    for line in f:
      line = line.rstrip('\n')
      if not line or line.startswith('#'):
        continue
      if line.startswith('['):
        name, _, old = line[1:].partition('] ')
        current = sections[name] = (old, {})
      else:
        key, _, value = line.partition(': ')
        current[1][key] = ast.literal_eval(value)
  return sections


EXPECTED = _expected()
STUDIES = sorted(p for p in EXPECTED if p.startswith('configs/studies/'))


def _flat(value, prefix=''):
  """{dotted key: leaf} of a to_dict() tree, as configs_expected.txt lists it (an empty dict is a leaf)."""
  if isinstance(value, dict) and value:
    out = {}
    for key, child in value.items():
      out.update(_flat(child, f'{prefix}.{key}' if prefix else key))
    return out
  return {prefix: value}


def _built(path: str) -> dict:
  return _flat(config_files.config_from_file(os.path.join(REPO, path)).to_dict())


def section(path: str, old: str | None = None) -> str:
  """The lines of configs_expected.txt for the config file `path` (`old`: the path it was written from)."""
  lines = [f'[{path}] {old or path}'] + [f'{key}: {value!r}' for key, value in sorted(_built(path).items())]
  return '\n'.join(lines)


class _Absent:

  def __repr__(self):
    return '(absent)'


ABSENT = _Absent()


def _differences(built: dict, expected: dict) -> list[str]:
  """The keys that differ, each with both values (types count: a tuple is not a list, 1 is not 1.0)."""
  return [
      f'{key}: built {built.get(key, ABSENT)!r}, expected {expected.get(key, ABSENT)!r}'
      for key in sorted(set(built) | set(expected))
      if repr(built.get(key, ABSENT)) != repr(expected.get(key, ABSENT))
  ]


def test_a_section_reads_back_as_the_config_it_was_printed_from():
  text = section('configs/studies/suite_abacus.py')
  assert text.splitlines()[0] == '[configs/studies/suite_abacus.py] configs/studies/suite_abacus.py'
  assert 'suite.protocols.addition_abacus.task_kwargs.max_offset: 40' in text.splitlines()
  assert {k: ast.literal_eval(v) for k, _, v in (line.partition(': ') for line in text.splitlines()[1:])} == (
      _built('configs/studies/suite_abacus.py')
  )


def test_every_studies_file_is_pinned_and_every_pinned_one_exists():
  on_disk = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, 'configs', 'studies', '*.py')))
  # A studies file that needs its argument (suite_ruoss_edge.py:<task>) is pinned once per argument.
  assert on_disk == sorted({p.partition(':')[0] for p in STUDIES})


@pytest.mark.parametrize('path', sorted(EXPECTED))
def test_each_config_builds_what_its_old_variant_built(path):
  """configs/studies/<name>.py (and the runs of configs/lm.py and configs/algorithmic.py) to the key and type."""
  assert _differences(_built(path), EXPECTED[path][1]) == []


@pytest.mark.parametrize('path', sorted(p for p in EXPECTED if EXPECTED[p][0] != p))
def test_each_old_variant_name_is_an_alias_of_its_studies_file(path):
  old = EXPECTED[path][0]
  assert _differences(_built(old), _built(path)) == []


def test_the_differences_name_the_key_and_both_values():
  """The failure message of the pin above reads as a diff, not as two 60-key dicts."""
  assert _differences({'a.b': (1, 2), 'c': 1, 'e': 1}, {'a.b': [1, 2], 'd': None, 'e': 1.0}) == [
      'a.b: built (1, 2), expected [1, 2]',
      'c: built 1, expected (absent)',
      'd: built (absent), expected None',
      'e: built 1, expected 1.0',
  ]


@pytest.mark.parametrize('path', STUDIES)
@pytest.mark.usefixtures('austen_laid_out_if_absent')
def test_each_studies_file_passes_its_prevalidation(path):
  """The checks a study or suite runs before it trains anything (encoders, protocol, comparisons, grid; a grid
  study's config keys, relpos_jax.study.resolution.parse_config); the
  English studies' corpus, an optional system package, laid out where it is absent (tests/conftest.py)."""
  config = config_files.config_from_file(os.path.join(REPO, path))
  if 'study' not in config and 'suite' not in config:  # a grid study (relpos_jax.study.resolution): its keys
    settings = resolution.parse_config(config)
    assert len(resolution.parse_encoders(settings)) == len(config.encoders)
  elif 'suite' in config:
    studies = suite.validate_suite(config)
    assert len(studies) == len(config.suite.tasks)
  else:
    base, entries = runner.validate_study(config)
    assert isinstance(base, config_lib.Config) and len(entries) == len(config.study.encoders)


def test_a_studies_file_takes_no_variant():
  with pytest.raises(config_lib.ConfigError, match=r"unknown config variant\(s\) \['quick'\]"):
    config_files.config_from_file(os.path.join(REPO, 'configs', 'studies', 'study.py:quick'))


def test_a_variant_combination_that_is_no_study_names_the_studies_files():
  with pytest.raises(
      config_lib.ConfigError,
      match=r"configs/lm.py: the variants \['bpe', 'study'\] name no study.*"
      r'study,long = configs/studies/study_long.py',
  ):
    config_files.config_from_file(os.path.join(REPO, 'configs', 'lm.py:study,bpe'))


def test_config_module_loads_a_shipped_config_once_and_names_a_missing_one():
  assert resources.config_module('lm') is resources.config_module('lm')
  assert resources.config_module('studies/study_english').get_config().data.corpus == 'austen'
  with pytest.raises(FileNotFoundError, match=r"config module 'studies/nope'"):
    resources.config_module('studies/nope')


@pytest.mark.parametrize(
    'studies_file, task_without', [('suite_ruoss_edge', 'even_pairs'), ('suite_contextual_edge', 'parity_check')]
)
def test_the_edge_check_config_names_a_task_without_an_edge_and_the_allowed_ones(studies_file, task_without):
  path = f'configs/studies/{studies_file}.py'
  with pytest.raises(
      ValueError,
      match=rf"{path}: the argument '{task_without}' is not a task with an edge to check; allowed: one of \[",
  ):
    config_files.load_config(f'{path}:{task_without}', validate_config=False)
  with pytest.raises(ValueError, match=r'argument None is not a task'):
    config_files.load_config(path, validate_config=False)


def test_the_edge_check_trains_one_rung_past_each_tasks_own_grid():
  """The shared grid (3e-4, 1e-3, 3e-3) is checked at 1e-2; count_copy's own grid, reaching 3e-2, at 1e-1; a grid
  whose top is off the ladder (or its last rung) is refused with the allowed tops."""
  algorithmic = resources.config_module('algorithmic')
  assert algorithmic.edge_rate((3e-4, 1e-3, 3e-3)) == 1e-2
  assert algorithmic.edge_rate((3e-4, 1e-3, 3e-3, 1e-2, 3e-2)) == 1e-1
  for grid in ((2e-3,), (1.0,)):
    with pytest.raises(ValueError, match=r'edge_rate: the grid .* tops at .*; allowed: a top among'):
      algorithmic.edge_rate(grid)
  config = config_files.load_config('configs/studies/suite_contextual_edge.py:count_copy', validate_config=False)
  assert tuple(config.suite.lr_grid) == (1e-2,) and tuple(config.suite.protocols.count_copy.lr_grid) == (1e-1,)
  assert config.suite.protocols.passkey_tokens.get('lr_grid') is None  # the shared grid's check, 1e-2
