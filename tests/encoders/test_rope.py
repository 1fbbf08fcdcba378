"""RoPE: the relative-only property to float32 tolerance at 10^6, every scaling rule against hand-computed
frequencies, the two layouts, exact phases, dtype handling, validation."""

from __future__ import annotations

import decimal
import math

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders
from relpos_jax.encoders import rope as rope_lib

EPS32 = float(np.finfo(np.float32).eps)
# |score(i, j) - score(i + s, j + s)| <= 4 eps32 |q| |k|; measured max 1.3e-7 |q| |k| (D = 64, s <= 10^6).
RELATIVE_TOL = 4 * EPS32

VARIANTS = {
    'none': {},
    'linear': dict(scaling='linear', factor=4.0),
    'ntk': dict(scaling='ntk', factor=4.0),
    'dynamic': dict(scaling='dynamic', factor=4.0, original_max_position=2048),
    'yarn': dict(scaling='yarn', factor=8.0, original_max_position=512),
    'llama3_8': dict(scaling='llama3', factor=8.0, original_max_position=256),
    'llama3_32': dict(scaling='llama3', factor=32.0, original_max_position=256),
}


def _params(encoder, head_dim, num_heads=1):
  return encoder.init(jax.random.PRNGKey(0), num_heads, head_dim=head_dim)


def _pair_scores(encoder, q, k, q_pos, k_pos, anchor):
  """<rotate(q, q_pos), rotate(k, k_pos)> per row; a third, zero vector at `anchor` fixes the sequence length
  (max position + 1) so dynamic NTK uses the same frequencies for every shift."""
  n, d = q.shape
  x = np.stack([q, k, np.zeros_like(q)], axis=1)[:, :, None, :]
  pos = np.stack([q_pos, k_pos, np.full(n, anchor)], axis=1).astype(np.int32)
  rotate = jax.jit(lambda enc, p, x_, pos_: enc.rotate(p, x_, pos_), static_argnums=0)
  out = np.asarray(rotate(encoder, _params(encoder, d), jnp.asarray(x), jnp.asarray(pos)), np.float64)
  return np.sum(out[:, 0, 0] * out[:, 1, 0], axis=-1)


def _shift_case(d=64, n=256, seed=0):
  rng = np.random.default_rng(seed)
  q = rng.normal(size=(n, d)).astype(np.float32)
  k = rng.normal(size=(n, d)).astype(np.float32)
  i, j = rng.integers(0, 1000, n), rng.integers(0, 1000, n)
  # The extremes, both sides of the 2^12 split a naive implementation might use, and random shifts.
  shifts = np.concatenate([[10**6, 10**6 - 1, 4096, 4095, 1, 0], rng.integers(0, 10**6 + 1, n - 6)])
  return q, k, i, j, shifts


@pytest.mark.parametrize('layout', rope_lib.LAYOUTS)
@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_scores_depend_only_on_relative_position_up_to_shift_1e6(layout, variant):
  encoder = encoders.make('rope', layout=layout, **VARIANTS[variant])
  q, k, i, j, shifts = _shift_case()
  anchor = 2_000_000  # Beyond every shifted position: one fixed length for dynamic NTK.
  base_scores = _pair_scores(encoder, q, k, i, j, anchor)
  shifted = _pair_scores(encoder, q, k, i + shifts, j + shifts, anchor)
  bound = RELATIVE_TOL * np.linalg.norm(q, axis=-1) * np.linalg.norm(k, axis=-1)
  worst = np.max(np.abs(shifted - base_scores) / bound)
  assert worst <= 1.0, f'{variant}/{layout}: relative error {worst * RELATIVE_TOL:.3g} |q||k|'


