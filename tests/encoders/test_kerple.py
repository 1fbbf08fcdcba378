"""KERPLE power and log kernels: constraints hold for any raw parameters, hand values, the reference init."""

from __future__ import annotations

import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax.encoders import kerple, make

# Raw parameters anywhere in +-1e30 (float32), including huge magnitudes; distances up to 1000 so that
# r1 * |d|^2 <= 1e36 stays a float32.
_BIG = float(np.float32(1e30))
_raw = st.floats(-_BIG, _BIG, width=32, allow_nan=False, allow_infinity=False)
# A fixed shape: every new shape would compile the eager ops again.
_rel = hnp.arrays(np.int32, (16,), elements=st.integers(-1000, 1000))


def _raw_params(enc, num_heads, r1_raw, r2_raw):
  params = enc.init(jax.random.key(0), num_heads)
  return {**params, 'r1_raw': jnp.asarray(r1_raw, jnp.float32), 'r2_raw': jnp.asarray(r2_raw, jnp.float32)}


@st.composite
def _heads_and_raws(draw):
  num_heads = draw(st.integers(1, 8))
  return (
      num_heads,
      draw(st.lists(_raw, min_size=num_heads, max_size=num_heads)),
      draw(st.lists(_raw, min_size=num_heads, max_size=num_heads)),
  )


@hypothesis.given(_heads_and_raws(), _rel)
def test_power_constraints_hold_for_any_raw_parameters(heads_and_raws, rel):
  num_heads, r1_raw, r2_raw = heads_and_raws
  enc = make('kerple_power')
  params = _raw_params(enc, num_heads, r1_raw, r2_raw)
  r1, r2 = map(np.asarray, enc.effective_params(params))
  assert np.all(r1 > 0) and np.all(np.isfinite(r1))
  assert np.all(r2 > 0) and np.all(r2 <= 2)
  bias = np.asarray(enc.bias(params, rel))
  assert bias.shape == rel.shape + (num_heads,)
  assert np.all(np.isfinite(bias)) and np.all(bias <= 0)


@hypothesis.given(_heads_and_raws(), _rel)
def test_log_constraints_hold_for_any_raw_parameters(heads_and_raws, rel):
  num_heads, r1_raw, r2_raw = heads_and_raws
  enc = make('kerple_log')
  params = _raw_params(enc, num_heads, r1_raw, r2_raw)
  r1, r2 = map(np.asarray, enc.effective_params(params))
  assert np.all(r1 > 0) and np.all(np.isfinite(r1))
  assert np.all(r2 > 0) and np.all(np.isfinite(r2))
  bias = np.asarray(enc.bias(params, rel))
  assert np.all(np.isfinite(bias)) and np.all(bias <= 0)


def test_exponent_reaches_but_never_exceeds_two():
  assert float(kerple.exponent(jnp.float32(1e30))) == 2.0
  assert float(kerple.exponent(jnp.float32(40.0))) <= 2.0
  assert float(kerple.exponent(jnp.float32(-1e30))) == pytest.approx(kerple.EPS, rel=1e-6)


def test_power_hand_values():
  enc = make('kerple_power')
  params = enc.params_for(enc.init(jax.random.key(0), 2), r1=[0.5, 2.0], r2=[1.5, 1.0])
  r1, r2 = enc.effective_params(params)
  np.testing.assert_allclose(r1, [0.5, 2.0], rtol=1e-5)
  np.testing.assert_allclose(r2, [1.5, 1.0], rtol=1e-5)
  # -r1 |d|^r2: d = 4: -0.5 * 8, -2 * 4; d = -9: -0.5 * 27, -2 * 9; d = 0: 0.
  expected = [[-4.0, -8.0], [-13.5, -18.0], [0.0, 0.0]]
  np.testing.assert_allclose(enc.bias(params, jnp.array([4, -9, 0])), expected, rtol=1e-5)


def test_log_hand_values():
  enc = make('kerple_log')
  params = enc.params_for(enc.init(jax.random.key(0), 2), r1=[1.0, 2.0], r2=[1.0, 0.5])
  # -r1 log(1 + r2 |d|): d = -3: -log 4, -2 log 2.5; d = 0: 0.
  expected = [[-1.3862943611198906, -1.8325814637483102], [0.0, 0.0]]
  np.testing.assert_allclose(enc.bias(params, jnp.array([-3, 0])), expected, rtol=1e-5)


def test_power_with_unit_exponent_is_a_learned_alibi():
  enc = make('kerple_power')
  slopes = np.array([1 / 2, 1 / 4, 1 / 16])
  params = enc.params_for(enc.init(jax.random.key(0), 3), r1=slopes, r2=1.0)
  rel = jnp.arange(-20, 21)
  np.testing.assert_allclose(enc.bias(params, rel), -np.abs(np.arange(-20, 21))[:, None] * slopes, rtol=1e-5)


@pytest.mark.parametrize(
    'name, r1, r2, field',
    [
        ('kerple_power', 0.005, 1.0, 'r1'),
        ('kerple_power', 1.0, 2.0, 'r2'),
        ('kerple_power', 1.0, 0.0, 'r2'),
        ('kerple_log', float('inf'), 1.0, 'r1'),
        ('kerple_log', 1.0, -1.0, 'r2'),
    ],
)
def test_params_for_rejects_values_outside_the_parametrisation(name, r1, r2, field):
  enc = make(name)
  with pytest.raises(ValueError, match=f'{field}='):
    enc.params_for(enc.init(jax.random.key(0), 2), r1=r1, r2=r2)


@pytest.mark.parametrize('name, r1_upper, r2_upper', [('kerple_power', 1.0, 2.0), ('kerple_log', 2.0, 1.0)])
def test_init_follows_the_reference_ranges(name, r1_upper, r2_upper):
  enc = make(name)
  r1, r2 = map(np.asarray, enc.effective_params(enc.init(jax.random.key(1), 512)))
  for value, upper in ((r1, r1_upper), (r2, r2_upper)):
    assert np.all(value > kerple.EPS) and np.all(value < upper * (1 + 1e-6))
    # Uniform over (eps, upper): 512 draws fill both ends and centre near the middle.
    assert value.min() < 0.05 * upper and value.max() > 0.95 * upper
    assert abs(value.mean() - (kerple.EPS + upper) / 2) < 0.06 * upper


@pytest.mark.parametrize('name', ['kerple_power', 'kerple_log'])
def test_bias_at_init_is_the_kernel_of_the_effective_parameters(name):
  enc = make(name)
  params = enc.init(jax.random.key(2), 4)
  r1, r2 = map(np.asarray, enc.effective_params(params))
  d = np.abs(np.arange(-6, 7, dtype=np.float64))[:, None]
  expected = -r1 * d**r2 if name == 'kerple_power' else -r1 * np.log1p(r2 * d)
  np.testing.assert_allclose(enc.bias(params, jnp.arange(-6, 7)), expected, rtol=2e-5, atol=1e-7)


def test_power_gradient_is_finite_at_distance_zero():
  enc = make('kerple_power')
  params = enc.init(jax.random.key(0), 3)
  grad = jax.grad(lambda p: enc.bias(p, jnp.array([0, -1, -5])).sum())(params)
  for leaf in jax.tree_util.tree_leaves(grad):
    assert np.all(np.isfinite(leaf))
