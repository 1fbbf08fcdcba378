"""Randomized positions: the sampled positions, and a wrapper the attention layer cannot tell from its base."""

from __future__ import annotations

import copy
import dataclasses
import functools
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders
from relpos_jax.encoders import contract
from relpos_jax.encoders.randomized import Randomized
from relpos_jax.nn import attend, call, terms


@dataclasses.dataclass(frozen=True)
class _Table(contract.AbsoluteEncoder):
  """A tiny absolute encoder (unregistered) with a bounded table, for the ABSOLUTE delegation."""

  size: int = 4096

  @property
  def max_length(self):
    return self.size

  def init_params(self, rng, dims_):
    return {'table': jax.random.normal(rng, (self.size, dims_.model_dim))}

  def embed(self, params, positions):
    return jnp.take(params['table'], positions, axis=0)


BASES = {
    'rope': lambda: encoders.make('rope', scaling='yarn', factor=4.0),
    'xpos': lambda: encoders.make('xpos'),
    't5': lambda: encoders.make('t5', bidirectional=False),
    'distance': lambda: encoders.make('distance'),
    'shaw_vector': lambda: encoders.make('shaw_vector', max_distance=3),
    'transformer_xl': lambda: encoders.make('transformer_xl', max_distance=7),
    'absolute': lambda: _Table(),
}


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def _train_positions(encoder, rng, batch, length):
  return encoder.train_positions(rng, batch, length)


def test_sampled_positions_are_sorted_unique_and_in_range():
  wrapper = encoders.make('randomized', base=encoders.make('rope'), max_position=100)
  positions = np.asarray(_train_positions(wrapper, jax.random.PRNGKey(0), 64, 40))
  assert positions.shape == (64, 40) and positions.dtype == np.int32
  assert np.all(np.diff(positions, axis=-1) > 0)  # Sorted and without repeats.
  assert positions.min() >= 0 and positions.max() < 100
  assert positions.max() > 90  # The range is used, not just 0..39.
  assert len({tuple(row) for row in positions}) == 64  # Each example draws its own subset.


def test_sampling_is_reproducible_from_the_rng_and_differs_across_rngs():
  wrapper = encoders.make('randomized', base=encoders.make('rope'))
  a = _train_positions(wrapper, jax.random.PRNGKey(1), 4, 16)
  b = _train_positions(wrapper, jax.random.PRNGKey(1), 4, 16)
  c = _train_positions(wrapper, jax.random.PRNGKey(2), 4, 16)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)
  np.testing.assert_array_equal(wrapper.train_positions(jax.random.PRNGKey(1), 4, 16), a)  # Eager = jit.


def test_each_position_is_drawn_uniformly():
  """Without replacement from [0, 16), 4 at a time: every position appears with probability 4/16."""
  wrapper = encoders.make('randomized', base=encoders.make('t5'), max_position=16)
  positions = np.asarray(_train_positions(wrapper, jax.random.PRNGKey(3), 4000, 4))
  counts = np.bincount(positions.ravel(), minlength=16)
  expected, sd = 4000 * 4 / 16, np.sqrt(4000 * 0.25 * 0.75)
  assert np.all(np.abs(counts - expected) < 5 * sd), counts


def test_full_length_draws_every_position():
  wrapper = encoders.make('randomized', base=encoders.make('rope'), max_position=12)
  np.testing.assert_array_equal(
      _train_positions(wrapper, jax.random.PRNGKey(0), 3, 12), np.broadcast_to(np.arange(12), (3, 12))
  )


def test_too_long_a_sequence_raises_naming_both_numbers():
  wrapper = encoders.make('randomized', base=encoders.make('rope'), max_position=64)
  with pytest.raises(ValueError, match=r'length=65.*max_position=64'):
    wrapper.train_positions(jax.random.PRNGKey(0), 2, 65)
  for bad in (dict(batch=0), dict(length=0), dict(length=3.0)):
    args = {'batch': 2, 'length': 8, **bad}
    name, value = next(iter(bad.items()))
    with pytest.raises(ValueError, match=f'{name}={value!r}'):
      wrapper.train_positions(jax.random.PRNGKey(0), **args)


