"""The layer's input boundary: a sliding window in a bidirectional layer is symmetric, and empty inputs or a cache
built for another layer are clear errors at the entry, not JAX's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.nn import RelativeMultiHeadAttention

DIM, HEADS, L = 16, 2, 8


def _layer(causal, window=None, heads=HEADS, dim=DIM):
  return RelativeMultiHeadAttention(heads, dim, encoders.make('alibi'), causal=causal, window=window, rngs=nnx.Rngs(0))


def _x(batch=1, length=L, dim=DIM):
  return jax.random.normal(jax.random.key(1), (batch, length, dim))


def _moves(layer, x, query, key):
  """Whether perturbing token `key` changes the output at `query`."""
  bumped = x.at[:, key].add(3.0)
  return not np.allclose(layer(x)[:, query], layer(bumped)[:, query], atol=1e-6)


def test_a_bidirectional_window_is_symmetric():
  layer = _layer(causal=False, window=2)
  x = _x()
  assert _moves(layer, x, 0, 1) and _moves(layer, x, 3, 4) and _moves(layer, x, 4, 3)
  # |i - j| >= 2 is outside the window on both sides (it used to mask only the keys behind the query).
  assert not _moves(layer, x, 0, 7) and not _moves(layer, x, 0, 2) and not _moves(layer, x, 5, 3)


def test_a_causal_window_sees_only_the_last_keys():
  layer = _layer(causal=True, window=2)
  x = _x()
  assert _moves(layer, x, 4, 3) and not _moves(layer, x, 4, 2) and not _moves(layer, x, 3, 4)


@pytest.mark.parametrize('shape', [(0, L, DIM), (2, 0, DIM)])
def test_empty_inputs_are_named(shape):
  with pytest.raises(ValueError, match=r'at least one sequence of at least one token'):
    _layer(causal=True)(jnp.zeros(shape))


def test_decoding_zero_tokens_is_named():
  layer = _layer(causal=True)
  cache = layer.init_cache(1, L)
  with pytest.raises(ValueError, match=r'at least one sequence of at least one token'):
    layer.decode(jnp.zeros((1, 0, DIM)), cache)


def test_a_cache_of_another_layer_is_named():
  cache = _layer(causal=True, heads=4).init_cache(1, L)  # head_dim 4, not 8
  with pytest.raises(ValueError, match=r'a cache of this layer \(2 heads x head_dim 8\)'):
    _layer(causal=True).decode(_x(length=1), cache)
