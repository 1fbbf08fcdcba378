"""relpos_jax's rotary rules against Hugging Face transformers itself (not a transcription), on the rope configs of
published models (tests/reference/conftest.py). Marker `reference`; skipped where torch or transformers do not
import (`pip install -e '.[reference]'`). The reference followed is transformers 5.x, where it and the papers differ
(YaRN's ramp, the dynamic NTK original length, LongRoPE's switch: see relpos_jax.interop).

Tolerances. transformers computes the inverse frequencies in float32 (base ** (2k / D) rounded once per step),
relpos_jax in float64: they agree to a relative 2e-6 (measured on these configs: at most 3.2e-7, Llama 3.1's
llama3 rule; a few float32 roundings). Rotated vectors are compared at positions below 64, where the float32
angle p theta of transformers is within 64 * 2^-24 rad of the exact one: absolute 2e-5 on unit-scale inputs.
"""

import numpy as np
import pytest

pytestmark = pytest.mark.reference
torch = pytest.importorskip('torch', reason='the reference tests need torch (pip install -e ".[reference]")')
transformers = pytest.importorskip(
    'transformers', reason='the reference tests need transformers (pip install -e ".[reference]")'
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gemma3 import modeling_gemma3 as gemma3  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402

from relpos_jax.encoders.rope import Rope  # noqa: E402
from relpos_jax.grid.encoders.rope import MRope  # noqa: E402
from relpos_jax.interop import from_hf, to_hf  # noqa: E402

MODEL_TYPES = {
    'llama-3.1': 'llama',
    'llama-3.2': 'llama',
    'qwen2.5': 'qwen2',
    'qwen2-vl': 'qwen2_vl',
    'qwen3-vl': 'qwen3_vl',
    'phi-3.5': 'phi3',
    'deepseek-v3': 'deepseek_v3',
    'gpt-oss': 'gpt_oss',
    'gemma-3': 'gemma3_text',
    'gemma-4': 'gemma4_text',
}
INV_FREQ_RTOL = 2e-6
ROTATION_ATOL = 2e-5


def _config(name, published):
  return transformers.AutoConfig.for_model(MODEL_TYPES[name], **published)


def _text(config):
  return getattr(config, 'text_config', None) or config


def _layer_config(config, layer_type):
  """The config transformers initialises a layer type's rotary from (Gemma 4's head dim differs per type)."""
  if getattr(config, 'layer_types', None) is None:
    return config
  return config.per_layer_config[layer_type]


def _hf_inv_freq(config, layer_type, nested, seq_len=None):
  params = config.rope_parameters[layer_type] if nested else config.rope_parameters
  kwargs = {'layer_type': layer_type} if nested else {}
  if params['rope_type'] == 'default':
    # Gemma 3's rotary reads a layer type's own rope_theta (Llama's reads the one global dict).
    rotary = gemma3.Gemma3RotaryEmbedding if nested else modeling_llama.LlamaRotaryEmbedding
    inv, scale = rotary.compute_default_rope_parameters(config, **kwargs)
  else:
    inv, scale = ROPE_INIT_FUNCTIONS[params['rope_type']](config, None, seq_len, **kwargs)
  return inv.double().numpy(), float(scale)


def test_from_hf_reads_the_config_object_as_its_published_dict(published):
  name, cfg = published
  from_object, from_dict = from_hf(_config(name, cfg)), from_hf(cfg)
  # The object fills defaults the published dict leaves out (layer_types, sliding_window): compare what both give.
  for layer_type, encoder in from_dict.encoders.items():
    assert from_object.encoder(layer_type) == encoder
    assert from_object.head_dims[layer_type] == from_dict.head_dims[layer_type]


def test_inverse_frequencies_and_attention_factor_equal_transformers(published):
  name, cfg = published
  config = _text(_config(name, cfg))
  imported = from_hf(config)
  nested = any(t in config.rope_parameters for t in ('full_attention', 'sliding_attention'))
  for layer_type, encoder in imported.encoders.items():
    head_dim = imported.head_dims[layer_type]
    layer_config = _layer_config(config, layer_type)
    if isinstance(encoder, MRope):
      # M-RoPE rotates every section with the plain frequencies (the `default` rule).
      ours = 1.0 / encoder.base ** (np.arange(0, head_dim, 2) / head_dim)
      np.testing.assert_allclose(ours, _hf_inv_freq(layer_config, layer_type, nested)[0], rtol=INV_FREQ_RTOL)
      continue
    lengths = [None]
    if encoder.length_dependent:  # LongRoPE: the short factors up to the original length, the long ones beyond.
      lengths = [encoder.original_max_position, encoder.original_max_position + 1]
    for length in lengths:
      theirs, scale = _hf_inv_freq(layer_config, layer_type, nested, length)
      np.testing.assert_allclose(encoder.inverse_frequencies(head_dim, length), theirs, rtol=INV_FREQ_RTOL)
      assert encoder.vector_scale == pytest.approx(scale, rel=1e-12)
    if name != 'gemma-4':  # to_hf writes what transformers reads back to the same encoder.
      assert from_hf({**to_hf(encoder), 'head_dim': head_dim, 'max_position_embeddings': 2**17}).encoder() == encoder


@pytest.mark.parametrize('name', ['llama-3.1', 'llama-3.2', 'qwen2.5', 'phi-3.5', 'gpt-oss'])
def test_rotated_queries_equal_transformers_apply_rotary_pos_emb(name, published_configs):
  """The whole rotation (layout, frequencies, attention factor) on random q, by transformers' Llama rotary."""
  import jax.numpy as jnp

  config = _text(_config(name, published_configs[name]))
  imported = from_hf(config)
  rope = imported.encoder('full_attention')
  head_dim = imported.head_dims['full_attention']
  rng = np.random.default_rng(0)
  q = rng.standard_normal((1, 2, 48, head_dim)).astype(np.float32)  # (batch, heads, length, D): transformers' layout
  positions = np.arange(48)[None]
  layer_config = _layer_config(config, 'full_attention')
  rotary = modeling_llama.LlamaRotaryEmbedding(layer_config)
  cos, sin = rotary(torch.from_numpy(q), torch.from_numpy(positions))
  theirs, _ = modeling_llama.apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(q), cos, sin)
  ours = rope.rotate({}, jnp.asarray(q.transpose(0, 2, 1, 3)), jnp.asarray(positions))
  np.testing.assert_allclose(np.asarray(ours).transpose(0, 2, 1, 3), theirs.numpy(), atol=ROTATION_ATOL)


def test_dynamic_ntk_equals_transformers_beyond_the_original_length():
  """Dynamic NTK's original length is max_position_embeddings (transformers), at lengths past it."""
  config = transformers.LlamaConfig(
      hidden_size=256,
      num_attention_heads=4,
      max_position_embeddings=2048,
      rope_parameters={'rope_type': 'dynamic', 'factor': 4.0, 'rope_theta': 10000.0},
  )
  rope = from_hf(config).encoder()
  assert rope == Rope(scaling='dynamic', factor=4.0, original_max_position=2048)
  for length in (1000, 2048, 3000, 9000):
    theirs, _ = ROPE_INIT_FUNCTIONS['dynamic'](config, None, length)
    np.testing.assert_allclose(rope.inverse_frequencies(64, length), theirs.double().numpy(), rtol=INV_FREQ_RTOL)
