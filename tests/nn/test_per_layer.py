"""Per-layer encoders and sliding windows: patterns over the layers, validation naming the layer, local
attention's reach, decode == forward, the Linen twin, and a config-level run that trains and restores."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.nn import DecoderLM, ModelConfig, RelativeMultiHeadAttention
from relpos_jax.nn import linen as relpos_linen

B, L, VOCAB = 2, 9, 11
_forward = nnx.jit(lambda model, tokens: model(tokens))
_decode = nnx.jit(lambda model, tokens, cache: model.decode(tokens, cache))


def _config(encoder, **kw):
  return ModelConfig(
      **(dict(vocab_size=VOCAB, encoder=encoder, num_layers=4, model_dim=16, num_heads=2, mlp_ratio=2.0) | kw)
  )


def _tokens(seed=0):
  return jax.random.randint(jax.random.key(seed), (B, L), 0, VOCAB, jnp.int32)


def test_a_tuple_alternates_over_the_layers():
  model = DecoderLM(_config(('rope', 'nope')), rngs=nnx.Rngs(0))
  assert [b.attention.encoder.name for b in model.blocks] == ['rope', 'nope', 'rope', 'nope']


def test_a_spec_string_pattern_repeats_and_truncates_like_gemma():
  config = _config('(rope, rope, nope)', num_layers=5, attention_window='(4, None)')
  assert [e.name for e in config.layer_encoders] == ['rope', 'rope', 'nope', 'rope', 'rope']
  assert config.layer_windows == (4, None, 4, None, 4)
  model = DecoderLM(config, rngs=nnx.Rngs(0))
  assert [b.attention.window for b in model.blocks] == [4, None, 4, None, 4]


@pytest.mark.parametrize(
    'kw,message',
    [
        (dict(encoder=('rope', 'no_such')), r'encoder\[1\]'),
        (dict(encoder=('rope',) * 5), 'at most num_layers=4'),
        (dict(encoder=('rope', 'sinusoidal + rope')), 'layer 1'),
        (dict(encoder=('t5', 'alibi'), share_position_bias=True), 'layer 1'),
        (dict(encoder='rope', attention_window=(None, 0)), r'attention_window\[1\]'),
        (dict(encoder='rope', attention_window=True), 'attention_window'),
        (dict(encoder='()'), 'encoder'),
    ],
)
def test_validation_names_the_layer(kw, message):
  with pytest.raises(ValueError, match=message):
    _config(**kw)


def test_a_sliding_window_layer_does_not_see_past_its_window():
  model = DecoderLM(_config('rope', num_layers=1, attention_window=3), rngs=nnx.Rngs(0))
  tokens = _tokens()
  full = _forward(model, tokens)
  changed = _forward(model, tokens.at[:, 0].set((tokens[:, 0] + 1) % VOCAB))
  np.testing.assert_array_equal(changed[:, 3:], full[:, 3:])  # Position 0 is >= 3 back from 3 on.
  assert float(jnp.max(jnp.abs(changed[:, 2] - full[:, 2]))) > 0  # ... but within reach of 2.


def test_per_layer_decode_equals_forward():
  model = DecoderLM(_config(('rope', 'alibi', 'nope'), attention_window=(3, None)), rngs=nnx.Rngs(0))
  tokens = _tokens()
  full = _forward(model, tokens)
  cache = model.init_cache(B, L + 2)
  outs = []
  for t in range(L):
    logits, cache = _decode(model, tokens[:, t : t + 1], cache)
    outs.append(logits)
  np.testing.assert_allclose(jnp.concatenate(outs, axis=1), full, atol=5e-5, rtol=1e-5)


def test_linen_twin_takes_the_window():
  layer = RelativeMultiHeadAttention(2, 16, encoders.make('rope'), causal=True, window=2, rngs=nnx.Rngs(0))
  twin = relpos_linen.RelativeMultiHeadAttention(num_heads=2, encoder=encoders.make('rope'), causal=True, window=2)
  x = jax.random.normal(jax.random.key(1), (B, L, 16))
  np.testing.assert_allclose(twin.apply({'params': relpos_linen.params_from_nnx(layer)}, x), layer(x), atol=1e-5)


def test_a_per_layer_config_trains_and_restores(tmp_path):
  from relpos_jax.train import config_files
  from relpos_jax.train import loop

  config = config_files.load_config(
      'configs/lm.py',
      {
          'model.encoder': '(rope, nope)',
          'model.num_layers': 2,
          'model.model_dim': 16,
          'model.num_heads': 2,
          'train.steps': 2,
          'train.batch_size': 4,
          'train.checkpoint_every': 2,
          'train.log_every': 2,
          'optim.warmup_steps': 1,
          'eval.lengths': (16,),
          'eval.num_examples': 4,
          'eval.batch_size': 4,
          'eval.every': 0,
          'data.train_length': 16,
          'data.max_train_bytes': 200_000,
      },
  )
  result = loop.train(config, tmp_path)
  assert [b.attention.encoder.name for b in result.model.blocks] == ['rope', 'nope']
  restored, _ = loop.load_model(tmp_path)
  for a, b in zip(jax.tree.leaves(nnx.state(result.model, nnx.Param)), jax.tree.leaves(nnx.state(restored, nnx.Param))):
    np.testing.assert_array_equal(a, b)


def test_a_sliding_window_is_the_same_on_the_blockwise_path():
  einsum = DecoderLM(
      _config('t5', num_layers=2, attention_window=(3, None), attention_implementation='einsum'), rngs=nnx.Rngs(0)
  )
  tiled = DecoderLM(
      _config(
          't5', num_layers=2, attention_window=(3, None), attention_implementation='blockwise', attention_block_size=4
      ),
      rngs=nnx.Rngs(0),
  )
  tokens = _tokens()
  np.testing.assert_allclose(_forward(tiled, tokens), _forward(einsum, tokens), atol=1e-4, rtol=1e-4)