def test_naive_float32_angles_would_fail_that_tolerance():
  """The tolerance above is meaningful: p * theta rounded in float32 is off by ~0.03 rad at 10^6."""
  d = 64
  q, k, i, j, shifts = _shift_case(d)
  theta = rope_lib.inverse_frequencies(d).astype(np.float32)

  def naive_scores(pi, pj):
    def rot(x, p):
      angle = (p.astype(np.float32)[:, None] * theta).astype(np.float64)  # The float32 product.
      a, b = x[:, : d // 2], x[:, d // 2 :]
      return np.concatenate([a * np.cos(angle) - b * np.sin(angle), a * np.sin(angle) + b * np.cos(angle)], -1)

    return np.sum(rot(q, pi) * rot(k, pj), axis=-1)

  error = np.abs(naive_scores(i + shifts, j + shifts) - naive_scores(i, j))
  bound = RELATIVE_TOL * np.linalg.norm(q, axis=-1) * np.linalg.norm(k, axis=-1)
  assert np.max(error / bound) > 100


_PI = decimal.Decimal('3.14159265358979323846264338327950288419716939937510582097494459')


def _reference_angle(position: int, turns_per_position: float) -> float:
  """position * turns reduced to [-1/2, 1/2) turn, times 2 pi, in 60-digit decimal arithmetic."""
  with decimal.localcontext() as ctx:
    ctx.prec = 60
    t = decimal.Decimal(position) * decimal.Decimal(turns_per_position)
    t -= (t + decimal.Decimal('0.5')).to_integral_value(rounding=decimal.ROUND_FLOOR)
    return float(t * 2 * _PI)


def _angle_gap(a, b):
  return abs((a - b + math.pi) % (2 * math.pi) - math.pi)


@hypothesis.given(position=st.integers(-(2**31), 2**31 - 1), pair=st.integers(0, 31))
def test_rotary_angles_are_exact_over_the_int32_range(position, pair):
  theta = rope_lib.inverse_frequencies(64)
  angle = float(rope_lib.rotary_angles(jnp.asarray([position], jnp.int32), theta)[0, pair])
  with decimal.localcontext() as ctx:
    ctx.prec = 60
    turns = float(decimal.Decimal(float(theta[pair])) / (2 * _PI))
  # One float32 rounding of an angle in [-pi, pi) plus the float64 frequency (2^31 * 1e-17 turns).
  assert _angle_gap(angle, _reference_angle(position, turns)) < 5e-7
  assert -math.pi <= angle <= math.pi


@hypothesis.given(p=st.integers(-(2**30), 2**30), shift=st.integers(-(2**30), 2**30 - 1), freq=st.floats(1e-6, 6.0))
def test_traced_frequencies_give_phases_linear_in_the_position(p, shift, freq):
  """Dynamic NTK's traced frequencies: angle(p + s) = angle(p) + angle(s) mod 2 pi, to one rounding."""
  positions = jnp.asarray([p, shift, p + shift, 1], jnp.int32)
  angles = np.asarray(jax.jit(rope_lib.rotary_angles)(positions, jnp.asarray([freq], jnp.float32))[:, 0], np.float64)
  assert _angle_gap(angles[2], angles[0] + angles[1]) < 1e-6
  assert _angle_gap(angles[3], freq) < 1e-6 * max(freq, 1.0)  # The float32 frequency asked for.


# Hand-computed at D = 8, base = 10^4: theta_k = 10^4^(-2k/8) = 10^(-k) = [1, 0.1, 0.01, 0.001].
HAND_COMPUTED = [
    (dict(), None, [1.0, 0.1, 0.01, 0.001]),
    # Position Interpolation, s = 4: theta / 4.
    (dict(scaling='linear', factor=4.0), None, [0.25, 0.025, 0.0025, 0.00025]),
    # NTK, s = 4: base' = 10^4 4^(8/6), theta'_k = 10^(-k) 4^(-k/3); 4^(-1/3) = 0.6299605249474366,
    # 4^(-2/3) = 0.3968502629920499, 4^(-1) = 0.25.
    (dict(scaling='ntk', factor=4.0), None, [1.0, 0.06299605249474366, 0.003968502629920499, 0.00025]),
    # Dynamic, s = 4, L_orig = 16, L = 32: g = 4 * 32 / 16 - 3 = 5, theta'_k = 10^(-k) 5^(-k/3);
    # 5^(-1/3) = 0.5848035476425733, 5^(-2/3) = 0.3419951893353394, 5^(-1) = 0.2.
    (
        dict(scaling='dynamic', factor=4.0, original_max_position=16),
        32,
        [1.0, 0.05848035476425733, 0.003419951893353394, 0.0002],
    ),
    # Dynamic at L = L_orig and below: g = max(4 L / 16 - 3, 1) = 1, plain RoPE.
    (dict(scaling='dynamic', factor=4.0, original_max_position=16), 16, [1.0, 0.1, 0.01, 0.001]),
    (dict(scaling='dynamic', factor=4.0, original_max_position=16), 8, [1.0, 0.1, 0.01, 0.001]),
    # YaRN, s = 4, L_orig = 4096: with D = 8 and base 10^4 the correction dimension is
    # d(r) = 8 ln(4096 / (2 pi r)) / (2 ln 10^4) = log10(4096 / (2 pi r)); d(32) = 1.309 -> floor 1,
    # d(1) = 2.814 -> ceil 3. Ramp over k = 0..3: clip((k - 1) / 2, 0, 1) = [0, 0, 0.5, 1];
    # theta' = theta (1 - ramp) + theta / 4 ramp: k = 2: 0.5 * 0.01 + 0.5 * 0.0025 = 0.00625; k = 3: 0.00025.
    (dict(scaling='yarn', factor=4.0, original_max_position=4096), None, [1.0, 0.1, 0.00625, 0.00025]),
    # Llama 3, s = 8, low = 1, high = 4, L_orig = 1000: wavelengths 2 pi / theta = [6.28, 62.8, 628.3, 6283];
    # band edges L / high = 250 and L / low = 1000. k = 0, 1: below 250, kept. k = 3: above 1000, theta / 8.
    # k = 2: smooth = (1000 / 628.3185 - 1) / 3 = 0.1971831436396511,
    # theta' = 0.01 ((1 - smooth) / 8 + smooth) = 0.0029753525068469473.
    (dict(scaling='llama3', factor=8.0, original_max_position=1000), None, [1.0, 0.1, 0.0029753525068469473, 0.000125]),
    # The same with s = 32 (Llama 3.2): k = 2: 0.01 ((1 - smooth) / 32 + smooth) = 0.00222271170400912;
    # k = 3: 0.001 / 32.
    (
        dict(scaling='llama3', factor=32.0, original_max_position=1000),
        None,
        [1.0, 0.1, 0.00222271170400912, 0.00003125],
    ),
    # Band factors are configurable too: low = 2, high = 8 -> edges 125 and 500; k = 2 (628) and k = 3 are
    # above 500: theta / 8.
    (
        dict(scaling='llama3', factor=8.0, original_max_position=1000, low_freq_factor=2.0, high_freq_factor=8.0),
        None,
        [1.0, 0.1, 0.00125, 0.000125],
    ),
]


@pytest.mark.parametrize('hparams,length,expected', HAND_COMPUTED)
def test_inverse_frequencies_against_hand_computed_values(hparams, length, expected):
  got = rope_lib.inverse_frequencies(8, length, **hparams)
  np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)


