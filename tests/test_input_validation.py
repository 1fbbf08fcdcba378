"""Strict, uniform inputs: every class of bad input that used to be accepted silently is refused where it
enters, with a ValueError naming the value; what cannot be checked under jit behaves as documented."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import relpos_jax
from relpos_jax import encoders, validation
from relpos_jax.nn import DecoderLM, ModelConfig, RelativeMultiHeadAttention

# A wrong value per annotation; a bool field also gets 0 (falsy but not a bool).
_WRONG = {
    'bool': ('no', 0, None),
    'bool|None': ('no', 0),
    'int': ('8', 2.5, True),
    'float': ('1.0', None),
    'str': (3, None),
    'int|None': ('8', 2.5),
    'float|None': ('1.0', True),
    'tuple[int,...]': ('1, 2', 3),
    'tuple|None': ('1, 2', 3),
    'contract.Encoder': ('t5', None),
}


def _cases():
  for name in encoders.names():
    cls = encoders.encoder_class(name)
    for field in dataclasses.fields(cls):
      for value in _WRONG[str(field.type).replace(' ', '')]:
        yield name, field.name, value


@pytest.mark.parametrize('name,field,value', list(_cases()))
def test_every_field_of_every_encoder_refuses_a_wrong_type(name, field, value):
  # A wrapper (randomized, dape, the position remaps) is built around t5, a scalar bias every wrapper takes.
  required = {
      f.name: encoders.make('t5')
      for f in dataclasses.fields(encoders.encoder_class(name))
      if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
  }
  with pytest.raises(ValueError, match=f'{field}='):
    encoders.make(name, **{**required, field: value})


def test_the_registry_wide_test_covers_every_annotation():
  annotations = {
      str(f.type).replace(' ', '') for n in encoders.names() for f in dataclasses.fields(encoders.encoder_class(n))
  }
  assert annotations <= set(_WRONG), annotations - set(_WRONG)


def test_one_draw_of_training_positions_per_model():
  inner = encoders.make('randomized', base=encoders.make('t5'))
  with pytest.raises(ValueError, match='holds no randomized part'):
    encoders.make('randomized', base=encoders.combine(inner, encoders.make('rope')))
  with pytest.raises(ValueError, match='at most one part that draws training positions'):
    encoders.combine(inner, encoders.make('randomized', base=encoders.make('rope')))
  with pytest.raises(ValueError, match='at most one part'):
    encoders.from_spec('randomized(t5) + randomized(rope)')


def test_missing_wrapped_encoder_and_oversized_specs_are_value_errors():
  with pytest.raises(ValueError, match='randomized: base=None is invalid.*randomized\\(rope\\)'):
    encoders.from_spec('randomized')
  with pytest.raises(ValueError, match='at most 64 encoders'):
    encoders.from_spec(' + '.join(['t5'] * 2001))
  with pytest.raises(ValueError, match='at most 64'):
    encoders.combine(*[encoders.make('alibi')] * 65)
  for name, field in (
      ('shaw', 'max_distance'),
      ('shaw_vector', 'max_distance'),
      ('learned', 'max_length'),
      ('t5', 'max_distance'),
  ):
    with pytest.raises(ValueError, match=f'{field}={2 ** 40}'):
      encoders.make(name, **{field: 2**40})


def _t5_params():
  t5 = encoders.make('t5')
  return t5, t5.init(jax.random.key(0), 2)


@pytest.mark.parametrize('bad', [1.5, np.float32(2.0), -(2**31), 2**31])
def test_q_offset_must_be_an_integer_that_fits(bad):
  t5, params = _t5_params()
  for call in (
      lambda: relpos_jax.relative_positions(2, 3, q_offset=bad),
      lambda: relpos_jax.bias_matrix(t5, params, 2, 3, q_offset=bad),
      lambda: relpos_jax.bias_matrix(
          encoders.make('alibi'), encoders.make('alibi').init(jax.random.key(0), 2), 2, 3, q_offset=bad
      ),
  ):
    with pytest.raises(ValueError, match='q_offset'):
      call()


def test_positions_must_be_integers_that_fit_int32_differences():
  fire = encoders.make('fire')
  params = fire.init(jax.random.key(0), 2)
  with pytest.raises(ValueError, match='outside the supported range'):
    relpos_jax.bias_at_positions(fire, params, np.array([[2**31 - 1]]), np.array([[-1]]))
  with pytest.raises(ValueError, match='must be an int array'):
    relpos_jax.bias_at_positions(fire, params, np.array([[1.5]]), np.array([[0.0]]))
  config = ModelConfig(vocab_size=8, encoder='t5', model_dim=8, num_heads=2, num_layers=1)
  model = DecoderLM(config, rngs=nnx.Rngs(0))
  tokens = np.zeros((1, 2), np.int32)
  # int64 positions 2^32 + k used to be read as k.
  with pytest.raises(ValueError, match='outside the supported range'):
    model(tokens, positions=np.array([[2**32, 2**32 + 1]], np.int64))
  assert np.all(np.isfinite(model(tokens, positions=np.array([[0, validation.MAX_POSITION]]))))


def test_tokens_outside_the_vocabulary_are_refused_when_concrete():
  config = ModelConfig(vocab_size=8, encoder='alibi', model_dim=8, num_heads=2, num_layers=1)
  model = DecoderLM(config, rngs=nnx.Rngs(0))
  for bad in (-1, 8):
    with pytest.raises(ValueError, match=f'tokens={bad} is invalid; allowed: token ids in \\[0, vocab_size=8\\)'):
      model(np.array([[0, bad]], np.int32))


def test_padding_masks_follow_one_rule_in_the_layer_and_the_model():
  layer = RelativeMultiHeadAttention(2, 8, encoders.make('alibi'), rngs=nnx.Rngs(0))
  x = jnp.ones((1, 3, 8))
  for bad in (np.array([[1, 1, 0]]), np.array([[1.0, 0.5, 0.0]])):
    with pytest.raises(ValueError, match='padding_mask must be bool'):
      layer(x, padding_mask=bad)
  np.testing.assert_allclose(
      layer(x, padding_mask=np.array([[True, True, False]])), layer(x, padding_mask=jnp.array([[True, True, False]]))
  )


def test_mismatched_params_name_what_they_were_built_for():
  t5, alibi = encoders.make('t5'), encoders.make('alibi')
  with pytest.raises(ValueError, match='initialised for encoder alibi'):
    relpos_jax.bias_matrix(t5, alibi.init(jax.random.key(0), 2), 3, 3)
  four = RelativeMultiHeadAttention(4, 16, t5, rngs=nnx.Rngs(0))
  two = RelativeMultiHeadAttention(2, 16, t5, own_position_params=False, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match='initialised for 4 heads, but this layer has 2'):
    two(jnp.ones((1, 3, 16)), position_params=four.init_position_params(jax.random.key(1)))
  with pytest.raises(ValueError, match='initialised for encoder alibi'):
    two(jnp.ones((1, 3, 16)), position_params=[alibi.init(jax.random.key(0), 2)])


def test_a_learned_table_reads_nan_at_a_negative_traced_position():
  learned = encoders.make('learned', max_length=4)
  params = learned.init(jax.random.key(0), 1, model_dim=2)
  out = np.asarray(jax.jit(learned.embed)(params, jnp.array([-1, 0, 4])))
  assert np.all(np.isnan(out[[0, 2]])) and np.all(np.isfinite(out[1]))
  with pytest.raises(ValueError, match='position -1 is negative'):
    learned.embed(params, np.array([-1]))


def test_xpos_refuses_positions_past_its_float32_range():
  xpos = encoders.make('xpos')
  params = xpos.init(jax.random.key(0), 1, head_dim=8)
  x = jnp.ones((1, 2, 1, 8))
  assert np.all(np.isfinite(xpos.rotate_keys(params, x, jnp.array([[0, 60_000]]))))
  with pytest.raises(ValueError, match='overflows float32'):
    xpos.rotate_keys(params, x, jnp.array([[0, 80_000]]))


def test_sinusoids_keep_their_phase_at_large_positions():
  """Exact phases: at 1e8 and 2^30 - 1 every feature matches the float64 formula (float32 products collapse)."""
  positions = np.array([0, 12_345, 10**8, validation.MAX_POSITION])
  got = np.asarray(encoders.absolute.sinusoids(positions, 16))
  inverse_wavelengths = 10_000.0 ** -(2.0 * np.arange(8) / 16)
  angles = positions[:, None].astype(np.float64) * inverse_wavelengths
  want = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(len(positions), 16)
  np.testing.assert_allclose(got, want, atol=2e-6)
