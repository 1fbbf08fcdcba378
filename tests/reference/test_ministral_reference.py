"""Ministral 3's query scale (`rope_parameters['llama_4_scaling_beta']`) against transformers itself: the factor
equals `get_llama_4_attn_scale`, the published defaults import as yarn rope + llama4_scale, and a
Ministral3Attention with random weights is reproduced by relpos_jax's layer, positions past several multiples of
the original length so the scale steps. Marker `reference`; skipped where torch or transformers is absent."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax.encoders.temperature import Llama4Scale
from relpos_jax.interop import from_hf, to_hf
from relpos_jax.nn.attention import RelativeMultiHeadAttention  # the plain-rope foil below

pytestmark = pytest.mark.reference
torch = pytest.importorskip('torch', reason='the reference tests need torch (pip install -e ".[reference]")')
transformers = pytest.importorskip(
    'transformers', reason='the reference tests need transformers (pip install -e ".[reference]")'
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.ministral3 import modeling_ministral3 as ministral3  # noqa: E402

MODEL_DIM, HEADS, LENGTH = 64, 4, 40


def test_the_factor_equals_get_llama_4_attn_scale():
  positions = np.concatenate([np.arange(0, 200), np.arange(16_000, 70_000, 997), [2**20, 2**24 - 1]])
  for beta, original in ((0.1, 16384), (0.5, 7), (0.0, 64)):
    scale = Llama4Scale(beta=beta, original_max_position=original)
    params = scale.init(jax.random.key(0), num_heads=2)
    ours = np.asarray(scale.temperature(params, jnp.ones((1, len(positions))), jnp.asarray(positions)))[0, 0]
    theirs = ministral3.get_llama_4_attn_scale(torch.as_tensor(positions)[None], beta, original)[0, 0, :, 0].numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_the_published_defaults_import_as_yarn_plus_the_query_scale():
  config = transformers.Ministral3Config()  # its defaults: Ministral 3's published rope parameters
  encoder = from_hf(config).encoder()
  rope, scale = encoder.parts
  assert scale == Llama4Scale(beta=0.1, original_max_position=16384)
  assert rope.scaling == 'yarn' and rope.factor == 16.0 and rope.original_max_position == 16384
  theirs, attention_factor = ROPE_INIT_FUNCTIONS['yarn'](config, None)
  np.testing.assert_allclose(rope.inverse_frequencies(config.head_dim), theirs.double().numpy(), rtol=2e-6)
  assert rope.vector_scale == pytest.approx(float(attention_factor), rel=1e-12)
  written = {**to_hf(encoder), 'head_dim': config.head_dim, 'max_position_embeddings': config.max_position_embeddings}
  assert from_hf(written).encoder() == encoder


def test_ministral3_attention_output_equals_the_relpos_jax_layer(layer_with_their_weights):
  rope_parameters = {
      'rope_type': 'yarn',
      'rope_theta': 10000.0,
      'factor': 4.0,
      'original_max_position_embeddings': 8,
      'llama_4_scaling_beta': 0.5,
  }
  config = transformers.Ministral3Config(
      hidden_size=MODEL_DIM,
      num_attention_heads=HEADS,
      num_key_value_heads=HEADS,
      head_dim=MODEL_DIM // HEADS,
      max_position_embeddings=64,
      rope_parameters=rope_parameters,
  )
  config._attn_implementation = 'eager'
  torch.manual_seed(0)
  theirs_layer = ministral3.Ministral3Attention(config, layer_idx=0).eval()
  rotary = ministral3.Ministral3RotaryEmbedding(config)
  x = torch.randn(2, LENGTH, MODEL_DIM)
  positions = torch.arange(LENGTH)[None].expand(2, -1)  # 0..39: the scale steps at 8, 16, 24, 32
  with torch.no_grad():
    theirs, _ = theirs_layer(x, position_embeddings=rotary(x, positions), attention_mask=None, position_ids=positions)

  encoder = from_hf(config).encoder()
  assert encoder.parts[1] == Llama4Scale(beta=0.5, original_max_position=8)
  layer = layer_with_their_weights(encoder, theirs_layer, HEADS, MODEL_DIM)
  ours = layer(jnp.asarray(x.numpy()))
  np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), atol=1e-5)
  # Without the scale the outputs differ beyond the tolerance (the test would see a missing factor).
  plain = RelativeMultiHeadAttention(HEADS, MODEL_DIM, encoder.parts[0], rngs=nnx.Rngs(0))
  for name in ('query', 'key', 'value', 'out'):
    getattr(plain, name).kernel[...] = getattr(layer, name).kernel[...]
  assert np.abs(np.asarray(plain(jnp.asarray(x.numpy()))) - theirs.numpy()).max() > 1e-3