def test_published_defaults_are_filled_in():
  llama = encoders.make('rope', scaling='llama3')
  assert (llama.factor, llama.low_freq_factor, llama.high_freq_factor, llama.original_max_position) == (
      8.0,
      1.0,
      4.0,
      8192,
  )
  yarn = encoders.make('rope', scaling='yarn', factor=4.0)
  assert (yarn.beta_fast, yarn.beta_slow, yarn.original_max_position) == (32.0, 1.0, 2048)
  assert yarn.attention_factor == pytest.approx(0.1 * math.log(4.0) + 1.0)
  assert encoders.make('rope').base == 10000.0
  # Equal hyperparameters, spelled or defaulted, give equal (hash-equal) encoders: no jit retrace.
  assert yarn == encoders.make('rope', scaling='yarn', factor=4.0, beta_fast=32.0)
  assert hash(yarn) == hash(encoders.make('rope', scaling='yarn', factor=4.0, beta_fast=32.0))


def _x(shape=(2, 7, 3, 16), seed=1, dtype=jnp.float32):
  # numpy draws: no XLA compilation per shape.
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape).astype(np.float32)).astype(dtype)


def test_yarn_at_factor_one_is_plain_rope():
  plain = encoders.make('rope')
  yarn = encoders.make('rope', scaling='yarn', factor=1.0, original_max_position=64)
  np.testing.assert_array_equal(yarn.inverse_frequencies(16), plain.inverse_frequencies(16))
  assert yarn.attention_factor == 1.0
  x, pos = _x(), jnp.arange(7) * 1000
  np.testing.assert_array_equal(yarn.rotate(_params(yarn, 16), x, pos), plain.rotate(_params(plain, 16), x, pos))


def test_yarn_scales_each_vector_by_the_attention_factor():
  yarn = encoders.make('rope', scaling='yarn', factor=16.0, original_max_position=64)
  m = 0.1 * math.log(16.0) + 1.0
  x, pos = _x(), jnp.arange(7) + 5
  out = yarn.rotate(_params(yarn, 16), x, pos)
  np.testing.assert_allclose(jnp.linalg.norm(out, axis=-1), m * jnp.linalg.norm(x, axis=-1), rtol=1e-6)
  # Logits q . k gain m^2 = 1/t (YaRN eq. 22).
  unscaled = yarn.rotate(_params(yarn, 16), x, pos) / m
  np.testing.assert_allclose(
      jnp.sum(out[:, 0] * out[:, 1], -1), m**2 * jnp.sum(unscaled[:, 0] * unscaled[:, 1], -1), rtol=1e-5
  )


