"""RoPE's options against direct NumPy transcriptions of their references.

partial_rotary_factor (HF `_compute_default_rope_parameters` + `apply_rotary_pos_emb` with a pass-through
tail, GPT-NeoX `rotary_pct`), p-RoPE (Barbero et al. 2024: infinite timescales past floor(p D / 2)), Resonance
RoPE (rounded wavelengths), the YaRN extras (HF `_compute_yarn_parameters`: truncate, mscale, mscale_all_dim;
YaRN reference: attn_factor; dynamic YaRN), LongRoPE (HF `_compute_longrope_parameters`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders

D = 16


def _np_rotate(x, positions, inv_freq, scale=1.0):
  """HF rotate_half layout over the first 2 len(inv_freq) dims, the rest passed through (float64)."""
  rot = 2 * len(inv_freq)
  freqs = positions[:, None].astype(np.float64) * inv_freq[None, :]
  emb = np.concatenate([freqs, freqs], axis=-1)
  cos, sin = np.cos(emb)[:, None, :] * scale, np.sin(emb)[:, None, :] * scale
  xr, xp = x[..., :rot], x[..., rot:]
  half = np.concatenate([-xr[..., rot // 2 :], xr[..., : rot // 2]], axis=-1)
  return np.concatenate([xr * cos + half * sin, xp], axis=-1)


def _rotate(encoder, x, positions):
  params = encoder.init(jax.random.PRNGKey(0), x.shape[-2], head_dim=x.shape[-1])
  return np.asarray(encoder.rotate(params, jnp.asarray(x, jnp.float32), jnp.asarray(positions, jnp.int32)))


def _case(length=40, heads=2, seed=0):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(length, heads, D)), np.arange(length) * 7 + 3


def _hf_default(dim, base=10000.0):
  return 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))


def _hf_yarn(
    dim,
    base,
    factor,
    original,
    beta_fast=32.0,
    beta_slow=1.0,
    truncate=True,
    mscale=None,
    mscale_all_dim=None,
    attn_factor=1.0,
):
  def get_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

  if mscale and mscale_all_dim:
    attention = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
  else:
    attention = get_mscale(factor)

  def correction_dim(rot):
    return (dim * math.log(original / (rot * 2 * math.pi))) / (2 * math.log(base))

  low, high = correction_dim(beta_fast), correction_dim(beta_slow)
  if truncate:
    low, high = math.floor(low), math.ceil(high)
  low, high = max(low, 0), min(high, dim - 1)
  if low == high:
    high += 0.001
  ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
  pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
  extrapolation = 1 - ramp
  inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
  return inv, attention * attn_factor


@pytest.mark.parametrize('f', [0.5, 0.25, 0.75])
def test_partial_rotary_factor_rotates_the_leading_dims_with_hf_frequencies(f):
  x, pos = _case()
  got = _rotate(encoders.make('rope', partial_rotary_factor=f), x, pos)
  dim = int(D * f)
  np.testing.assert_allclose(got, _np_rotate(x, pos, _hf_default(dim)), atol=2e-5)
  np.testing.assert_array_equal(got[..., dim:], x[..., dim:].astype(np.float32))


@pytest.mark.parametrize('p', [0.75, 0.5, 0.125])
def test_p_rope_keeps_the_highest_frequencies_and_frees_the_rest(p):
  x, pos = _case()
  rope_angles = int(p * D // 2)  # Barbero et al.'s reference: timescales past this are infinite.
  timescale = np.concatenate([10000.0 ** (2 * np.arange(rope_angles) / D), np.full(D // 2 - rope_angles, np.inf)])
  got = _rotate(encoders.make('rope', frequency_fraction=p), x, pos)
  np.testing.assert_allclose(got, _np_rotate(x, pos, 1.0 / timescale), atol=2e-5)
  # Not the partial factor: those re-spread the spectrum over fewer dims.
  partial = _rotate(encoders.make('rope', partial_rotary_factor=p), x, pos)
  assert np.max(np.abs(got - partial)) > 1e-2


def test_resonance_rounds_every_wavelength_to_an_integer():
  x, pos = _case()
  inv = _hf_default(D)
  r_inv = 2 * math.pi / np.round(2 * math.pi / inv)
  encoder = encoders.make('rope', resonance=True)
  np.testing.assert_allclose(_rotate(encoder, x, pos), _np_rotate(x, pos, r_inv), atol=2e-5)
  wavelengths = 2 * np.pi / encoder.inverse_frequencies(D)
  np.testing.assert_allclose(wavelengths, np.round(wavelengths), rtol=1e-12)


@pytest.mark.parametrize(
    'kw',
    [
        dict(truncate=False),
        dict(mscale=0.707, mscale_all_dim=0.707),
        dict(mscale=1.0, mscale_all_dim=0.5, attn_factor=0.9),
        dict(attn_factor=1.2, truncate=False, beta_fast=16.0, beta_slow=2.0),
    ],
)
def test_yarn_extras_match_the_hf_transcription(kw):
  x, pos = _case()
  encoder = encoders.make('rope', scaling='yarn', factor=8.0, original_max_position=64, **kw)
  inv, attention = _hf_yarn(D, 10000.0, 8.0, 64, **kw)
  np.testing.assert_allclose(encoder.inverse_frequencies(D), inv, rtol=1e-12)
  assert encoder.attention_factor == pytest.approx(attention, rel=1e-12)
  np.testing.assert_allclose(_rotate(encoder, x, pos), _np_rotate(x, pos, inv, attention), atol=3e-5)


def test_yarn_truncate_false_differs_from_the_rounded_range():
  rounded = encoders.make('rope', scaling='yarn', factor=8.0, original_max_position=64)
  exact = encoders.make('rope', scaling='yarn', factor=8.0, original_max_position=64, truncate=False)
  assert np.max(np.abs(rounded.inverse_frequencies(D) - exact.inverse_frequencies(D))) > 1e-4


def test_dynamic_yarn_is_yarn_at_the_current_length_and_rope_below_it():
  x, _ = _case(length=50)
  encoder = encoders.make('rope', scaling='yarn', dynamic=True, original_max_position=20)
  pos = np.arange(50)  # L = 50: s = 2.5
  inv, attention = _hf_yarn(D, 10000.0, 2.5, 20)
  np.testing.assert_allclose(_rotate(encoder, x, pos), _np_rotate(x, pos, inv, attention), atol=3e-5)
  np.testing.assert_allclose(encoder.inverse_frequencies(D, 50), inv, rtol=1e-12)
  short = np.arange(20)  # L = 20 <= L_orig: plain RoPE, scale 1.
  np.testing.assert_allclose(_rotate(encoder, x[:20], short), _rotate(encoders.make('rope'), x[:20], short), atol=0)


@pytest.mark.parametrize('length', [30, 100])
def test_longrope_switches_factors_at_the_original_length(length):
  original, factor = 64, 4.0
  rng = np.random.default_rng(1)
  short = tuple(float(v) for v in 1.0 + 0.1 * rng.random(D // 2))
  long = tuple(float(v) for v in 1.0 + 5.0 * rng.random(D // 2))
  encoder = encoders.make(
      'rope', scaling='longrope', factor=factor, original_max_position=original, short_factor=short, long_factor=long
  )
  x, _ = _case(length=length)
  pos = np.arange(length)
  ext = np.asarray(long if length > original else short)
  inv = 1.0 / (ext * 10000.0 ** (np.arange(0, D, 2) / D))
  attention = math.sqrt(1 + math.log(factor) / math.log(original))
  np.testing.assert_allclose(_rotate(encoder, x, pos), _np_rotate(x, pos, inv, attention), atol=3e-5)


def test_longrope_defaults_make_factor_alone_valid():
  encoder = encoders.make('rope', scaling='longrope', factor=4.0)
  assert encoder.original_max_position == 4096
  assert encoder.attention_factor == pytest.approx(math.sqrt(1 + math.log(4.0) / math.log(4096)))
  np.testing.assert_allclose(encoder.inverse_frequencies(D, 100), _hf_default(D))  # Short: ones.
  long = encoder.inverse_frequencies(D, 5000)
  np.testing.assert_allclose(long[0], 1.0)  # The highest frequency is kept ...
  np.testing.assert_allclose(long[-1], _hf_default(D)[-1] / 4.0)  # ... the lowest divided by s.
  assert encoders.from_spec(encoders.to_spec(encoder)) == encoder


@pytest.mark.parametrize(
    'kw,field',
    [
        (dict(partial_rotary_factor=0.0), 'partial_rotary_factor'),
        (dict(partial_rotary_factor=1.5), 'partial_rotary_factor'),
        (dict(frequency_fraction=0.0), 'frequency_fraction'),
        (dict(resonance=1), 'resonance'),
        (dict(scaling='dynamic', factor=2.0, resonance=True), 'resonance'),
        (dict(truncate=False), 'truncate'),
        (dict(scaling='yarn', factor=4.0, mscale=0.7), 'mscale'),
        (dict(scaling='yarn', factor=4.0, truncate='no'), 'truncate'),
        (dict(scaling='yarn', factor=4.0, dynamic=True), 'factor'),
        (dict(scaling='yarn', factor=4.0, attn_factor=0.0), 'attn_factor'),
        (dict(scaling='longrope'), 'factor'),
        (dict(scaling='longrope', factor=4.0, short_factor=(1.0, -1.0)), 'short_factor'),
        (dict(scaling='linear', factor=2.0, long_factor=(1.0,)), 'long_factor'),
    ],
)
def test_bad_options_name_the_field(kw, field):
  with pytest.raises(ValueError, match=field):
    encoders.make('rope', **kw)


@pytest.mark.parametrize(
    'kw,field',
    [
        (dict(partial_rotary_factor=0.1), 'partial_rotary_factor'),  # int(16 * 0.1) = 1 rotated dim
        (dict(frequency_fraction=0.1), 'frequency_fraction'),  # floor(0.8) = 0 frequencies kept
        (dict(scaling='longrope', factor=4.0, long_factor=(2.0,) * 3), 'long_factor'),
    ],
)
def test_options_that_do_not_fit_the_head_dim_fail_at_init(kw, field):
  with pytest.raises(ValueError, match=field):
    encoders.make('rope', **kw).init(jax.random.PRNGKey(0), 2, head_dim=D)
