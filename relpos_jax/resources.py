"""Where the files shipped beside the package are, however it was installed.

The config files (`configs/*.py`, e.g. `lm.py`, whose `study` variant is the default study) sit next to the
package in a checkout (`pip install -e .`, or a clone on the Python path); a wheel or sdist built by
`python -m build` installs them as data files under `<prefix>/share/relpos_jax/configs/` (setup.cfg's
`[options.data_files]`), found through the installed distribution's file list. So a notebook can load
`configs_dir() / 'lm.py'` on Colab from an uploaded wheel as from a checkout.
"""

from __future__ import annotations

import importlib.metadata
import pathlib

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
