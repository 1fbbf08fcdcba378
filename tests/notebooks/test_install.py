"""The notebooks' setup cell installs relpos_jax where no checkout is, as on a fresh Colab: from a wheel
built by `python -m build` and uploaded next to the notebook.

The wheel (and the sdist it is built from) is built from a copy of this checkout's package files with
`python -m build --no-isolation` (the dev extra installs build, wheel and setuptools, so nothing is
downloaded). It is installed by the setup cell itself, run as a script in a new virtual environment
(`--without-pip`) that sees the test environment's third-party packages through symlinks (every
top-level entry of its site-packages except relpos_jax's own), with `PIP_NO_INDEX=1`: pip finds the
dependencies installed and fetches nothing, and relpos_jax is importable only from the wheel.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import site
import subprocess
import sys
import sysconfig

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / 'notebooks').glob('*.ipynb'))
PACKAGE_FILES = ('setup.cfg', 'pyproject.toml', 'README.md', 'relpos_jax', 'configs')


def _setup_cell(path: pathlib.Path) -> str:
  nb = nbformat.read(path, as_version=4)
  return next(cell.source for cell in nb.cells if cell.cell_type == 'code')


def test_every_notebook_has_the_same_setup_cell():
  cells = {path.name: _setup_cell(path) for path in NOTEBOOKS}
  assert len(set(cells.values())) == 1, f'the setup cells differ: {sorted(cells)}'


def _venv_seeing_the_dependencies(venv: pathlib.Path) -> pathlib.Path:
  """A venv whose site-packages links every package of this interpreter's but relpos_jax; its python."""
  subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True, timeout=120)
  python = venv / 'bin' / 'python'
  purelib = subprocess.run(
      [str(python), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
      check=True,
      capture_output=True,
      text=True,
      timeout=60,
  ).stdout.strip()
  deps = pathlib.Path(purelib).parent / 'test-environment-packages'  # beside, not in, site-packages
  deps.mkdir()
  for directory in dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()['purelib']]):
    for entry in pathlib.Path(directory).iterdir():
      name = entry.name.lower()
      if name.startswith(('relpos_jax', '__editable__', 'relpos-jax')) or name.endswith('.pth'):
        continue
      if not (deps / entry.name).exists():
        (deps / entry.name).symlink_to(entry)
  (pathlib.Path(purelib) / 'test-environment.pth').write_text(f'{deps}\n')  # after site-packages on sys.path
  return python


@pytest.mark.slow
def test_setup_cell_installs_an_uploaded_wheel_in_a_clean_venv(tmp_path):
  source = tmp_path / 'source'
  source.mkdir()
  for name in PACKAGE_FILES:
    copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
    copy(ROOT / name, source / name)
  built = subprocess.run(
      [sys.executable, '-m', 'build', '--no-isolation', '--outdir', str(tmp_path / 'dist'), str(source)],
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
  (wheel,) = (tmp_path / 'dist').glob('relpos_jax-*-py3-none-any.whl')
  assert len(list((tmp_path / 'dist').glob('relpos_jax-*.tar.gz'))) == 1  # the sdist the wheel came from

  colab = tmp_path / 'content'  # Colab's working directory, with the uploaded wheel in it
  colab.mkdir()
  shutil.copy(wheel, colab / wheel.name)
  python = _venv_seeing_the_dependencies(tmp_path / 'venv')
  script = tmp_path / 'setup_cell.py'
  script.write_text(_setup_cell(NOTEBOOKS[0]) + """
from relpos_jax import study
config = study.load_study_config(CONFIGS / 'studies' / 'study.py')  # the wheel ships configs/studies/ too
print('study encoders:', len(config.study.encoders))
""")
  env = {k: v for k, v in os.environ.items() if not k.startswith(('RELPOS_JAX_', 'PYTHON', 'VIRTUAL_ENV', 'XLA_FLAGS'))}
  env.update(PIP_NO_INDEX='1', PIP_DISABLE_PIP_VERSION_CHECK='1', JAX_PLATFORMS='cpu')
  done = subprocess.run([str(python), str(script)], cwd=colab, env=env, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  lines = done.stdout.splitlines()
  venv = (tmp_path / 'venv').resolve()
  version_line = next(line for line in lines if line.startswith('relpos_jax '))
  imported_from = pathlib.Path(version_line.split(' from ')[1])
  assert imported_from.is_relative_to(venv) and imported_from.parent.name == 'site-packages', done.stdout
  assert f'installed: {colab / wheel.name}' in lines
  configs = pathlib.Path(next(line for line in lines if line.startswith('configs: ')).split(': ', 1)[1])
  assert configs.is_relative_to(venv) and configs.parts[-3:] == ('share', 'relpos_jax', 'configs'), done.stdout
  from relpos_jax import study

  here = study.load_study_config(ROOT / 'configs' / 'studies' / 'study.py')
  assert f'study encoders: {len(here.study.encoders)}' in lines  # the default study, from the installed copy


def test_setup_cell_without_a_checkout_a_package_or_a_url_says_what_to_do(tmp_path):
  script = tmp_path / 'setup_cell.py'
  script.write_text(_setup_cell(NOTEBOOKS[0]))
  env = {k: v for k, v in os.environ.items() if not k.startswith('RELPOS_JAX_')}
  done = subprocess.run(
      [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
  )
  assert done.returncode != 0
  assert 'upload a wheel or sdist built by `python -m build` (PACKAGE), or set REPO_URL' in done.stderr
  env['RELPOS_JAX_PACKAGE'] = str(tmp_path / 'relpos_jax-0.1.0-py3-none-any.whl')
  done = subprocess.run(
      [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
  )
  assert done.returncode != 0 and 'no such file; upload the wheel or sdist first' in done.stderr