def test_linear_interpolation_is_positions_divided_by_factor():
  plain = encoders.make('rope')
  linear = encoders.make('rope', scaling='linear', factor=4.0)
  x, pos = _x(), jnp.asarray([0, 1, 5, 77, 1000, 123457, 10**6])
  np.testing.assert_allclose(
      linear.rotate(_params(linear, 16), x, 4 * pos), plain.rotate(_params(plain, 16), x, pos), atol=2e-6
  )


def test_dynamic_ntk_below_original_length_is_plain_rope_bit_for_bit():
  plain = encoders.make('rope')
  dynamic = encoders.make('rope', scaling='dynamic', factor=4.0, original_max_position=64)
  x, pos = _x(), jnp.asarray([0, 3, 9, 20, 40, 50, 63])
  np.testing.assert_array_equal(dynamic.rotate(_params(dynamic, 16), x, pos), plain.rotate(_params(plain, 16), x, pos))


def test_dynamic_ntk_uses_each_sequences_traced_length():
  dynamic = encoders.make('rope', scaling='dynamic', factor=4.0, original_max_position=64)
  x = _x((2, 7, 3, 16))
  pos = jnp.asarray([[0, 10, 20, 30, 40, 50, 63], [0, 50, 100, 150, 200, 250, 299]])
  out = jax.jit(dynamic.rotate)(_params(dynamic, 16), x, pos)
  for row, length in ((0, 64), (1, 300)):
    theta = dynamic.inverse_frequencies(16, length)  # float64 at the known length
    expected = rope_lib.apply_rotation(x[row], rope_lib.rotary_angles(pos[row], theta), 'half')
    # The traced frequencies come from float32 log/exp (relative error ~3e-7): ~1e-4 rad at p * theta = 300.
    np.testing.assert_allclose(out[row], expected, atol=3e-4)
  assert not np.allclose(out[1], encoders.make('rope').rotate(_params(dynamic, 16), x[1], pos[1]), atol=1e-3)


def _reference_rotation(x, positions, theta, layout):
  """Float64 numpy: HF `x cos + rotate_half(x) sin` for 'half', RoFormer eq. 34 for 'interleaved'."""
  x = np.asarray(x, np.float64)
  angle = np.asarray(positions, np.float64)[..., None] * theta  # (..., L, D/2), exact enough for small p.
  cos, sin = np.cos(angle)[..., None, :], np.sin(angle)[..., None, :]
  if layout == 'half':
    cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    a, b = np.split(x, 2, axis=-1)
    return x * cos + np.concatenate([-b, a], -1) * sin
  cos, sin = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
  swapped = np.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)
  return x * cos + swapped * sin


@pytest.mark.parametrize('layout', rope_lib.LAYOUTS)
def test_rotation_matches_the_reference_formulas(layout):
  encoder = encoders.make('rope', layout=layout)
  x, pos = _x(), jnp.asarray([[0, 1, 2, 3, 50, 99, 100], [7, 8, 9, 10, 11, 12, 500]])
  out = encoder.rotate(_params(encoder, 16, 3), x, pos)
  np.testing.assert_allclose(out, _reference_rotation(x, pos, encoder.inverse_frequencies(16), layout), atol=2e-6)


