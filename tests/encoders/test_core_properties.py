"""Hypothesis properties of every registered Toeplitz scalar-bias encoder (found by iterating the registry).

An encoder another engineer registers later is covered automatically. Everything runs under jax.jit with the
encoder static: in eager mode every primitive compiles anew for every random shape, which costs seconds
per example, while one jit per example costs about a tenth of a second.
"""

from __future__ import annotations

import functools

import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax import encoders
from relpos_jax.encoders import Kind

MAX_LEN = 40
# Each example of a shape-varying property compiles anew for every encoder (0.1 to 0.3 s of CPU); a fifth
# of the profile's examples (5 by default, 100 under HYPOTHESIS_PROFILE=thorough) keeps the file fast.
SHAPE_EXAMPLES = hypothesis.settings(max_examples=max(5, hypothesis.settings.default.max_examples // 5))


def default_instance(name: str) -> encoders.Encoder:
  return encoders.registry.make_default(name)


TOEPLITZ_BIASES = [
    n for n in encoders.names() if default_instance(n).kind is Kind.SCALAR_BIAS and default_instance(n).is_toeplitz
]


@functools.lru_cache(maxsize=None)
def init_params(encoder, num_heads: int):
  return encoder.init(jax.random.key(num_heads), num_heads, head_dim=8, model_dim=16)


@functools.lru_cache(maxsize=None)
def jitted_matrices(encoder):
  """(bias_matrix at q_offset, bias_matrix of all q_offset + q_len queries), shapes static."""

  def matrices(params, q_len, k_len, q_offset):
    return (
        relpos_jax.bias_matrix(encoder, params, q_len, k_len, q_offset),
        relpos_jax.bias_matrix(encoder, params, q_offset + q_len, k_len),
    )

  return jax.jit(matrices, static_argnums=(1, 2, 3))


@functools.lru_cache(maxsize=None)
def jitted_bias(encoder):
  return jax.jit(encoder.bias)


# Relative positions any drawn (q_len, k_len, q_offset) can reach: -(2 * MAX_LEN - 1) .. MAX_LEN - 1.
REFERENCE_REL = np.arange(-2 * MAX_LEN, MAX_LEN, dtype=np.int32)


@functools.lru_cache(maxsize=None)
def reference_values(encoder, num_heads: int) -> np.ndarray:
  """The encoder at every REFERENCE_REL, in one call: what each bias_matrix entry must equal."""
  return np.asarray(jitted_bias(encoder)(init_params(encoder, num_heads), jnp.asarray(REFERENCE_REL)))


def test_the_core_encoders_are_covered():
  for name in ('distance', 'shaw', 't5', 'piecewise', 'multiscale'):
    assert name in TOEPLITZ_BIASES
  assert 'absolute_score' not in TOEPLITZ_BIASES  # Not Toeplitz: its own tests.


@pytest.mark.parametrize('name', TOEPLITZ_BIASES)
@SHAPE_EXAMPLES
@hypothesis.given(
    num_heads=st.integers(1, 8),
    q_len=st.integers(1, MAX_LEN),
    k_len=st.integers(1, MAX_LEN),
    q_offset=st.integers(0, MAX_LEN),
)
def test_bias_matrix_is_toeplitz_and_offset_rows_are_the_full_matrix_rows(name, num_heads, q_len, k_len, q_offset):
  enc = default_instance(name)
  params = init_params(enc, num_heads)
  out, full = map(np.asarray, jitted_matrices(enc)(params, q_len, k_len, q_offset))
  assert out.shape == (num_heads, q_len, k_len) and out.dtype == np.float32
  assert full.shape == (num_heads, q_offset + q_len, k_len)
  checks.assert_toeplitz(out)
  checks.assert_toeplitz(full)
  # Cached decoding: queries at q_offset.. read the last rows of the full matrix.
  # atol 1e-5: a learned function of the offset (the `mlp` encoder) sums terms of order 1 into values near 0, and XLA
  # may fuse or reorder it differently per batch shape (measured 1.4e-6 at a value of 0.036 with the optimized
  # compile of the slow set, 2026-12-05); a wrong offset moves an entry by far more.
  np.testing.assert_allclose(out, full[:, q_offset:], rtol=1e-6, atol=1e-5)
  # And entry (h, i, j) is the encoder's own value at j - (i + q_offset).
  rel = np.arange(k_len)[None, :] - (np.arange(q_len)[:, None] + q_offset)
  expected = reference_values(enc, num_heads)[rel - REFERENCE_REL[0]]  # (q_len, k_len, H)
  np.testing.assert_allclose(out, np.moveaxis(expected, -1, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('name', TOEPLITZ_BIASES)
def test_is_toeplitz_is_honest_pair_bias_agrees_with_bias_matrix(name):
  # bias_matrix trusts is_toeplitz and gathers; pair_bias on the position grid must give the same.
  enc = default_instance(name)
  params = init_params(enc, 3)
  gathered = jax.jit(relpos_jax.bias_matrix, static_argnums=(0, 2, 3))(enc, params, 9, 13, 5)
  grid = jax.jit(relpos_jax.bias_at_positions, static_argnums=0)(enc, params, jnp.arange(9) + 5, jnp.arange(13))
  checks.assert_toeplitz(grid)
  np.testing.assert_allclose(gathered, grid, rtol=1e-5, atol=1e-6)


FAR = np.array([-(10**6), -999_999, -65_537, -4097, -1000, 1000, 4097, 65_537, 999_999, 10**6], np.int32)


@pytest.mark.parametrize('name', TOEPLITZ_BIASES)
def test_far_distances_give_finite_values(name):
  enc = default_instance(name)
  values = np.asarray(jitted_bias(enc)(init_params(enc, 4), jnp.asarray(FAR)))
  assert values.shape == FAR.shape + (4,)
  bad = ~np.isfinite(values).all(-1)
  assert not bad.any(), f'{name}: non-finite bias at rel={FAR[bad]}'


@pytest.mark.parametrize('name', TOEPLITZ_BIASES)
@SHAPE_EXAMPLES
@hypothesis.given(
    num_heads=st.integers(1, 8),
    rel=hnp.arrays(
        np.int32,
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
        elements=st.one_of(st.integers(int(REFERENCE_REL[0]), int(REFERENCE_REL[-1])), st.integers(-(10**6), 10**6)),
    ),
)
def test_bias_of_any_rank_is_elementwise_and_finite(name, num_heads, rel):
  enc = default_instance(name)
  values = np.asarray(jitted_bias(enc)(init_params(enc, num_heads), jnp.asarray(rel)))
  assert values.shape == rel.shape + (num_heads,)
  assert values.dtype == np.float32
  assert np.isfinite(values).all(), f'{name}: non-finite bias among rel={rel}'
  # Element-wise: each entry is the encoder's value at that relative position alone.
  near = (rel >= REFERENCE_REL[0]) & (rel <= REFERENCE_REL[-1])
  expected = reference_values(enc, num_heads)[rel[near] - REFERENCE_REL[0]]
  np.testing.assert_allclose(values[near], expected, rtol=1e-5, atol=1e-6)
