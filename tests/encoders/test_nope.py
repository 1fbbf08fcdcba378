"""NoPE: zeros of the right shape, nothing learnable, and no position information."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax.encoders import make


@pytest.mark.parametrize('num_heads', [1, 3, 8])
def test_zero_bias_of_the_right_shape(num_heads):
  enc = make('nope')
  params = enc.init(jax.random.key(0), num_heads)
  bias = enc.bias(params, jnp.arange(-5, 5).reshape(2, 5))
  assert bias.shape == (2, 5, num_heads) and bias.dtype == jnp.float32
  np.testing.assert_array_equal(bias, 0)
  np.testing.assert_array_equal(relpos_jax.bias_matrix(enc, params, 4, 7), np.zeros((num_heads, 4, 7)))


def test_nothing_learnable_and_no_position():
  enc = make('nope')
  assert jax.tree_util.tree_leaves(enc.init(jax.random.key(0), 4)) == []
  assert enc.carries_position is False
  assert make('alibi').carries_position is True
