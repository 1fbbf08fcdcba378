"""Every notebook in notebooks/ runs top to bottom on CPU in its small (smoke) setting and draws its figures.

The notebooks are executed with nbclient in a kernel of this very interpreter, so they see the same
packages as the tests. RELPOS_NOTEBOOK_SMOKE=1 tells a notebook's parameters cell to shrink its work (fewer
encoders, fewer steps); the code path is the same one a reader runs. The committed files must carry no
outputs (notebooks/README.md says why), and each run must render at least the figures listed below.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import nbclient
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / 'notebooks'
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob('*.ipynb'))
# Figures each notebook must show (a lower bound): a plot that silently stops rendering fails here.
MIN_FIGURES = {'encoder_tour.ipynb': 20, 'grid_positions.ipynb': 10, 'length_generalization.ipynb': 3}
CELL_TIMEOUT_S = 600
# jupyter_client runs a kernelspec whose argv[0] is one of these with sys.executable (KernelManager).
_SAME_PYTHON_NAMES = {'python', f'python{sys.version_info[0]}', 'python{}.{}'.format(*sys.version_info[:2])}


def test_the_notebooks_exist():
  names = [p.name for p in NOTEBOOKS]
  assert set(MIN_FIGURES) <= set(names), names
  assert set(names) <= set(MIN_FIGURES), f'add the new notebook(s) to MIN_FIGURES: {names}'


@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs_and_setup_first(path):
  nb = nbformat.read(path, as_version=4)
  nbformat.validate(nb)
  code = [cell for cell in nb.cells if cell.cell_type == 'code']
  for n, cell in enumerate(code):
    assert not cell.outputs and cell.execution_count is None, f'{path.name}: code cell {n} has outputs'
  assert (
      'find_checkout' in code[0].source and 'REPO_URL' in code[0].source
  ), f'{path.name}: the first code cell must be the setup cell (checkout or clone + install)'
  assert nb.metadata.kernelspec.name == 'python3'


def _kernel_for_this_python(tmp_path: pathlib.Path, monkeypatch) -> str:
  """'python3' when that kernelspec runs sys.executable, else a temporary kernelspec that does."""
  try:
    argv = KernelSpecManager().get_kernel_spec('python3').argv
  except NoSuchKernel:
    argv = None
  if argv and (argv[0] in _SAME_PYTHON_NAMES or os.path.abspath(argv[0]) == os.path.abspath(sys.executable)):
    return 'python3'
  name = 'relpos-jax-test'
  spec_dir = tmp_path / 'jupyter' / 'kernels' / name
  spec_dir.mkdir(parents=True)
  (spec_dir / 'kernel.json').write_text(
      json.dumps(
          {
              'argv': [sys.executable, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
              'display_name': f'Python ({sys.executable})',
              'language': 'python',
          }
      )
  )
  existing = os.environ.get('JUPYTER_PATH')
  monkeypatch.setenv('JUPYTER_PATH', os.pathsep.join([str(tmp_path / 'jupyter')] + ([existing] if existing else [])))
  return name


def _figures(nb) -> int:
  return sum(
      'image/png' in output.get('data', {}) for cell in nb.cells if cell.cell_type == 'code' for output in cell.outputs
  )


@pytest.mark.slow
@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
  monkeypatch.setenv('RELPOS_NOTEBOOK_SMOKE', '1')
  monkeypatch.setenv('RELPOS_NOTEBOOK_WORKDIR', str(tmp_path / 'workdir'))
  monkeypatch.setenv('JAX_PLATFORMS', 'cpu')
  monkeypatch.setenv('MPLBACKEND', 'module://matplotlib_inline.backend_inline')
  # One CPU device, as on Colab: the fake devices tests/conftest.py asks for only slow the kernel down.
  flags = [f for f in os.environ.get('XLA_FLAGS', '').split() if 'force_host_platform_device_count' not in f]
  monkeypatch.setenv('XLA_FLAGS', ' '.join(flags))
  nb = nbformat.read(path, as_version=4)
  client = nbclient.NotebookClient(
      nb,
      kernel_name=_kernel_for_this_python(tmp_path, monkeypatch),
      timeout=CELL_TIMEOUT_S,
      resources={'metadata': {'path': str(NOTEBOOK_DIR)}},
  )  # the notebook's cwd
  client.execute()  # Raises CellExecutionError, with the cell and its traceback, if any cell fails.
  setup_cell = next(cell for cell in nb.cells if cell.cell_type == 'code')
  setup_output = ''.join(output.get('text', '') for output in setup_cell.outputs)
  assert f'checkout: {ROOT}' in setup_output, setup_output  # the local checkout was found, nothing cloned
  assert _figures(nb) >= MIN_FIGURES[path.name], f'{path.name} drew {_figures(nb)} figures'


# ----------------------------------------------------------------------------------------------------------
# relpos_jax.viz, the plotting helpers the notebooks call: what they compute, checked without a kernel.


@pytest.fixture
def viz():
  import matplotlib

  matplotlib.use('Agg')  # This process only: the tests draw figures but never show them.
  import matplotlib.pyplot as plt
  from relpos_jax import viz as viz_lib

  yield viz_lib
  plt.close('all')


def _init(encoder, **dims):
  import jax

  return encoder.init(jax.random.key(0), 4, **dims)


def test_viz_bias_curves_read_the_encoder(viz):
  import numpy as np
  from relpos_jax import encoders

  t5 = encoders.make('t5')
  params = _init(t5)
  distances = np.arange(-40, 41)
  np.testing.assert_array_equal(viz.bias_curves(t5, params, distances), np.asarray(t5.bias(params, distances)))
  fire = encoders.make('fire')
  curves = viz.bias_curves(fire, _init(fire), distances, query_positions=(10, 600))
  assert curves.shape == (2, distances.size, 4)
  assert np.isnan(curves[0, distances < -10]).all() and np.isfinite(curves[0, distances >= -10]).all()
  with pytest.raises(ValueError, match='kind scalar_bias.*rotary'):
    viz.bias_curves(encoders.make('rope'), _init(encoders.make('rope'), head_dim=8), distances)


def test_viz_heatmaps_share_one_zero_centred_scale(viz):
  import numpy as np
  from relpos_jax import encoders

  alibi = encoders.make('alibi')
  fig = viz.plot_bias_heatmaps(alibi, _init(alibi), 12)
  limits = {image.get_clim() for ax in fig.axes for image in ax.images}
  assert len(limits) == 1 and sum(next(iter(limits))) == 0  # every head on one scale, symmetric about 0
  nope = encoders.make('nope')
  fig = viz.plot_bias_heatmaps(nope, _init(nope), 12)
  assert [ax.get_title() for ax in fig.axes if ax.images] == ['every head']  # identical heads: one panel
  assert not viz.heads_differ(np.zeros((5, 3))) and viz.heads_differ(np.eye(3))


def test_viz_rotary_scores_are_relative(viz):
  import numpy as np
  from relpos_jax import checks, encoders

  rng = np.random.default_rng(0)
  q, k = rng.normal(size=16), rng.normal(size=16)
  for encoder in (encoders.make('rope'), encoders.make('xpos')):
    params = _init(encoder, head_dim=16)
    distances = np.arange(-30, 1)
    near, far = (viz.rotary_scores(encoder, params, q, k, distances, i) for i in (30, 5000))
    np.testing.assert_allclose(near, far, rtol=1e-4, atol=1e-4)
    matrix = viz.rotary_score_matrix(encoder, params, q, k, 16)
    checks.assert_toeplitz(np.tril(matrix), atol=1e-4)
  rope = encoders.make('rope')
  same_position = viz.rotary_scores(rope, _init(rope, head_dim=16), np.ones(16), np.ones(16), [0], 7)
  np.testing.assert_allclose(same_position, [16.0], rtol=1e-6)  # R_i q . R_i q = |q|^2


def test_viz_bucket_maps_and_errors(viz):
  import numpy as np
  from relpos_jax import encoders

  maps = viz.bucket_maps(encoders.make('multiscale'), np.arange(-200, 201))
  assert list(maps) == ['scale 1', 'scale 4', 'scale 16']
  assert all(m.min() == 0 and m.max() == 16 for m in maps.values())  # every row of each 17-row table
  (t5_map,) = viz.bucket_maps(encoders.make('t5', bidirectional=False), np.arange(-200, 1)).values()
  assert t5_map[-1] == 0 and t5_map[0] == 31
  with pytest.raises(ValueError, match='no bucket map'):
    viz.bucket_maps(encoders.make('alibi'), np.arange(3))
  with pytest.raises(ValueError, match='non-empty 1-D array of ints'):
    viz.bucket_maps(encoders.make('t5'), np.linspace(0, 1, 3))
  from relpos_jax.encoders.combine import combine

  with pytest.raises(ValueError, match='sum of encoders'):
    viz.plot_encoder(combine(encoders.make('sinusoidal'), encoders.make('t5')))
  with pytest.raises(ValueError, match='dynamic NTK'):
    viz.plot_rotary_frequencies(16, {'d': dict(scaling='dynamic', factor=2.0)})
