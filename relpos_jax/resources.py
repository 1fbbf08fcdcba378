"""Where the files shipped beside the package are, however it was installed.

The config files (`configs/*.py`, e.g. `lm.py`, whose `study` variant is the default study) sit next to the
package in a checkout (`pip install -e .`, or a clone on the Python path); a wheel or sdist built by
`python -m build` installs them as data files under `<prefix>/share/relpos_jax/configs/` (setup.cfg's
`[options.data_files]`), found through the installed distribution's file list. So a notebook can load
`configs_dir() / 'lm.py'` on Colab from an uploaded wheel as from a checkout.

Each study has its own file, `configs/studies/<name>.py` (big_vision's layout), built on the shared pieces of
`configs/lm.py` or `configs/algorithmic.py` (the run config, encoder lists, committed learning rates), which it
loads with `config_module`: `configs/` ships as data files, not as a package, so it is imported by path.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pathlib
import types

DISTRIBUTION = 'relpos_jax'
MARKER = 'lm.py'  # a config every layout ships


def configs_dir() -> pathlib.Path:
  """The directory of the shipped `get_config()` files: the checkout's `configs/`, or the installed copy."""
  checkout = pathlib.Path(__file__).resolve().parent.parent / 'configs'
  if (checkout / MARKER).is_file():
    return checkout
  try:
    files = importlib.metadata.distribution(DISTRIBUTION).files or ()
  except importlib.metadata.PackageNotFoundError:
    files = ()
  for file in files:
    if file.parts[-2:] == ('configs', MARKER):
      return pathlib.Path(file.locate()).resolve().parent
  raise FileNotFoundError(
      f'the relpos_jax configs are neither in a checkout ({checkout}) nor installed with the package; '
      'install from a checkout, a wheel or an sdist built by `python -m build`, or a git URL.'
  )


_CONFIG_MODULES: dict[pathlib.Path, types.ModuleType] = {}


def config_module(name: str) -> types.ModuleType:
  """The shipped config file `configs/<name>.py` as a module, executed once per process: what a studies file
  builds on (`lm = resources.config_module('lm')`, `resources.config_module('studies/study_english')`), as
  big_vision's configs import `big_vision.configs.common`. Loaded from `configs_dir()`, so a studies file copied
  elsewhere still finds the shipped pieces."""
  path = (configs_dir() / f'{name}.py').resolve()
  if path not in _CONFIG_MODULES:
    if not path.is_file():
      raise FileNotFoundError(f'config module {name!r}: no file {path} (the shipped configs: {configs_dir()}).')
    spec = importlib.util.spec_from_file_location(f'relpos_jax_configs.{name.replace("/", ".")}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _CONFIG_MODULES[path] = module
  return _CONFIG_MODULES[path]