@pytest.mark.parametrize('name', sorted(BASES))
def test_the_layer_sees_the_base(name):
  """The smaller contract: a wrapper is COMBINED with one child; what attention and the model read is the base."""
  base = BASES[name]()
  wrapper = Randomized(base)
  assert contract.train_positions(base, jax.random.PRNGKey(0), 2, 8) is None
  assert wrapper.kind is encoders.Kind.COMBINED and wrapper.children() == (base,)
  assert contract.leaves(wrapper) == contract.leaves(base) == (base,)
  assert terms.parts.attention_parts(wrapper) == terms.parts.attention_parts(base)
  assert terms.parts.input_parts(wrapper) == terms.parts.input_parts(base)
  for prop in ('carries_position', 'is_relative'):
    assert getattr(wrapper, prop) == getattr(base, prop), prop


def _init(encoder):
  return encoder.init(jax.random.PRNGKey(5), 2, head_dim=8, model_dim=6)


@pytest.mark.parametrize('name', sorted(BASES))
def test_attention_with_the_wrapper_equals_attention_with_the_base(name):
  base = BASES[name]()
  wrapper = Randomized(base, max_position=512)
  params = _init(wrapper)
  jax.tree_util.tree_map(np.testing.assert_array_equal, params, _init(base))  # Same params, same structure.
  x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 5, 2, 8)), jnp.float32)
  positions = jnp.asarray([[1, 7, 30, 31, 200], [0, 2, 4, 8, 16]])
  if base.kind is encoders.Kind.ABSOLUTE:
    np.testing.assert_array_equal(
        terms.parts.input_embedding(terms.parts.input_parts(wrapper), [params], positions),
        terms.parts.input_embedding(terms.parts.input_parts(base), [params], positions),
    )
    wrapper.check_positions(4096)
    with pytest.raises(ValueError, match='max_length=4096'):
      wrapper.check_positions(4097)
    return

  def attention(encoder, explicit):
    parts = terms.parts.attention_parts(encoder)
    q, k = terms.parts.rotate(parts, [params], x, x, positions, positions)
    given = call.Positions(query=positions, key=positions) if explicit else None
    return attend(
        call.AttentionInputs.checked(q, k, x, given), parts, [params], call.AttentionSettings.checked(causal=True)
    )

  for explicit in (False, True):
    np.testing.assert_array_equal(attention(wrapper, explicit), attention(base, explicit))
  if name == 'xpos':
    with pytest.raises(ValueError, match='rotate_queries or rotate_keys'):
      contract.leaves(wrapper)[0].rotate(params, x, positions)


def test_wrapper_is_hashable_a_static_argument_and_copyable():
  wrapper = encoders.make('randomized', base=encoders.make('rope'), max_position=64)
  same = Randomized(encoders.make('rope'), 64)
  assert wrapper == same and hash(wrapper) == hash(same)
  assert wrapper != Randomized(encoders.make('rope'), 65)
  assert copy.deepcopy(wrapper) == wrapper and pickle.loads(pickle.dumps(wrapper)) == wrapper
  params = _init(wrapper)
  x = jnp.ones((1, 3, 2, 8))
  rotate = lambda enc, p, x_, pos: terms.parts.rotate(terms.parts.attention_parts(enc), [p], x_, x_, pos, pos)[0]
  out = jax.jit(rotate, static_argnums=0)(wrapper, params, x, jnp.asarray([[0, 5, 60]]))
  assert out.shape == x.shape


def test_registered_with_base_first():
  assert 'randomized' in encoders.names()
  assert [f.name for f in dataclasses.fields(Randomized)] == ['base', 'max_position']
  assert Randomized(encoders.make('rope')).max_position == 2048
  assert Randomized(encoders.make('rope')).name == 'randomized'


@pytest.mark.parametrize(
    'hparams,named',
    [
        (dict(base='rope'), "base='rope'"),
        (dict(base=encoders.encoder_class('rope')), 'base=<class'),
        (dict(base=Randomized(encoders.make('rope'))), 'not itself randomized'),
        (
            dict(base=encoders.combine(Randomized(encoders.make('t5')), encoders.make('rope'))),
            'holds no randomized part',
        ),
        (dict(base=encoders.make('rope'), max_position=0), 'max_position=0'),
        (dict(base=encoders.make('rope'), max_position=True), 'max_position=True'),
        (dict(base=encoders.make('rope'), max_position=20.5), 'max_position=20.5'),
        (dict(base=_Table(size=100)), r'max_position=2048.*<= 100'),
    ],
)
def test_invalid_hyperparameters_name_the_value(hparams, named):
  with pytest.raises(ValueError, match=named):
    encoders.make('randomized', **hparams)
