"""PoPE against a NumPy transcription of x-transformers' `apply_polar_pos_emb` with the learned key phase."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders

H, D, L = 2, 8, 12


def _np_polar(x, positions, bias=0.0):
  inv_freq = 1.0 / (10000.0 ** (np.arange(D) / D))
  freqs = positions[:, None, None] * inv_freq + bias  # (L, 1 | H, D)
  magnitude = np.log1p(np.exp(x))
  return np.concatenate([magnitude * np.cos(freqs), magnitude * np.sin(freqs)], axis=-1)


def test_queries_and_keys_match_the_reference_transcription():
  rng = np.random.default_rng(0)
  q, k = rng.normal(size=(L, H, D)), rng.normal(size=(L, H, D))
  encoder = encoders.make('pope')
  params = encoder.init(jax.random.PRNGKey(0), H, head_dim=D)
  bias = -rng.uniform(0, 2 * math.pi, size=(H, D))
  params = dict(params, phase_bias=jnp.asarray(bias, jnp.float32))
  pos = np.arange(L) * 5
  got_q = np.asarray(encoder.rotate_queries(params, jnp.asarray(q, jnp.float32), jnp.asarray(pos)))
  got_k = np.asarray(encoder.rotate_keys(params, jnp.asarray(k, jnp.float32), jnp.asarray(pos)))
  np.testing.assert_allclose(got_q, math.sqrt(2) * _np_polar(q, pos), atol=2e-5)
  np.testing.assert_allclose(got_k, _np_polar(k, pos, bias), atol=2e-5)
  # Scores: sum_c softplus(q) softplus(k) cos((i - j) theta_c - delta): relative.
  scores = np.einsum('ihd,jhd->hij', got_q, got_k) / math.sqrt(2)
  inv_freq = 1.0 / (10000.0 ** (np.arange(D) / D))
  sq, sk = np.log1p(np.exp(q)), np.log1p(np.exp(k))
  phase = (pos[:, None, None, None] - pos[None, :, None, None]) * inv_freq - bias[None, None]
  want = np.einsum('ihd,jhd,ijhd->hij', sq, sk, np.cos(phase))
  np.testing.assert_allclose(scores, want, atol=1e-4)


def test_phase_bias_is_clamped_to_minus_two_pi_zero():
  encoder = encoders.make('pope')
  params = encoder.init(jax.random.PRNGKey(0), H, head_dim=D)
  x = jnp.ones((L, H, D))
  pos = jnp.arange(L)
  low = encoder.rotate_keys(dict(params, phase_bias=jnp.full((H, D), -100.0)), x, pos)
  at = encoder.rotate_keys(dict(params, phase_bias=jnp.full((H, D), -2 * math.pi)), x, pos)
  np.testing.assert_allclose(low, at, atol=1e-6)


@pytest.mark.parametrize('base', [1.0, 0, True, 'x'])
def test_bad_base(base):
  with pytest.raises(ValueError, match='base'):
    encoders.make('pope', base=base)
