"""Compositions that would mean nothing are refused where they are built, with the reason;
the flags the rules read (reads_positions, one_rotation) are checked against what the encoders compute."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax.encoders import contract, registry
from relpos_jax.encoders.spec import from_spec
from relpos_jax.nn.attention import RelativeMultiHeadAttention
from relpos_jax.train import transfer


def _refused(spec: str, *reasons: str) -> str:
  with pytest.raises(ValueError) as caught:
    from_spec(spec)
  message = str(caught.value)
  for reason in reasons:
    assert reason in message, message
  return message


@pytest.mark.parametrize(
    'spec',
    [
        'self_extend(rope) + rerope(rope)',  # item 6: the first remap was dropped silently
        'rerope(rope) + rope',  # item 7: RoPE at doubled positions
        'self_extend(rope) + xpos',
        'dual_chunk(rope) + pope',
    ],
)
def test_one_rotary_part_per_sum_counting_the_rotary_inside_a_remap(spec):
  _refused(spec, 'at most one rotary part (counting the rotary inside a remap', 'got 2')


def test_two_remaps_of_scalar_biases_are_the_sum_of_their_biases():
  """The documented meaning of two remaps in one sum: each base's bias at its own remapped positions, added."""
  layer_of = lambda spec: RelativeMultiHeadAttention(1, 4, from_spec(spec), causal=True, rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(1), (1, 7, 4))
  both = layer_of('rerope(alibi, window=2) + self_extend(alibi, group_size=2, window=3)')
  first = layer_of('rerope(alibi, window=2)')
  second = layer_of('self_extend(alibi, group_size=2, window=3)')
  logits = {}
  for name, layer in (('both', both), ('first', first), ('second', second)):
    layer.query.kernel[...] = first.query.kernel[...]
    layer.key.kernel[...] = first.key.kernel[...]
    layer.value.kernel[...] = jnp.eye(4)
    layer.out.kernel[...] = jnp.eye(4)
    logits[name] = layer(x)
  alibi = from_spec('alibi')
  q = x @ first.query.kernel[...]
  k = x @ first.key.kernel[...]
  positions = jnp.arange(7)[None]
  bias = 0.0
  for remap in (from_spec('rerope(alibi, window=2)'), from_spec('self_extend(alibi, group_size=2, window=3)')):
    part = jnp.zeros((1, 7, 7))
    for s in remap.score_sets(positions, positions):
      b = alibi.pair_bias(alibi.init(jax.random.key(0), 1), s.q_positions[..., :, None], s.k_positions[..., None, :])
      part = jnp.where(s.region, b[..., 0], part)
    bias = bias + part
  scores = q @ k[0].T / 2.0 + bias
  scores = jnp.where(jnp.tril(jnp.ones((7, 7), bool)), scores, -jnp.inf)
  expected = jax.nn.softmax(scores, axis=-1) @ x
  np.testing.assert_allclose(np.asarray(logits['both']), np.asarray(expected), atol=1e-5)
  assert not np.allclose(np.asarray(logits['both']), np.asarray(logits['first']), atol=1e-3)


@pytest.mark.parametrize('remap', ['self_extend', 'rerope', 'dual_chunk'])
@pytest.mark.parametrize('base', ['xpos', 'pope'])
def test_a_remap_refuses_a_rotary_base_whose_queries_and_keys_rotate_differently(remap, base):
  """Item 8: these passed the parser and config validation, then failed in the forward ("rotate() is
  ambiguous") or (pope) silently gave queries the keys' phase bias."""
  message = _refused(f'{remap}({base})', f'{remap}: base={base} is invalid', 'rotates queries and keys with one map')
  assert 'xpos, alibi' not in message  # The allowed list no longer offers xpos.


def test_the_remaps_accept_rope_and_scalar_biases():
  for spec in ('self_extend(rope)', 'rerope(rope, leak=4)', 'dual_chunk(alibi)', 'rerope(t5)'):
    from_spec(spec)


@pytest.mark.parametrize('other', ['cope', 'shaw_vector', 'path', 'transformer_xl'])
def test_pope_is_refused_beside_parts_with_head_dim_vectors(other):
  """Item 9: JAX shape errors once the model ran, before."""
  _refused(f'pope + {other}', f'no part with vectors of head_dim features ({other}) beside pope')


def test_pope_beside_a_scalar_bias_is_a_sum():
  from_spec('pope + alibi')
  from_spec('pope + fox')


@pytest.mark.parametrize('base', ['fox', 'cope', 'path', 'nope', 'stick_breaking', 'ssmax', 'logn'])
def test_randomized_refuses_a_base_that_reads_no_positions(base):
  """Item 10: a no-op wrapper hides a config mistake."""
  _refused(f'randomized({base})', f'randomized: base={base} is invalid', 'reads none')


