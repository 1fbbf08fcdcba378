"""Every size, count and scale of every registered encoder is bounded, values whose results overflow float32 are
refused, initial parameters are finite, and the encoder methods check their positions."""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import validation
from relpos_jax.encoders import contract, registry
from relpos_jax.encoders.spec import from_spec
from relpos_jax.nn.models import ModelConfig


def _numeric_fields():
  """(encoder name, field, huge value) for every int, float or numeric-tuple field of every registered encoder:
  derived from the dataclasses, so a new encoder is covered without editing this test."""
  cases = []
  for name in registry.names():
    for field in dataclasses.fields(registry.encoder_class(name)):
      annotation = str(field.type)
      if not field.init or 'Encoder' in annotation:
        continue
      if annotation.startswith('tuple'):
        cases.append((name, field.name, (1, 10**12) if 'int' in annotation else (1.0, 1e30)))
      elif 'int' in annotation:
        cases.append((name, field.name, 10**12))
      elif 'float' in annotation:
        cases.append((name, field.name, 1e30))
  return cases


@pytest.mark.parametrize('name,field,huge', _numeric_fields())
def test_a_huge_value_of_any_size_count_or_scale_is_a_clear_error(name, field, huge):
  """Refused at construction, naming the field: not a long run, an allocation or NaN later."""
  encoder = registry.make_default(name)
  started = time.perf_counter()
  with pytest.raises(ValueError, match=rf'{name}: {field}=.* is invalid; allowed: '):
    dataclasses.replace(encoder, **{field: huge})
  assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    'spec,field',
    [
        ('dape(alibi, version=2, kernel_size=1000001)', 'kernel_size'),  # minutes at 4 GB on length 8
        ('dape(alibi, version=2, kernel_size=65)', 'kernel_size'),
        ('cope(npos=1000000000)', 'npos'),  # 32 GB at init
        ('path(block_size=100000)', 'block_size'),
        ('rerope(rope, window=1000000000000)', 'window'),  # JAX's OverflowError
        ('rerope(rope, window=4096, leak=1000000000)', 'leak'),
        ('rerope(rope, window=1048576, leak=2048)', 'leak'),  # each under the bound, their product over it
        ('rope(scaling="yarn", factor=4.0, attention_factor=1e30)', 'attention_factor'),  # NaN outputs
        ('rope(scaling="yarn", factor=4.0, attn_factor=1e300)', 'attn_factor'),
        ('rope(scaling="yarn", factor=4.0, mscale=1e300, mscale_all_dim=1e-300)', 'mscale'),
        (
            'rope(scaling="yarn", factor=4.0, mscale=1000.0, mscale_all_dim=1e-9, attn_factor=1000.0)',
            'attention_factor',
        ),
        ('monotone(t5(bidirectional=False), init_slope=1e30)', 'init_slope'),  # non-finite parameters
        ('multiscale(scales=(1, 4, 1000000000000))', 'scales'),
    ],
)
def test_the_settings_the_hostile_round_found_are_refused(spec, field):
  with pytest.raises(ValueError, match=rf': {field}=.* is invalid; allowed: '):
    from_spec(spec)


def test_attention_window_beyond_the_int32_positions_is_a_message():
  with pytest.raises(ValueError, match=r'attention_window=1000000000000 is invalid.*\[1, 1073741823\]'):
    ModelConfig(vocab_size=8, encoder='rope', attention_window=10**12)


def test_values_at_the_bounds_give_finite_parameters_and_outputs():
  """Monotone's initial decrements went through expm1, which overflowed from init_slope ~ 700 on."""
  encoder = from_spec(f'monotone(t5(bidirectional=False), init_slope={validation.MAX_SCALE})')
  params = encoder.init(jax.random.key(0), 2)
  assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(params))
  assert np.isfinite(np.asarray(encoder.bias(params, jnp.arange(-50, 1)))).all()
  rope = from_spec('rope(scaling="yarn", factor=4.0, attention_factor=1000.0)')
  from relpos_jax.nn.attention import RelativeMultiHeadAttention

  layer = RelativeMultiHeadAttention(2, 16, rope, causal=True, rngs=nnx.Rngs(0))
  assert np.isfinite(np.asarray(layer(jax.random.normal(jax.random.key(1), (1, 6, 16))))).all()


@dataclasses.dataclass(frozen=True)
class _Overflowing(contract.ScalarBiasEncoder):
  """An encoder whose initial parameter overflows (what monotone did with a large init_slope)."""

  def init_params(self, rng, dims_):
    return {'slope': jnp.full((dims_.num_heads,), np.float32(3e38)) * 10}

  def bias(self, params, rel):
    return jnp.zeros(jnp.shape(rel) + (2,))


def test_non_finite_initial_parameters_are_refused_at_init():
  with pytest.raises(ValueError, match=r"its initial parameter \['slope'\] is not finite"):
    _Overflowing().init(jax.random.key(0), 2)
  jax.eval_shape(lambda key: _Overflowing().init(key, 2), jax.random.key(0))  # traced: not inspected


def test_encoder_methods_check_their_positions_at_entry():
  """Item 17: these returned NaN (the public functions checked; the methods below them did not)."""
  t5 = from_spec('t5')
  with pytest.raises(ValueError, match=r't5: rel holds -2147483648, outside the supported range'):
    t5.bias(t5.init(jax.random.key(0), 2), rel=-(2**31))
  fire = from_spec('fire')
  with pytest.raises(ValueError, match=r'fire: q_pos holds 2147483647, outside the supported range'):
    fire.pair_bias(fire.init(jax.random.key(0), 2), q_pos=2**31 - 1, k_pos=-1)
  rope = from_spec('rope')
  with pytest.raises(ValueError, match='rope: positions holds 2147483647'):
    rope.rotate(rope.init(jax.random.key(0), 2, head_dim=8), jnp.ones((1, 1, 2, 8)), np.array([[2**31 - 1]]))
  assert jax.jit(lambda rel: t5.bias(t5.init(jax.random.key(0), 2), rel))(jnp.arange(3)).shape == (3, 2)


@pytest.mark.parametrize(
    'name', [n for n in registry.names() if registry.encoder_class(n).kind is contract.Kind.SCALAR_BIAS]
)
def test_every_scalar_bias_refuses_out_of_range_positions_instead_of_returning_nan(name):
  encoder = registry.make_default(name)
  if encoder.kind is not contract.Kind.SCALAR_BIAS:
    pytest.skip('not a scalar bias in its default form')
  params = encoder.init(jax.random.key(0), 2, head_dim=4, model_dim=8)
  with pytest.raises(ValueError, match='outside the supported range'):
    encoder.pair_bias(params, np.array([2**31 - 1]), np.array([0]))
  if encoder.is_toeplitz:
    with pytest.raises(ValueError, match='outside the supported range'):
      encoder.bias(params, np.array([-(2**31)]))
