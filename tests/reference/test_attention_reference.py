"""One whole attention layer: transformers' LlamaAttention with random weights, its output reproduced by
relpos_jax's RelativeMultiHeadAttention given the same weights and the encoder `from_hf` reads from the same
config, for the default, llama3, yarn and longrope rules (the layer's rotary applied by transformers'
LlamaRotaryEmbedding). Bidirectional (no mask), one head per key/value head, positions below 64: float32 on both
sides, agreement to 1e-5.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax.interop import from_hf
from relpos_jax.nn.attention import RelativeMultiHeadAttention

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
def test_llama_attention_output_equals_the_relpos_jax_layer(rule):
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

  encoder = from_hf(config).encoder()
  ours_layer = RelativeMultiHeadAttention(HEADS, MODEL_DIM, encoder, rngs=nnx.Rngs(0))
  for name, proj in (('query', 'q_proj'), ('key', 'k_proj'), ('value', 'v_proj'), ('out', 'o_proj')):
    # torch's Linear holds (out, in); nnx.Linear's kernel is (in, out).
    getattr(ours_layer, name).kernel[...] = jnp.asarray(getattr(theirs_layer, proj).weight.detach().numpy().T)
  ours = ours_layer(jnp.asarray(x.numpy()), positions=jnp.asarray(positions.numpy()))
  np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), atol=1e-5)
