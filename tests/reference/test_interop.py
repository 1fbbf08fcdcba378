"""relpos_jax.interop without the reference libraries: the published configs read, written back, and refused."""

import pytest

from relpos_jax.encoders.rope import Rope
from relpos_jax.grid.encoders.rope import MRope
from relpos_jax.interop import from_hf, to_hf


def test_every_published_config_round_trips_through_to_hf(published):
  name, cfg = published
  imported = from_hf(cfg)
  for layer_type, encoder in imported.encoders.items():
    written = {**to_hf(encoder), 'head_dim': imported.head_dims[layer_type]}
    written.setdefault('max_position_embeddings', cfg.get('max_position_embeddings'))
    assert from_hf(written).encoder() == encoder, (name, layer_type)


def test_the_quirks_a_faithful_import_keeps(published_configs):
  phi = from_hf(published_configs['phi-3.5']).encoder()
  assert phi.factor == 131072 / 4096  # LongRoPE's factor implied by the two lengths
  assert phi.length_dependent  # short factors up to 4096 positions, long ones beyond
  assert from_hf(published_configs['gpt-oss']).encoder().truncate is False
  deepseek = from_hf(published_configs['deepseek-v3'])
  assert deepseek.head_dims['full_attention'] == 64 and deepseek.encoder().layout == 'interleaved'
  gemma3 = from_hf(published_configs['gemma-3'])
  assert gemma3.per_layer() == (Rope(),) * 5 + (Rope(base=1e6, scaling='linear', factor=8.0),)
  gemma4 = from_hf(published_configs['gemma-4'])
  assert gemma4.encoder() == Rope(base=1e6, frequency_fraction=0.25) and gemma4.head_dims['full_attention'] == 512
  assert from_hf(published_configs['qwen3-vl']).encoder() == MRope(base=5e6, sections=(24, 20, 20), interleaved=True)
  dynamic = {'rope_parameters': {'rope_type': 'dynamic', 'factor': 2.0, 'rope_theta': 1e4}, 'head_dim': 64}
  assert from_hf({**dynamic, 'max_position_embeddings': 4096}).encoder().original_max_position == 4096


LLAMA = {'rope_theta': 5e5, 'head_dim': 64, 'max_position_embeddings': 131072}
LLAMA3 = {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0}


@pytest.mark.parametrize(
    'config, named',
    [
        ({**LLAMA, 'rope_scaling': {'rope_type': 'su'}}, "rope_parameters['rope_type'] = 'su'"),
        ({**LLAMA, 'rope_scaling': {'rope_type': 'linear'}}, "rope_parameters['factor'] = None"),
        ({**LLAMA, 'rope_scaling': {**LLAMA3, 'low_freq_factor': None}}, "rope_parameters['low_freq_factor'] = None"),
        ({**LLAMA, 'rope_scaling': {**LLAMA3, 'beta_fast': 32}}, "rope_parameters['beta_fast'] = 32"),
        (
            {**LLAMA, 'rope_scaling': {'rope_type': 'longrope', 'short_factor': [1.0] * 32, 'long_factor': [2.0] * 31}},
            "rope_parameters['long_factor'] = '<31 factors>'",
        ),
        ({**LLAMA, 'rope_scaling': {'rope_type': 'default', 'mrope_section': [8, 8, 8]}}, "['mrope_section']"),
        (
            {**LLAMA, 'rope_parameters': {'rope_type': 'default', 'llama_4_scaling_beta': 0.1}},
            "rope_parameters['original_max_position_embeddings'] = None",
        ),
        (
            {**LLAMA, 'rope_parameters': {'llama_4_scaling_beta': -0.1, 'original_max_position_embeddings': 8}},
            "rope_parameters['llama_4_scaling_beta'] = -0.1",
        ),
        (
            {**LLAMA, 'rope_parameters': {'mrope_section': [8, 12, 12], 'llama_4_scaling_beta': 0.1}},
            "rope_parameters['llama_4_scaling_beta'] = 0.1",
        ),
        ({'head_dim': 64}, 'rope_parameters = None'),
        ({**LLAMA, 'head_dim': 63}, 'head_dim'),
    ],
)
def test_bad_configs_are_refused_with_the_field_named(config, named):
  with pytest.raises(ValueError, match='^from_hf: .*' + __import__('re').escape(named)) as e:
    from_hf(config)
  assert '\n' not in str(e.value)


@pytest.mark.parametrize(
    'encoder, named',
    [
        ('alibi', 'alibi'),
        ('xpos', 'xpos'),
        ('randomized(rope)', 'randomized'),
        ('rope(scaling="ntk", factor=2.0)', 'ntk'),
        ('rope(resonance=True)', 'resonance'),
    ],
)
def test_to_hf_refuses_what_hugging_face_has_no_rope_parameters_for(encoder, named):
  from relpos_jax.encoders.spec import from_spec

  with pytest.raises(ValueError, match=f'^to_hf: .*{named}'):
    to_hf(from_spec(encoder))


def test_the_query_scale_beside_a_rope_imports_and_writes_back():
  """Ministral 3's llama_4_scaling_beta: rope + llama4_scale, and back; a sum Hugging Face cannot describe, or one
  whose two original lengths differ, is refused by name."""
  from relpos_jax import encoders  # pylint: disable=g-import-not-at-top
  from relpos_jax.encoders.temperature import Llama4Scale  # pylint: disable=g-import-not-at-top

  cfg = {
      **LLAMA,
      'rope_parameters': {'rope_theta': 1e6, 'llama_4_scaling_beta': 0.1, 'original_max_position_embeddings': 16384},
  }
  encoder = from_hf(cfg).encoder()
  assert encoder == encoders.combine(Rope(base=1e6), Llama4Scale(beta=0.1, original_max_position=16384))
  assert to_hf(encoder) == {
      'rope_parameters': {
          'rope_type': 'default',
          'rope_theta': 1e6,
          'original_max_position_embeddings': 16384,
          'llama_4_scaling_beta': 0.1,
      }
  }
  with pytest.raises(ValueError, match=r'^to_hf: encoder .* a rope plus llama4_scale'):
    to_hf(encoders.from_spec('rope + alibi'))
  yarn = Rope(scaling='yarn', factor=4.0, original_max_position=4096)
  with pytest.raises(ValueError, match=r'^to_hf: llama4_scale original_max_position = 8 .* 4096'):
    to_hf(encoders.combine(yarn, Llama4Scale(beta=0.1, original_max_position=8)))
