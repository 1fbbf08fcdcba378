"""STRING (Schenck et al. 2025): RoPE in a learned orthogonal basis, R(r) = P^T RoPE(r) P. Properties from the
paper (no reference code is public): P orthogonal, scores depend on r_i - r_j only, the base RoPE at P = I; and
the encoder through the attention layer's grid path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders, grid
from relpos_jax.nn import RelativeMultiHeadAttention

H, D = 3, 12
SPECS = ['string', "string(parametrization='expm')", "string(rotation='mixed')", 'string(axes=3)']


def _params(enc, seed=0, head_dim=D):
  params = enc.init(jax.random.key(seed), H, head_dim=head_dim)
  return {**params, 'skew': jax.random.normal(jax.random.key(seed + 100), params['skew'].shape)}


def _coords(shape):
  return grid.grid_positions(shape)


@pytest.mark.parametrize('spec', SPECS)
def test_p_is_orthogonal_with_det_one(spec):
  enc = grid.from_spec(spec)
  p = np.asarray(enc.orthogonal(_params(enc)), np.float64)
  np.testing.assert_allclose(p @ np.swapaxes(p, -1, -2), np.broadcast_to(np.eye(D), p.shape), atol=2e-5)
  np.testing.assert_allclose(np.linalg.det(p), 1.0, atol=1e-4)
  assert not np.allclose(p, np.eye(D), atol=1e-2)  # the random skew parameter moved it


def test_cayley_hand_value():
  """A[0, 1] = a: S = [[0, a], [-a, 0]] and P = (I + S)^{-1}(I - S) = [[1 - a^2, -2a], [2a, 1 - a^2]] / (1 + a^2)
  on the first two features, the identity elsewhere; a = 1 is the quarter turn [[0, -1], [1, 0]]."""
  enc = grid.make('string')
  params = enc.init(jax.random.key(0), 1, head_dim=4)
  for a in (1.0, 0.5):
    p = np.asarray(enc.orthogonal({**params, 'skew': params['skew'].at[0, 0, 1].set(a)}))[0]
    expected = np.eye(4)
    expected[:2, :2] = np.array([[1 - a * a, -2 * a], [2 * a, 1 - a * a]]) / (1 + a * a)
    np.testing.assert_allclose(p, expected, atol=1e-6)
  p = np.asarray(
      grid.make('string', parametrization='expm').orthogonal({**params, 'skew': params['skew'].at[0, 0, 1].set(0.3)})
  )[0]
  np.testing.assert_allclose(p[:2, :2], [[np.cos(0.3), np.sin(0.3)], [-np.sin(0.3), np.cos(0.3)]], atol=1e-6)


@pytest.mark.parametrize('spec', SPECS)
def test_scores_depend_on_the_offset_only(spec):
  """With one query and one key vector at every token, s[i, j] = (R(r_i) q) . (R(r_j) k) is a function of
  r_i - r_j: block-Toeplitz over the grid, per head, and unchanged by a float translation of every coordinate."""
  enc = grid.from_spec(spec)
  params = _params(enc)
  shape = (2, 3, 2) if enc.axes == 3 else (3, 4)
  coords = _coords(shape)
  n = coords.shape[0]
  q = jnp.broadcast_to(jax.random.normal(jax.random.key(1), (1, 1, H, D)), (1, n, H, D))
  k = jnp.broadcast_to(jax.random.normal(jax.random.key(2), (1, 1, H, D)), (1, n, H, D))
  rq, rk = enc.rotate(params, q, coords[None]), enc.rotate(params, k, coords[None])
  scores = np.asarray(jnp.einsum('bihd,bjhd->bhij', rq, rk))[0]
  grid.assert_block_toeplitz(scores, shape, atol=2e-5, rtol=2e-5)
  moved = coords.astype(jnp.float32) + jnp.asarray([0.37, -5.5, 2.25][: enc.axes])
  rq2, rk2 = enc.rotate(params, q, moved[None]), enc.rotate(params, k, moved[None])
  np.testing.assert_allclose(jnp.einsum('bihd,bjhd->bhij', rq2, rk2)[0], scores, atol=5e-5)
  # The same scores as the base RoPE of P q and P k (the rotation's P^T cancels in the dot product).
  p = enc.orthogonal(params)
  base = enc.rope()
  pq = base.rotate(params, jnp.einsum('hde,bihe->bihd', p, q), coords[None])
  pk = base.rotate(params, jnp.einsum('hde,bihe->bihd', p, k), coords[None])
  np.testing.assert_allclose(jnp.einsum('bihd,bjhd->bhij', pq, pk)[0], scores, atol=5e-5)


@pytest.mark.parametrize('spec, base', [('string', 'rope_axial'), ("string(rotation='mixed')", 'rope_mixed')])
def test_identity_basis_is_the_base_rope(spec, base):
  """At initialisation (A = 0, P = I) the rotation is the base RoPE's, with its frequencies (same key)."""
  enc, ref = grid.from_spec(spec), grid.from_spec(base)
  params, ref_params = enc.init(jax.random.key(4), H, head_dim=D), ref.init(jax.random.key(4), H, head_dim=D)
  np.testing.assert_array_equal(enc.orthogonal(params), np.broadcast_to(np.eye(D), (H, D, D)))
  x = jax.random.normal(jax.random.key(5), (2, 13, H, D))
  coords = jnp.broadcast_to(grid.grid_positions((3, 4), class_token=True), (2, 13, 2))
  np.testing.assert_allclose(enc.rotate(params, x, coords), ref.rotate(ref_params, x, coords), atol=1e-6)
  # Away from P = I it differs (the test can fail), and the class token stays unrotated (P^T P = I).
  moved = enc.rotate(_params(enc), x, coords)
  assert not np.allclose(moved, ref.rotate(ref_params, x, coords), atol=1e-3)
  np.testing.assert_allclose(moved[:, 0], x[:, 0], atol=2e-6)


