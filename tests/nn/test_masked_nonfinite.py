"""Masked keys contribute nothing, whatever they hold: a NaN or inf in a padded key, an unfilled cache slot
or a future key under the causal mask leaves every query that cannot see it untouched, on every path
(dot_product_attention, the einsum path, the vector-relative terms, cached decoding). A query that does
see a non-finite key still gets NaN: nothing is hidden."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.encoders import contract
from relpos_jax.nn import RelativeMultiHeadAttention, functional, terms
from relpos_jax.nn import call

B, L, DIM, HEADS = 2, 6, 16, 2

# (encoder, implementation): every attention kind on the paths it can take; cudnn needs a GPU.
CASES = [
    ('alibi', 'xla'),
    ('alibi', 'einsum'),
    ('fire', 'einsum'),
    ('rope', 'xla'),
    ('rope', 'einsum'),
    ('shaw_vector', None),
    ('transformer_xl', None),
    ('alibi', 'cudnn'),
    ('rope', 'cudnn'),
]
_call = nnx.jit(lambda layer, x, padding_mask: layer(x, padding_mask=padding_mask))
_decode = nnx.jit(lambda layer, x, cache, padding_mask: layer.decode(x, cache, padding_mask=padding_mask))


def _layer(name, implementation, causal):
  if implementation == 'cudnn' and jax.default_backend() != 'gpu':
    pytest.skip('the cuDNN kernel needs a GPU')
  encoder = encoders.make(name)
  causal = causal or any(p.requires_causal for p in contract.leaves(encoder))
  dtype = 'bfloat16' if implementation == 'cudnn' else 'float32'
  return RelativeMultiHeadAttention(
      HEADS, DIM, encoder, causal=causal, implementation=implementation, dtype=dtype, rngs=nnx.Rngs(0)
  )


def _x(dtype=jnp.float32):
  return jax.random.normal(jax.random.key(1), (B, L, DIM)).astype(dtype)


def _with(x, b, i, value):
  return x.at[b, i].set(value)


@pytest.mark.parametrize('name,implementation', CASES)
def test_a_non_finite_padded_key_changes_no_real_row(name, implementation):
  layer = _layer(name, implementation, causal=False)
  x = _x(layer.dtype)
  padding = jnp.array([[True] * L, [True] * (L - 2) + [False] * 2])
  # The projections have no bias: a zero input is a zero key and value, the clean reference.
  x = _with(x, 1, L - 2, jnp.inf)
  poisoned = _call(layer, _with(x, 1, L - 1, jnp.nan), padding)
  clean = _call(layer, _with(_with(x, 1, L - 2, 0.0), 1, L - 1, 0.0), padding)
  real = np.asarray(padding)
  np.testing.assert_array_equal(np.asarray(poisoned, np.float32)[real], np.asarray(clean, np.float32)[real])
  assert np.all(np.isfinite(np.asarray(poisoned, np.float32)[real]))


@pytest.mark.parametrize('name,implementation', CASES)
def test_a_nan_future_key_changes_no_earlier_row(name, implementation):
  layer = _layer(name, implementation, causal=True)
  x = _x(layer.dtype)
  poisoned = np.asarray(_call(layer, _with(x, 0, 4, jnp.nan), None), np.float32)
  clean = np.asarray(_call(layer, _with(x, 0, 4, 0.0), None), np.float32)
  np.testing.assert_array_equal(poisoned[0, :4], clean[0, :4])  # rows before the NaN: untouched
  np.testing.assert_array_equal(poisoned[1], clean[1])  # the other sequence: untouched
  assert np.all(np.isnan(poisoned[0, 4:]))  # rows that see it: NaN, not hidden


@pytest.mark.parametrize('name', ['rope', 'shaw_vector'])
def test_decoding_ignores_non_finite_unfilled_cache_slots_and_padded_tokens(name):
  layer = _layer(name, None, causal=True)
  x = _x()
  real = jnp.ones((B, 2), bool)  # every call decodes 2 tokens with a mask: one compilation
  _, cache = _decode(layer, x[:, :2], layer.init_cache(B, L + 2), real)
  garbage = dataclasses.replace(cache, key=cache.key.at[:, 2:].set(jnp.nan), value=cache.value.at[:, 2:].set(jnp.inf))
  y1, _ = _decode(layer, x[:, 2:4], garbage, real)
  y1_clean, _ = _decode(layer, x[:, 2:4], cache, real)
  np.testing.assert_array_equal(y1, y1_clean)
  assert np.all(np.isfinite(y1))
  # A padded token holding NaN: later tokens do not see it.
  padding = jnp.array([[True, False], [True, True]])
  _, poisoned = _decode(layer, _with(x, 0, 3, jnp.nan)[:, 2:4], cache, padding)
  _, clean = _decode(layer, _with(x, 0, 3, 0.0)[:, 2:4], cache, padding)
  after = _decode(layer, x[:, 4:6], poisoned, real)[0]
  np.testing.assert_array_equal(after, _decode(layer, x[:, 4:6], clean, real)[0])
  assert np.all(np.isfinite(after))


def test_an_explicit_mask_and_the_gradients_ignore_masked_nans():
  parts = terms.parts.attention_parts(encoders.make('alibi'))
  params = terms.parts.init_params(parts, jax.random.key(0), num_heads=HEADS, head_dim=4, model_dim=8)
  q, k, v = (jax.random.normal(jax.random.key(n), (B, L, HEADS, 4)) for n in range(3))
  mask = jnp.ones((1, 1, L, L), bool).at[..., 2].set(False)
  k, v = k.at[:, 2].set(jnp.nan), v.at[:, 2].set(jnp.nan)
  for implementation in ('xla', 'einsum'):

    def loss(q):
      return jnp.sum(
          functional.attend(
              call.AttentionInputs.checked(q, k, v, mask=mask),
              parts,
              params,
              call.AttentionSettings.checked(implementation=implementation),
          )
      )

    value, grad = jax.jit(jax.value_and_grad(loss))(q)
    assert np.isfinite(value) and np.all(np.isfinite(grad)), implementation
