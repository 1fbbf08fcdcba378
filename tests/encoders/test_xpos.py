"""xPos: torchscale's formula, scores that depend on n - m only and decay with it, queries and keys scaled
inversely, the centring, validation."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders
from relpos_jax.encoders import xpos as xpos_lib


def _x(shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def _params(encoder, head_dim):
  return encoder.init(jax.random.PRNGKey(0), 1, head_dim=head_dim)


@functools.partial(jax.jit, static_argnums=0)
def _queries_and_keys(encoder, params, x, positions, center=None):
  """Both rotations in one compiled call (eager mode would compile every primitive per shape)."""
  return (
      encoder.rotate_queries(params, x, positions, center=center),
      encoder.rotate_keys(params, x, positions, center=center),
  )


def _torchscale(x, downscale, gamma=0.4, scale_base=512):
  """microsoft/torchscale XPOS.forward(x, offset=0, downscale) in float64 numpy, x (L, D)."""
  length, d = x.shape
  min_pos = -length // 2  # Python: (-length) // 2 = -ceil(length / 2).
  scale_vec = (np.arange(0, d, 2) + gamma * d) / ((1 + gamma) * d)
  scale = scale_vec ** (np.arange(min_pos, length + min_pos)[:, None] / scale_base)
  inv_freq = 1.0 / 10000 ** (np.arange(0, d // 2) / (d // 2))
  angle = np.arange(length)[:, None] * inv_freq
  sin, cos = np.sin(angle), np.cos(angle)
  if downscale:
    scale = 1 / scale
  sin, cos = np.repeat(sin * scale, 2, -1), np.repeat(cos * scale, 2, -1)
  every_two = np.stack([-x[:, 1::2], x[:, 0::2]], -1).reshape(x.shape)
  return x * cos + every_two * sin


@pytest.mark.parametrize('length', [9, 10, 700])
def test_matches_torchscale(length):
  encoder = encoders.make('xpos')
  x = _x((length, 1, 16))
  params = _params(encoder, 16)
  rq, rk = _queries_and_keys(encoder, params, x, jnp.arange(length))
  np.testing.assert_allclose(
      rq[:, 0], _torchscale(np.asarray(x[:, 0], np.float64), downscale=False), rtol=1e-5, atol=1e-6
  )
  np.testing.assert_allclose(
      rk[:, 0], _torchscale(np.asarray(x[:, 0], np.float64), downscale=True), rtol=1e-5, atol=1e-6
  )


def _scores(encoder, q, k, q_pos, k_pos, anchor):
  """Row-wise <rotate_queries(q, n), rotate_keys(k, m)>, position arrays ending at `anchor` (same centre)."""
  n, d = q.shape
  params = _params(encoder, d)
  positions = jnp.asarray(np.stack([q_pos, k_pos, np.full(n, anchor)], 1), jnp.int32)
  zeros = np.zeros_like(q)
  x = jnp.asarray(np.stack([q, k, zeros], 1))[:, :, None]  # q at slot 0, k at slot 1.
  if encoder.name == 'rope':
    rq = rk = jax.jit(encoder.rotate)(params, x, positions)
  else:
    rq, rk = _queries_and_keys(encoder, params, x, positions)
  return np.sum(np.asarray(rq, np.float64)[:, 0, 0] * np.asarray(rk, np.float64)[:, 1, 0], -1)


def test_scores_depend_only_on_the_distance():
  encoder = encoders.make('xpos')
  rng = np.random.default_rng(1)
  n, d = 256, 32
  q, k = rng.normal(size=(n, d)).astype(np.float32), rng.normal(size=(n, d)).astype(np.float32)
  i = rng.integers(0, 1000, n)
  j = i - rng.integers(0, 1000, n)  # Causal: keys at or before the query (negative positions are fine).
  shifts = np.concatenate([[0, 1, 30_000, 4096], rng.integers(0, 30_001, n - 4)])
  anchor = 62_000  # Centre 31_001: every centred offset within ~32,000 (the float32 range is ~35,600).
  base_scores = _scores(encoder, q, k, i, j, anchor)
  shifted = _scores(encoder, q, k, i + shifts, j + shifts, anchor)
  # Each of q and k carries zeta^(+-offset / B) with |offset| up to 32,000 (exp of up to ~78), each rounded
  # in float32 with a relative error up to ~|exponent| eps; measured max 8e-7 |q||k| (8e-8 near the centre).
  magnitude = np.linalg.norm(q, axis=-1) * np.linalg.norm(k, axis=-1)
  np.testing.assert_array_less(np.abs(shifted - base_scores), 4e-6 * magnitude)
  assert np.all(np.isfinite(shifted))


@pytest.mark.parametrize('pair', [0, 3, 7])
def test_each_pair_is_rope_times_its_decay(pair):
  """Pair k alone: xpos score = zeta_k^((n - m) / B) x RoPE score, decreasing with n - m >= 0."""
  d = 16
  xpos, rope = encoders.make('xpos'), encoders.make('rope', layout='interleaved')
  rng = np.random.default_rng(pair)
  q, k = np.zeros((1, d), np.float32), np.zeros((1, d), np.float32)
  q[0, 2 * pair : 2 * pair + 2], k[0, 2 * pair : 2 * pair + 2] = rng.normal(size=2), rng.normal(size=2)
  zeta = xpos_lib.zeta(d, 0.4)[pair]
  assert 0 < zeta < 1
  n = 3000
  distances = np.array([0, 1, 10, 100, 1000, 2999])
  factors = []
  for delta in distances:
    xp = _scores(xpos, q, k, np.array([n]), np.array([n - delta]), n)[0]
    rp = _scores(rope, q, k, np.array([n]), np.array([n - delta]), n)[0]
    np.testing.assert_allclose(xp, zeta ** (delta / 512) * rp, rtol=2e-5, atol=1e-7)
    factors.append(zeta ** (delta / 512))
  assert np.all(np.diff(factors) < 0)  # Decays with the distance.


def test_queries_and_keys_are_scaled_inversely():
  encoder = encoders.make('xpos')
  d, length = 16, 50
  x = _x((length, 1, d))
  params = _params(encoder, d)
  pos = jnp.arange(length) * 7
  pair_norm = lambda v: np.linalg.norm(np.asarray(v, np.float64).reshape(length, d // 2, 2), axis=-1)
  rq, rk = _queries_and_keys(encoder, params, x, pos)
  q_norm, k_norm, x_norm = pair_norm(rq), pair_norm(rk), pair_norm(x)
  center = (int(pos[-1]) + 2) // 2  # torchscale: ceil(N / 2), N = last position + 1.
  expected_q = xpos_lib.zeta(d, 0.4)[None] ** ((np.asarray(pos)[:, None] - center) / 512)
  np.testing.assert_allclose(q_norm, x_norm * expected_q, rtol=1e-5)
  np.testing.assert_allclose(k_norm, x_norm / expected_q, rtol=1e-5)
  np.testing.assert_allclose(q_norm * k_norm, x_norm**2, rtol=1e-5)
  assert not np.allclose(q_norm, k_norm, rtol=1e-3)


def test_cached_decoding_and_explicit_centre():
  """A query at the last position alone gets the same centre as the full key array; a fixed-size cache
  (keys beyond the query) needs `center` passed to both."""
  encoder = encoders.make('xpos')
  d, length = 16, 40
  q, k = _x((length, 1, d), 1), _x((length, 1, d), 2)
  params = _params(encoder, d)
  pos = jnp.arange(length)
  full_q, full_k = _queries_and_keys(encoder, params, q, pos)
  one_q, _ = _queries_and_keys(encoder, params, q[-1:], pos[-1:])
  np.testing.assert_allclose(one_q, full_q[-1:], rtol=1e-6)
  _, k_only = _queries_and_keys(encoder, params, k, pos)
  cache_pos = jnp.arange(64)  # A cache of 64 slots, filled up to position 39.
  centre = (length - 1 + 2) // 2
  cache_k = jnp.concatenate([k, jnp.zeros((64 - length, 1, d))], 0)
  _, cached = _queries_and_keys(encoder, params, cache_k, cache_pos, centre)
  np.testing.assert_allclose(cached[:length], k_only, rtol=1e-6)
  _, uncentred = _queries_and_keys(encoder, params, cache_k, cache_pos)
  assert not np.allclose(uncentred[:length], k_only, rtol=1e-3)  # Without it the centre is 32, not 20.
  del full_k


def test_rotate_is_ambiguous_and_raises():
  encoder = encoders.make('xpos')
  with pytest.raises(ValueError, match='rotate_queries or rotate_keys'):
    encoder.rotate(_params(encoder, 8), _x((4, 1, 8)), jnp.arange(4))


def test_contract_dtype_and_jit():
  encoder = encoders.make('xpos')
  assert encoder.kind is encoders.Kind.ROTARY and encoder.requires_causal and 'xpos' in encoders.names()
  x = _x((2, 6, 3, 8)).astype(jnp.bfloat16)
  params = encoder.init(jax.random.PRNGKey(0), 3, head_dim=8)
  pos = jnp.arange(6)
  _, out = _queries_and_keys(encoder, params, x, pos)
  assert out.dtype == jnp.bfloat16
  _, out32 = _queries_and_keys(encoder, params, x.astype(jnp.float32), pos)
  np.testing.assert_array_equal(out.astype(jnp.float32), out32.astype(jnp.bfloat16).astype(jnp.float32))
  grad = jax.jit(jax.grad(lambda x_: jnp.sum(encoder.rotate_queries(params, x_, pos))))(x.astype(jnp.float32))
  assert np.all(np.isfinite(grad)) and np.any(grad != 0)


@pytest.mark.parametrize(
    'hparams,named',
    [
        (dict(gamma=0.0), 'gamma=0.0'),
        (dict(gamma=-1.0), 'gamma=-1.0'),
        (dict(scale_base=0), 'scale_base=0'),
        (dict(base=0.5), 'base=0.5'),
        (dict(layout='rotate_half'), "layout='rotate_half'"),
    ],
)
def test_invalid_hyperparameters_name_the_value(hparams, named):
  with pytest.raises(ValueError, match=named):
    encoders.make('xpos', **hparams)


def test_odd_head_dim_raises():
  encoder = encoders.make('xpos')
  with pytest.raises(ValueError, match='head_dim=7'):
    encoder.init(jax.random.PRNGKey(0), 1, head_dim=7)
  with pytest.raises(ValueError, match='head_dim=7'):
    encoder.rotate_queries(encoder.init(jax.random.PRNGKey(0), 1), _x((4, 1, 7)), jnp.arange(4))


def test_same_rotation_as_rope():
  """Dividing the decay back out leaves RoPE's rotation (interleaved layout, base 10000)."""
  d, length = 16, 30
  xpos, rope = encoders.make('xpos'), encoders.make('rope', layout='interleaved')
  x, pos = _x((length, 1, d), 3), jnp.arange(length) * 13
  center = (int(pos[-1]) + 2) // 2
  decay = xpos_lib.zeta(d, 0.4) ** ((np.asarray(pos)[:, None] - center) / 512)
  undone = np.asarray(_queries_and_keys(xpos, _params(xpos, d), x, pos)[0], np.float64)
  undone = undone.reshape(length, 1, d // 2, 2)
  undone = (undone / decay[:, None, :, None]).reshape(length, 1, d)
  np.testing.assert_allclose(undone, jax.jit(rope.rotate)(_params(rope, d), x, pos), atol=2e-6)