def test_spec_registry_and_refusals():
  for spec in SPECS + ["string(rotation='mixed', base=5.0, layout='half')"]:
    enc = grid.from_spec(spec)
    assert grid.from_spec(grid.to_spec(enc)) == enc and repr(enc) == grid.to_spec(enc)
  assert 'string' in grid.names() and 'string' not in encoders.names()
  with pytest.raises(ValueError, match='string.*rotation'):
    grid.make('string', rotation='diagonal')
  with pytest.raises(ValueError, match=r"string.*axes.*rotation='mixed'"):
    grid.make('string', rotation='mixed', axes=3)
  enc = grid.make('string')
  params = enc.init(jax.random.key(0), H, head_dim=D)
  with pytest.raises(ValueError, match=r'string.*trailing axis of 2.*got shape \(1, 4\)'):
    enc.rotate(params, jnp.zeros((1, 4, H, D)), jnp.arange(4)[None])
  with pytest.raises(ValueError, match='string.*head_dim'):
    enc.init(jax.random.key(0), H, head_dim=6)
  with pytest.raises(ValueError, match=r'string: x must be .*head_dim=12'):
    enc.rotate(params, jnp.zeros((1, 4, H, 16)), _coords((2, 2))[None])


def test_layer_grid_path():
  """The layer: grid_shape equals explicit coordinates, translation invariance, refusal of 1-D positions."""
  layer = RelativeMultiHeadAttention(4, 32, grid.from_spec('string'), rngs=nnx.Rngs(0))
  for part in layer.position_params:
    for var in jax.tree.leaves(part, is_leaf=lambda v: isinstance(v, nnx.Variable)):
      var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(7), var[...].shape)
  x = jax.random.normal(jax.random.key(0), (2, 13, 32))
  coords = jnp.broadcast_to(grid.grid_positions((3, 4), class_token=True), (2, 13, 2))
  a = layer(x, grid_shape=(3, 4), class_token=True)
  np.testing.assert_allclose(a, layer(x, positions=coords), rtol=2e-5, atol=2e-5)
  patches = coords[:, 1:]
  np.testing.assert_allclose(
      layer(x[:, 1:], positions=patches), layer(x[:, 1:], positions=patches + 9), rtol=2e-4, atol=2e-4
  )
  with pytest.raises(ValueError, match=r"\['string'\] read coordinates.*got positions of shape \(2, 13\)"):
    layer(x, positions=jnp.broadcast_to(jnp.arange(13), (2, 13)))
