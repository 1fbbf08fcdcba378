"""Cached decoding equals the full forward: every encoder case (token by token and in chunks), explicit
(randomized) positions, under jit; and its errors (cache overflow, a bidirectional layer)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders, nn
from relpos_jax.nn import DecoderLM, ModelConfig, RelativeMultiHeadAttention

B, L, DIM, HEADS = 2, 7, 16, 2

_forward = nnx.jit(lambda layer, x, positions: layer(x, positions=positions))
_decode = nnx.jit(lambda layer, x, cache, positions=None: layer.decode(x, cache, positions=positions))


def _layer(encoder, *, causal=True):
  return RelativeMultiHeadAttention(HEADS, DIM, encoder, causal=causal, rngs=nnx.Rngs(0))


def _x():
  return jax.random.normal(jax.random.key(1), (B, L, DIM))


def _decode_in_chunks(layer, x, chunks, max_length, positions=None):
  cache = layer.init_cache(x.shape[0], max_length)
  outs, start = [], 0
  for size in chunks:
    chunk_positions = None if positions is None else positions[:, start : start + size]
    y, cache = _decode(layer, x[:, start : start + size], cache, chunk_positions)
    outs.append(y)
    start += size
  assert int(cache.index) == start
  return jnp.concatenate(outs, axis=1)


def test_cached_decoding_equals_full_forward(attention_case):
  _, encoder = attention_case
  layer = _layer(encoder)
  x = _x()
  full = _forward(layer, x, None)
  for chunks in ([1] * L, [3, 1, 3]):
    np.testing.assert_allclose(_decode_in_chunks(layer, x, chunks, max_length=L + 3), full, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize('name', ['t5', 'rope', 'shaw_vector', 'transformer_xl', 'fire', 'alibi', 'xpos'])
def test_cached_decoding_with_explicit_positions(name):
  layer = _layer(encoders.make(name))
  x = _x()
  positions = jnp.sort(
      jax.vmap(lambda r: jax.random.choice(r, 50, (L,), replace=False))(jax.random.split(jax.random.key(3), B)), axis=-1
  ).astype(jnp.int32)
  full = _forward(layer, x, positions)
  np.testing.assert_allclose(_decode_in_chunks(layer, x, [2, 1, 4], L + 1, positions), full, atol=2e-5, rtol=1e-5)


def test_decode_under_jit_and_overflow_is_an_error():
  layer = _layer(encoders.make('t5'))
  x = _x()
  cache = layer.init_cache(B, 4)

  @nnx.jit
  def step(layer, x, cache):
    return layer.decode(x, cache)

  y, cache = step(layer, x[:, :3], cache)
  assert y.shape == (B, 3, DIM) and np.all(np.isfinite(y))
  message = r'2 new token\(s\) at positions 3\.\.4 exceed the cache of max_length=4 \(positions 0\.\.3\)'
  with pytest.raises(ValueError, match=message):
    layer.decode(x[:, :2], cache)  # Concrete index: caught before running.
  # The public compiled decode checks on the host before the jitted call: the same clear error.
  decode = nn.jit_decode(layer)
  with pytest.raises(ValueError, match=message):
    decode(x[:, :2], cache)
  # A chunk longer than the whole cache is a static shape: refused while tracing, under any jit.
  with pytest.raises(ValueError, match=r'5 new token\(s\) in one call exceed the cache of max_length=4'):
    step(layer, x[:, :5], layer.init_cache(B, 4))
  # Under the caller's own jit the index is traced: the overflowing chunk's outputs are NaN, never an
  # internal callback error and never a silent write over the last cached tokens.
  y, _ = step(layer, x[:, :2], cache)
  assert np.all(np.isnan(np.asarray(y)))


def test_jit_decode_of_a_model_equals_its_forward():
  model = DecoderLM(
      ModelConfig(vocab_size=11, encoder=encoders.make('alibi'), num_layers=1, model_dim=DIM, num_heads=2),
      rngs=nnx.Rngs(0),
  )
  tokens = jax.random.randint(jax.random.key(0), (B, 5), 0, 11)
  decode = nn.jit_decode(model)
  cache = model.init_cache(B, 5)
  first, cache = decode(tokens[:, :3], cache)
  second, cache = decode(tokens[:, 3:], cache)
  np.testing.assert_allclose(np.concatenate([first, second], axis=1), model(tokens), atol=2e-5, rtol=1e-5)
  with pytest.raises(ValueError, match='at positions 5..5 exceed the cache of max_length=5'):
    decode(tokens[:, :1], cache)


def test_decode_needs_a_causal_layer():
  layer = _layer(encoders.make('t5'), causal=False)
  with pytest.raises(ValueError, match='causal'):
    layer.decode(_x(), layer.init_cache(B, L))


@pytest.mark.parametrize('name', ['rope', 't5', 'shaw_vector', 'fox'])
def test_decoding_under_x64_equals_full_forward(name):
  """jax_enable_x64 makes a literal index int64: the cache writes keep one index type (used to be a TypeError)."""
  with jax.enable_x64(True):
    layer = _layer(encoders.make(name))
    x = _x()
    full = layer(x)
    cache = layer.init_cache(B, L + 1)
    outs = []
    for start, size in ((0, 3), (3, 1), (4, 3)):
      y, cache = layer.decode(x[:, start : start + size], cache)
      outs.append(y)
    np.testing.assert_allclose(jnp.concatenate(outs, axis=1), full, atol=2e-5, rtol=1e-5)
    positions = jnp.broadcast_to(jnp.arange(3, dtype=jnp.int32) + 5, (B, 3))
    model = DecoderLM(
        ModelConfig(
            vocab_size=11,
            encoder='t5(bidirectional=False)',
            num_layers=1,
            model_dim=DIM,
            num_heads=2,
            share_position_bias=True,
        ),
        rngs=nnx.Rngs(0),
    )
    tokens = jax.random.randint(jax.random.key(0), (B, 3), 0, 11)
    y, _ = model.decode(tokens, model.init_cache(B, 4), positions=positions)
    np.testing.assert_allclose(y, model(tokens, positions=positions), atol=2e-5, rtol=1e-5)