@pytest.mark.parametrize('remap', ['self_extend', 'rerope', 'dual_chunk'])
def test_a_remap_refuses_a_base_that_reads_no_positions(remap):
  _refused(f'{remap}(nope)', 'nope reads none, so remapping them changes nothing')


def test_wrappers_of_encoders_that_read_positions_stay_accepted():
  for spec in ('randomized(fox(bias_only=True))', 'randomized(nope + rope)', 'randomized(t5)'):
    from_spec(spec)


def _layer_output(spec: str, positions):
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    layer = RelativeMultiHeadAttention(2, 8, from_spec(spec), causal=True, rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(2), (1, 5, 8))
  return np.asarray(layer(x, positions=positions))


@pytest.mark.parametrize('name', registry.names())
def test_reads_positions_is_what_the_layer_computes(name):
  """An encoder that says it reads no positions gives the same output at other positions; one that says it
  does, another (the flag the wrapper rules read is checked, so a new encoder cannot set it wrongly)."""
  encoder = registry.make_default(name)
  if encoder.kind is contract.Kind.ABSOLUTE:
    pytest.skip('absolute parts act at the model input, not in the layer')
  near = _layer_output(repr(encoder), jnp.arange(5)[None])
  far = _layer_output(repr(encoder), jnp.array([[0, 3, 9, 40, 41]]))
  assert np.allclose(near, far, atol=1e-6) == (not encoder.reads_positions)


@pytest.mark.parametrize(
    'name', [n for n in registry.names() if registry.encoder_class(n).kind is contract.Kind.ROTARY]
)
def test_one_rotation_is_what_the_encoder_computes(name):
  """`one_rotation`: rotate() is rotate_queries() and rotate_keys() both (what a remap relies on)."""
  encoder = registry.make(name)
  params = encoder.init(jax.random.key(0), 2, head_dim=8)
  if 'phase_bias' in params:
    params = {**params, 'phase_bias': -0.5 * jnp.ones_like(params['phase_bias'])}  # PoPE's trained state
  x = jax.random.normal(jax.random.key(1), (1, 4, 2, 8))
  positions = jnp.arange(4)[None] + 3
  try:
    rotated = np.asarray(encoder.rotate(params, x, positions))
  except ValueError:  # xPos: rotate() is refused as ambiguous, so there is no one map.
    rotated = None
  same = rotated is not None and all(
      np.allclose(rotated, np.asarray(side(params, x, positions)), atol=1e-6)
      for side in (encoder.rotate_queries, encoder.rotate_keys)
  )
  assert same == encoder.one_rotation


def test_a_transfer_to_another_encoder_is_refused_even_with_equal_parameter_trees():
  """Item 10: alibi and rope both have no parameters, so the parameter check passed."""
  with pytest.raises(ValueError, match="'rope' is not an inference-time extension of the training encoder 'alibi'"):
    transfer.check_compatible({}, {}, train_spec='alibi', eval_spec='rope')
  with pytest.raises(ValueError, match='not an inference-time extension'):
    transfer.check_same_encoders('sinusoidal + t5', 't5')
  for train, evaluated in (
      ('rope', 'rope(scaling="yarn", factor=16.0, original_max_position=64)'),
      ('rope', 'self_extend(rope, group_size=4, window=8)'),
      ('t5', 'rerope(t5, window=8)'),
      ('randomized(rope)', 'rope'),
      ('(rope, nope)', '(rerope(rope), nope)'),
  ):
    transfer.check_same_encoders(train, evaluated)
  with pytest.raises(ValueError, match='not an inference-time extension'):
    transfer.check_same_encoders('(rope, nope)', '(nope, rope)')


def test_randomized_in_a_sum_is_checked_as_the_wrapper_is():
  """Item 11: the nested form was refused, the sum read the table out of range (NaN at step 1)."""
  _refused(
      'randomized(rope, max_position=4096) + learned(max_length=64)',
      'randomized max_position=4096 <= 64, the max_length of learned',
  )
  from_spec('randomized(rope, max_position=64) + learned(max_length=64)')


def test_error_messages_show_encoders_as_specs():
  """Item 20: the message embedded every field of every dataclass (up to ~1,000 characters)."""
  message = _refused('rope(scaling="linear", factor=2.0) + rope')
  assert message.startswith("combined: parts=(rope(scaling='linear', factor=2.0), rope) is invalid")
  assert len(message) < 300
  assert repr(from_spec('rerope(rope, window=4) + alibi')) == 'rerope(rope, window=4) + alibi'
