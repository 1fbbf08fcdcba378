"""The rope fields of published Hugging Face config.json files, for tests/reference (no hub download at run time).

Each entry is the part of the model's config.json that positions read (rope_theta, rope_scaling or
rope_parameters, the head dimension, lengths, layer types), copied from the published file; the per-layer lists are
cut to a few layers. `pytest_generate_tests` runs a test with a `published` argument once per model.
"""

import importlib
import importlib.util
import os
import sys
import types

import pytest

PHI3_LONG_FACTOR = [
    1.0800000429153442,
    1.1100000143051147,
    1.1399999856948853,
    1.340000033378601,
    1.5899999141693115,
    1.600000023841858,
    1.6200000047683716,
    2.620000123977661,
    3.2300000190734863,
    3.2300000190734863,
    4.789999961853027,
    7.400000095367432,
    7.700000286102295,
    9.09000015258789,
    12.199999809265137,
    17.670000076293945,
    24.46000099182129,
    28.57000160217285,
    30.420001983642578,
    30.840002059936523,
    32.590003967285156,
    32.93000411987305,
    42.320003509521484,
    44.96000289916992,
    50.340003967285156,
    50.45000457763672,
    57.55000305175781,
    57.93000411987305,
    58.21000289916992,
    60.1400032043457,
    62.61000442504883,
    62.62000274658203,
    62.71000289916992,
    63.1400032043457,
    63.1400032043457,
    63.77000427246094,
    63.93000411987305,
    63.96000289916992,
    63.970001220703125,
    64.02999877929688,
    64.06999969482422,
    64.08000183105469,
    64.12000274658203,
    64.41000366210938,
    64.4800033569336,
    64.51000213623047,
    64.52999877929688,
    64.83999633789062,
]
PHI3_SHORT_FACTOR = [
    1.0,
    1.0199999809265137,
    1.0299999713897705,
    1.0299999713897705,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0699999332427979,
    1.0999999046325684,
    1.1099998950958252,
    1.1599998474121094,
    1.1599998474121094,
    1.1699998378753662,
    1.2899998426437378,
    1.339999794960022,
    1.679999828338623,
    1.7899998426437378,
    1.8199998140335083,
    1.8499997854232788,
    1.8799997568130493,
    1.9099997282028198,
    1.9399996995925903,
    1.9899996519088745,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0799996852874756,
    2.0899996757507324,
    2.189999580383301,
    2.2199995517730713,
    2.5899994373321533,
    2.729999542236328,
    2.749999523162842,
    2.8399994373321533,
]