def test_layouts_are_permutations_of_each_other():
  d = 16
  half, interleaved = encoders.make('rope', layout='half'), encoders.make('rope', layout='interleaved')
  # Interleaved dimension 2k holds half-layout dimension k, 2k + 1 holds k + D/2.
  perm = np.stack([np.arange(d // 2), np.arange(d // 2) + d // 2], -1).reshape(-1)
  x, pos = _x(), jnp.asarray([0, 5, 17, 4096, 99999, 10**6, 2**30 - 1])  # up to the supported maximum
  np.testing.assert_array_equal(
      interleaved.rotate(_params(interleaved, d), x[..., perm], pos), half.rotate(_params(half, d), x, pos)[..., perm]
  )
  assert not np.allclose(interleaved.rotate(_params(interleaved, d), x, pos), half.rotate(_params(half, d), x, pos))


def test_computes_in_float32_and_returns_the_input_dtype():
  encoder = encoders.make('rope', scaling='yarn', factor=4.0, original_max_position=32)
  x, pos = _x(dtype=jnp.bfloat16), jnp.arange(7) * 997
  out = encoder.rotate(_params(encoder, 16), x, pos)
  assert out.dtype == jnp.bfloat16
  expected = encoder.rotate(_params(encoder, 16), x.astype(jnp.float32), pos).astype(jnp.bfloat16)
  np.testing.assert_array_equal(out.astype(jnp.float32), expected.astype(jnp.float32))


def test_rotation_preserves_norms_and_passes_gradients():
  encoder = encoders.make('rope', scaling='llama3', factor=32.0, original_max_position=64)
  x, pos = _x(), jnp.arange(7) * 31337
  params = _params(encoder, 16)
  out = encoder.rotate(params, x, pos)
  np.testing.assert_allclose(jnp.linalg.norm(out, axis=-1), jnp.linalg.norm(x, axis=-1), rtol=1e-6)
  grad = jax.grad(lambda x_: jnp.sum(encoder.rotate(params, x_, pos) ** 2))(x)
  np.testing.assert_allclose(grad, 2 * x, rtol=1e-5, atol=1e-6)  # An isometry: d|Rx|^2/dx = 2x.


def test_jit_with_the_encoder_static():
  apply = jax.jit(lambda enc, p, x_, pos_: enc.rotate_queries(p, x_, pos_), static_argnums=0)
  for variant in VARIANTS.values():
    encoder = encoders.make('rope', **variant)
    x, pos = _x(), jnp.arange(7) + 3
    np.testing.assert_allclose(
        apply(encoder, _params(encoder, 16), x, pos), encoder.rotate(_params(encoder, 16), x, pos), atol=1e-6
    )


def test_bad_inputs_raise_clear_errors():
  encoder = encoders.make('rope')
  params = _params(encoder, 16)
  with pytest.raises(ValueError, match='head_dim=15'):
    encoder.rotate(encoder.init(jax.random.PRNGKey(0), 3), _x((2, 7, 3, 15)), jnp.arange(7))
  with pytest.raises(ValueError, match='head_dim=7'):
    encoder.init(jax.random.PRNGKey(0), 3, head_dim=7)
  with pytest.raises(ValueError, match='float32'):
    encoder.rotate(params, _x(), jnp.arange(7, dtype=jnp.float32))
  with pytest.raises(ValueError, match=r'\(6,\)'):
    encoder.rotate(params, _x(), jnp.arange(6))
  with pytest.raises(ValueError, match='head_dim=8'):
    encoder.rotate(params, _x((2, 7, 3, 8)), jnp.arange(7))
  with pytest.raises(ValueError, match='length=None'):
    encoders.make('rope', scaling='dynamic', factor=2.0).inverse_frequencies(16)
  with pytest.raises(ValueError, match='length=32'):
    encoders.make('rope').inverse_frequencies(16, 32)
  with pytest.raises(ValueError, match='head_dim=2'):
    encoders.make('rope', scaling='ntk', factor=2.0).inverse_frequencies(2)


@pytest.mark.parametrize(
    'hparams,named',
    [
        (dict(base=1.0), 'base=1.0'),
        (dict(base=float('nan')), 'base=nan'),
        (dict(base=True), 'base=True'),
        (dict(layout='neox'), "layout='neox'"),
        (dict(scaling='longrope'), "scaling='longrope'"),
        (dict(factor=4.0), 'factor=4.0'),  # No scaling rule uses it: would silently do nothing.
        (dict(scaling='linear'), 'factor=None'),
        (dict(scaling='linear', factor=0.5), 'factor=0.5'),
        (dict(scaling='ntk', factor=-2.0), 'factor=-2.0'),
        (dict(scaling='dynamic', factor=2.0, original_max_position=0), 'original_max_position=0'),
        (dict(scaling='dynamic', factor=2.0, original_max_position=2.5), 'original_max_position=2.5'),
        (dict(scaling='yarn', factor=2.0, beta_fast=1.0, beta_slow=2.0), 'beta_fast=1.0'),
        (dict(scaling='yarn', factor=2.0, beta_slow=0.0), 'beta_slow=0.0'),
        (dict(scaling='yarn', factor=2.0, attention_factor=0.0), 'attention_factor=0.0'),
        (dict(scaling='linear', factor=2.0, beta_fast=32.0), 'beta_fast=32.0'),
        (dict(scaling='llama3', low_freq_factor=4.0, high_freq_factor=1.0), 'high_freq_factor=1.0'),
        (dict(scaling='llama3', low_freq_factor=0.0), 'low_freq_factor=0.0'),
        (dict(scaling='llama3', factor=0.9), 'factor=0.9'),
    ],
)
def test_invalid_hyperparameters_name_the_value(hparams, named):
  with pytest.raises(ValueError, match=named.replace('(', r'\(').replace(')', r'\)')):
    encoders.make('rope', **hparams)


def test_registered_and_rotary():
  encoder = encoders.make('rope', scaling='yarn', factor=4.0)
  assert 'rope' in encoders.names()
  assert encoder.kind is encoders.Kind.ROTARY
  assert encoder.is_relative and encoder.carries_position
