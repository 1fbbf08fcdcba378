"""One whole attention layer: transformers' LlamaAttention with random weights, its output reproduced by
relpos_jax's RelativeMultiHeadAttention given the same weights and the encoder `from_hf` reads from the same
config, for the default, llama3, yarn and longrope rules (the layer's rotary applied by transformers'
LlamaRotaryEmbedding); and Qwen2-VL's attention with M-RoPE on a text + image sequence. Bidirectional (no mask),
one head per key/value head, positions below 64: float32 on both sides, agreement to 1e-5.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax.interop import from_hf

pytestmark = pytest.mark.reference
torch = pytest.importorskip('torch', reason='the reference tests need torch (pip install -e ".[reference]")')
transformers = pytest.importorskip(
    'transformers', reason='the reference tests need transformers (pip install -e ".[reference]")'
)
from transformers.models.llama import modeling_llama  # noqa: E402

MODEL_DIM, HEADS, LENGTH = 64, 4, 24
HEAD_DIM = MODEL_DIM // HEADS
PAIRS = HEAD_DIM // 2
RULES = {
    'default': {'rope_type': 'default'},
    # An original length of 64 puts these wavelengths (6 to 19,000 positions) in all three of llama3's bands.
    'llama3': {
        'rope_type': 'llama3',
        'factor': 8.0,
        'low_freq_factor': 1.0,
        'high_freq_factor': 4.0,
        'original_max_position_embeddings': 64,
    },
    'yarn': {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16},
    # LENGTH > 16: the long factors (the switch itself is in test_hf_reference).
    'longrope': {
        'rope_type': 'longrope',
        'original_max_position_embeddings': 16,
        'short_factor': [1.0 + 0.1 * k for k in range(PAIRS)],
        'long_factor': [1.0 + 2.0 * k for k in range(PAIRS)],
    },
}


@pytest.mark.parametrize('rule', sorted(RULES))
def test_llama_attention_output_equals_the_relpos_jax_layer(rule, layer_with_their_weights):
  config = transformers.LlamaConfig(
      hidden_size=MODEL_DIM,
      num_attention_heads=HEADS,
      num_key_value_heads=HEADS,
      max_position_embeddings=64,
      rope_parameters={**RULES[rule], 'rope_theta': 10000.0},
      attention_bias=False,
  )
  config._attn_implementation = 'eager'
  torch.manual_seed(0)
  theirs_layer = modeling_llama.LlamaAttention(config, layer_idx=0).eval()
  rotary = modeling_llama.LlamaRotaryEmbedding(config)
  x = torch.randn(2, LENGTH, MODEL_DIM)
  positions = torch.arange(LENGTH)[None].expand(2, -1)
  with torch.no_grad():
    theirs, _ = theirs_layer(x, position_embeddings=rotary(x, positions), attention_mask=None)

  ours = layer_with_their_weights(from_hf(config).encoder(), theirs_layer, HEADS, MODEL_DIM)(
      jnp.asarray(x.numpy()), positions=jnp.asarray(positions.numpy())
  )
  np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), atol=1e-5)


def test_qwen2_vl_attention_output_equals_the_relpos_jax_layer_with_mrope(layer_with_their_weights):
  """Qwen2-VL's text attention on text + image ids (its q / k / v biases zeroed: the layer has none)."""
  from transformers.models.qwen2_vl import modeling_qwen2_vl as qwen2_vl

  from relpos_jax.grid.mrope_index import get_rope_index

  config = transformers.Qwen2VLTextConfig(
      hidden_size=MODEL_DIM,
      num_attention_heads=HEADS,
      num_key_value_heads=HEADS,
      rope_parameters={'rope_type': 'default', 'rope_theta': 10000.0, 'mrope_section': [2, 3, 3]},
  )
  config._attn_implementation = 'eager'
  torch.manual_seed(0)
  theirs_layer = qwen2_vl.Qwen2VLAttention(config, layer_idx=0).eval()
  with torch.no_grad():
    for proj in ('q_proj', 'k_proj', 'v_proj'):
      getattr(theirs_layer, proj).bias.zero_()
  # 3 text tokens, vision_start, a 1 x 8 x 12 image (24 merged tokens), then 2 text tokens: 30 tokens.
  ids = np.array([[1, 2, 3, 151652] + [151655] * 24 + [4, 5]])
  position_ids, _ = get_rope_index(
      ids, np.array([[1, 8, 12]]), image_token_id=151655, video_token_id=151656, vision_start_token_id=151652
  )
  x = torch.randn(1, ids.shape[1], MODEL_DIM)
  rotary = qwen2_vl.Qwen2VLRotaryEmbedding(config)
  with torch.no_grad():
    theirs, _ = theirs_layer(x, position_embeddings=rotary(x, torch.from_numpy(position_ids)), attention_mask=None)
  encoder = from_hf(config).encoder()
  ours = layer_with_their_weights(encoder, theirs_layer, HEADS, MODEL_DIM)(
      jnp.asarray(x.numpy()), positions=jnp.asarray(np.moveaxis(position_ids, 0, -1))
  )
  np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), atol=1e-5)