PUBLISHED = {
    # meta-llama/Llama-3.1-8B
    'llama-3.1': {
        'hidden_size': 4096,
        'num_attention_heads': 32,
        'max_position_embeddings': 131072,
        'rope_theta': 500000.0,
        'rope_scaling': {
            'factor': 8.0,
            'low_freq_factor': 1.0,
            'high_freq_factor': 4.0,
            'original_max_position_embeddings': 8192,
            'rope_type': 'llama3',
        },
    },
    # meta-llama/Llama-3.2-1B
    'llama-3.2': {
        'hidden_size': 2048,
        'num_attention_heads': 32,
        'head_dim': 64,
        'max_position_embeddings': 131072,
        'rope_theta': 500000.0,
        'rope_scaling': {
            'factor': 32.0,
            'low_freq_factor': 1.0,
            'high_freq_factor': 4.0,
            'original_max_position_embeddings': 8192,
            'rope_type': 'llama3',
        },
    },
    # Qwen/Qwen2.5-7B-Instruct with the YaRN block its model card gives for 128K contexts
    'qwen2.5': {
        'hidden_size': 3584,
        'num_attention_heads': 28,
        'max_position_embeddings': 32768,
        'rope_theta': 1000000.0,
        'rope_scaling': {'factor': 4.0, 'original_max_position_embeddings': 32768, 'type': 'yarn'},
    },
    # Qwen/Qwen2-VL-7B-Instruct (M-RoPE, chunked sections)
    'qwen2-vl': {
        'hidden_size': 3584,
        'num_attention_heads': 28,
        'max_position_embeddings': 32768,
        'rope_theta': 1000000.0,
        'rope_scaling': {'type': 'mrope', 'mrope_section': [16, 24, 24]},
    },
    # Qwen/Qwen3-VL-8B-Instruct's text_config (M-RoPE, interleaved)
    'qwen3-vl': {
        'text_config': {
            'hidden_size': 4096,
            'num_attention_heads': 32,
            'head_dim': 128,
            'max_position_embeddings': 262144,
            'rope_theta': 5000000.0,
            'rope_scaling': {'mrope_interleaved': True, 'mrope_section': [24, 20, 20], 'rope_type': 'default'},
        },
    },
    # microsoft/Phi-3.5-mini-instruct (LongRoPE; the factor is implied by 131072 / 4096)
    'phi-3.5': {
        'hidden_size': 3072,
        'num_attention_heads': 32,
        'max_position_embeddings': 131072,
        'original_max_position_embeddings': 4096,
        'rope_theta': 10000.0,
        'rope_scaling': {'long_factor': PHI3_LONG_FACTOR, 'short_factor': PHI3_SHORT_FACTOR, 'type': 'longrope'},
    },
    # deepseek-ai/DeepSeek-V3 (YaRN with mscale / mscale_all_dim; the rotary part of a head is qk_rope_head_dim)
    'deepseek-v3': {
        'hidden_size': 7168,
        'num_attention_heads': 128,
        'qk_rope_head_dim': 64,
        'max_position_embeddings': 163840,
        'rope_theta': 10000.0,
        'rope_interleave': True,
        'rope_scaling': {
            'beta_fast': 32,
            'beta_slow': 1,
            'factor': 40,
            'mscale': 1.0,
            'mscale_all_dim': 1.0,
            'original_max_position_embeddings': 4096,
            'type': 'yarn',
        },
    },
    # openai/gpt-oss-20b (YaRN with truncate false)
    'gpt-oss': {
        'hidden_size': 2880,
        'num_attention_heads': 64,
        'head_dim': 64,
        'max_position_embeddings': 131072,
        'rope_theta': 150000.0,
        'rope_scaling': {
            'beta_fast': 32.0,
            'beta_slow': 1.0,
            'factor': 32.0,
            'original_max_position_embeddings': 4096,
            'rope_type': 'yarn',
            'truncate': False,
        },
    },
    # google/gemma-3-4b-it's text_config (local and global bases; linear scaling on the global layers)
    'gemma-3': {
        'hidden_size': 2560,
        'num_attention_heads': 8,
        'head_dim': 256,
        'max_position_embeddings': 131072,
        'rope_theta': 1000000.0,
        'rope_local_base_freq': 10000.0,
        'num_hidden_layers': 6,
        'sliding_window': 1024,
        'rope_scaling': {'factor': 8.0, 'rope_type': 'linear'},
        'layer_types': ['sliding_attention'] * 5 + ['full_attention'],
    },
    # transformers' Gemma4TextConfig defaults (proportional p-RoPE on the global layers, global_head_dim)
    'gemma-4': {
        'hidden_size': 2560,
        'num_attention_heads': 8,
        'head_dim': 256,
        'global_head_dim': 512,
        'num_hidden_layers': 6,
        'max_position_embeddings': 131072,
        'sliding_window': 512,
        'rope_parameters': {
            'sliding_attention': {'rope_type': 'default', 'rope_theta': 10000.0},
            'full_attention': {'rope_type': 'proportional', 'partial_rotary_factor': 0.25, 'rope_theta': 1000000.0},
        },
        'layer_types': ['sliding_attention'] * 5 + ['full_attention'],
    },
}


def pytest_generate_tests(metafunc):
  if 'published' in metafunc.fixturenames:
    metafunc.parametrize('published', sorted(PUBLISHED), indirect=True)


@pytest.fixture
def published(request):
  return request.param, PUBLISHED[request.param]


@pytest.fixture
def timm_layers():
  return timm_layer


@pytest.fixture
def published_configs():
  return PUBLISHED


def timm_layer(name: str):
  """timm.layers.<name>, the module itself. timm's package __init__ imports torchvision, whose wheel may not load
  beside this torch (this image's is a CUDA build: .ci/run removes it); the layer modules compared here need only
  torch, so where `import timm` fails they are loaded under empty parent packages instead of timm's __init__."""
  try:
    return importlib.import_module(f'timm.layers.{name}')
  except ImportError:
    pass
  spec = importlib.util.find_spec('timm')
  if spec is None:
    pytest.skip('the timm reference tests need timm (pip install -e ".[reference]")')
  for key in [k for k in sys.modules if k == 'timm' or k.startswith('timm.')]:
    del sys.modules[key]  # What the failed import left half-built.
  root = os.path.dirname(spec.origin)
  for package, path in (('timm', root), ('timm.layers', os.path.join(root, 'layers'))):
    module = types.ModuleType(package)
    module.__path__ = [path]
    sys.modules[package] = module
  return importlib.import_module(f'timm.layers.{name}')


@pytest.fixture
def layer_with_their_weights():
  """(encoder, a transformers attention layer, num_heads, model_dim) -> relpos_jax's RelativeMultiHeadAttention with
  that layer's projection weights (torch's Linear holds (out, in), nnx's kernel (in, out))."""

  def build(encoder, theirs_layer, num_heads, model_dim):
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    from flax import nnx  # pylint: disable=g-import-not-at-top

    from relpos_jax.nn.attention import RelativeMultiHeadAttention  # pylint: disable=g-import-not-at-top

    layer = RelativeMultiHeadAttention(num_heads, model_dim, encoder, rngs=nnx.Rngs(0))
    for name, proj in (('query', 'q_proj'), ('key', 'k_proj'), ('value', 'v_proj'), ('out', 'o_proj')):
      getattr(layer, name).kernel[...] = jnp.asarray(getattr(theirs_layer, proj).weight.detach().numpy().T)
    return layer

  return build
