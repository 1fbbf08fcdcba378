"""Grid coordinates, offsets and the block-Toeplitz construction (relpos_jax/grid/positions.py, checks.py)."""

import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import grid
from relpos_jax.grid import positions as gp


def test_grid_positions_raster_order_and_class_token():
  p = np.asarray(grid.grid_positions((2, 3)))
  np.testing.assert_array_equal(p, [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]])
  assert p.dtype == np.int32
  c = np.asarray(grid.grid_positions((2, 3), class_token=True))
  assert c.shape == (7, 2)
  np.testing.assert_array_equal(c[0], [grid.CLASS_TOKEN] * 2)
  np.testing.assert_array_equal(np.asarray(grid.is_class_token(c)), [True] + [False] * 6)
  v = np.asarray(grid.grid_positions((2, 1, 2)))
  np.testing.assert_array_equal(v, [[0, 0, 0], [0, 0, 1], [1, 0, 0], [1, 0, 1]])


def test_distinct_offsets_count_and_index():
  shape = (3, 4)
  d = np.asarray(grid.distinct_offsets(shape))
  assert d.shape == ((2 * 3 - 1) * (2 * 4 - 1), 2)
  assert len({tuple(r) for r in d}) == d.shape[0]
  p = np.asarray(grid.grid_positions(shape))
  index = grid.block_toeplitz_index(shape)
  # Every pair reads the row holding its own offset p_i - p_j.
  np.testing.assert_array_equal(d[index], p[:, None, :] - p[None, :, :])


@pytest.mark.parametrize('shape', [(3, 4), (2, 2, 3)])
def test_block_toeplitz_equals_direct_evaluation(shape):
  """An arbitrary function of the offset, built from the distinct offsets and gathered, is the same as that
  function evaluated on every pair (the construction the grid bias encoders use)."""
  f = lambda d: jnp.sin(1.3 * d[..., 0]) + 0.7 * d[..., -1] ** 2 + 0.1 * d[..., 0] * d[..., -1]
  values = f(grid.distinct_offsets(shape).astype(jnp.float32))
  built = grid.block_toeplitz(values, shape)
  p = grid.grid_positions(shape).astype(jnp.float32)
  direct = f(p[:, None, :] - p[None, :, :])
  np.testing.assert_allclose(built, direct, rtol=1e-6, atol=1e-6)
  grid.assert_block_toeplitz(built, shape)


def test_block_toeplitz_class_token_reads_its_own_value():
  values = jnp.arange(9 + 1, dtype=jnp.float32)  # (2*2-1)^2 offsets + the class token's
  m = np.asarray(grid.block_toeplitz(values, (2, 2), class_token=True))
  assert m.shape == (5, 5)
  assert (m[0] == 9).all() and (m[:, 0] == 9).all()
  grid.assert_block_toeplitz(m, (2, 2), class_token=True)


def test_assert_block_toeplitz_names_the_offset():
  shape = (2, 3)
  p = np.asarray(grid.grid_positions(shape))
  m = (p[:, None, 0] - p[None, :, 0]) * 10.0 + (p[:, None, 1] - p[None, :, 1])
  grid.assert_block_toeplitz(m, shape)
  m[4, 0] += 1.0  # pair (1,1) - (0,0) = offset (1, 1)
  with pytest.raises(AssertionError, match=r'offset p_i - p_j = \(1, 1\)'):
    grid.assert_block_toeplitz(m, shape)
  # A bias that reads the query's place (FIRE's normaliser) is not a function of the offset.
  with pytest.raises(AssertionError, match='not block-Toeplitz'):
    grid.assert_block_toeplitz(np.broadcast_to(np.arange(6.0)[:, None], (6, 6)), (3, 2))


def test_bad_shapes_and_coordinates_are_refused_by_name():
  with pytest.raises(ValueError, match='shape'):
    grid.grid_positions((4,))
  with pytest.raises(ValueError, match='alibi2d.*trailing axis of 2.*got shape \\(2, 16\\)'):
    gp.check_coordinates('alibi2d', np.zeros((2, 16), np.int32), 2)
  with pytest.raises(ValueError, match='non-finite'):
    gp.check_coordinates('alibi2d', np.array([[0.0, np.nan]]), 2)
  with pytest.raises(ValueError, match='int or float'):
    gp.check_coordinates('alibi2d', np.array([[True, False]]), 2)
  with pytest.raises(ValueError, match='magnitude'):
    gp.check_coordinates('alibi2d', np.array([[0, 2**23]]), 2)
