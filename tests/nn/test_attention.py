"""RelativeMultiHeadAttention and the attention core: every encoder kind, efficient paths vs references."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.encoders import contract
from relpos_jax.nn import RelativeMultiHeadAttention, attend, terms
from relpos_jax.nn import call
from relpos_jax.nn import functional
from relpos_jax.nn.attention import variable_values

B, L, DIM, HEADS = 2, 7, 16, 2


def _causal_only(encoder):
  return any(p.requires_causal for p in contract.leaves(encoder))


def _layer(encoder, *, causal=True, seed=0, **kw):
  return RelativeMultiHeadAttention(HEADS, DIM, encoder, causal=causal, rngs=nnx.Rngs(seed), **kw)


def _x(seed=1, batch=B, length=L):
  return jax.random.normal(jax.random.key(seed), (batch, length, DIM))


# ----------------------------------------------------------------------------------------------------------
# Per encoder case: causality and padding (cached decoding: test_decode.py; dot_product_attention ==
# einsum: test_dpa.py).

# Jitted entry points (one compilation per case instead of one per primitive in eager mode).
_forward = nnx.jit(
    lambda layer, x, padding_mask=None, positions=None: layer(x, padding_mask=padding_mask, positions=positions)
)
_grad = nnx.jit(nnx.grad(lambda layer, x, padding_mask: jnp.sum(layer(x, padding_mask=padding_mask) ** 2)))


def test_layer_is_causal_and_masks_padding(attention_case):
  _, encoder = attention_case
  layer = _layer(encoder)
  x = _x()
  no_padding = jnp.ones((B, L), bool)  # Always pass a mask: one compilation serves every forward below.
  full = _forward(layer, x, no_padding)
  assert bool(jnp.all(jnp.isfinite(full)))

  # Causality: changing token t never changes the outputs before t.
  t = 4
  np.testing.assert_array_equal(_forward(layer, x.at[:, t].add(3.0), no_padding)[:, :t], full[:, :t])

  # Padding: padded tokens never reach real ones; rows with no visible key (left padding under the causal
  # mask) are finite.
  padding = jnp.array([[True] * L, [False] * 2 + [True] * (L - 2)])
  y = _forward(layer, x, padding)
  y_other = _forward(layer, x.at[1, :2].set(100.0), padding)
  assert bool(jnp.all(jnp.isfinite(y)))
  np.testing.assert_allclose(y[1, 2:], y_other[1, 2:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('name', ['t5', 'fire', 'rope', 'shaw_vector', 'transformer_xl'])
def test_gradients_are_finite_with_padding(name):
  layer = _layer(encoders.make(name))
  padding = jnp.array([[True] * L, [False] * 2 + [True] * (L - 2)])
  grads = _grad(layer, _x(), padding)
  leaves = jax.tree.leaves(grads)
  assert leaves and all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  assert any(bool(jnp.any(g != 0)) for g in leaves)


# ----------------------------------------------------------------------------------------------------------
# Masks and numerics.


def test_fully_masked_query_rows_give_zero_not_nan():
  q = jnp.ones((1, 3, 1, 4), jnp.bfloat16)
  mask = jnp.zeros((1, 1, 3, 3), bool).at[..., 1:, :].set(True)  # Row 0 sees nothing.
  for implementation in ('xla', 'einsum'):
    out = jax.jit(
        lambda q: attend(
            call.AttentionInputs.checked(q, q, q, mask=mask),
            (),
            [],
            call.AttentionSettings.checked(implementation=implementation),
        )
    )(q)
    assert bool(jnp.all(jnp.isfinite(out.astype(jnp.float32))))
    assert bool(jnp.all(out[:, 0] == 0))


@pytest.mark.parametrize(
    'name',
    [
        't5',
        'rope',
        'shaw_vector',
        'transformer_xl',
        'alibi',
        'cope',
        'fox',
        'path',
        'stick_breaking',
        'dape(kerple_log, version=2)',
        'rope + ssmax',
    ],
)
def test_bfloat16_follows_float32(name):
  encoder = encoders.from_spec(name)
  x = _x()
  mask = jnp.ones((B, L), bool)
  ref = _forward(_layer(encoder), x, mask)
  low = _forward(_layer(encoder, dtype='bfloat16'), x.astype(jnp.bfloat16), mask)
  assert low.dtype == jnp.bfloat16
  np.testing.assert_allclose(low.astype(jnp.float32), ref, atol=0.1, rtol=0.05)


# ----------------------------------------------------------------------------------------------------------
# Debug checks, shared params, validation.


@dataclasses.dataclass(frozen=True)
class _LyingToeplitz(contract.ScalarBiasEncoder):
  """Claims to be Toeplitz but its pair bias depends on the query position: debug_checks must notice."""

  def bias(self, params, rel):
    return jnp.asarray(rel, jnp.float32)[..., None] * jnp.ones((contract.dims(params).num_heads,))

  def pair_bias(self, params, q_pos, k_pos):
    return self.bias(params, k_pos - q_pos) + jnp.asarray(q_pos, jnp.float32)[..., None] ** 2


def test_debug_checks_catch_a_bias_that_is_not_toeplitz():
  x, mask = _x(), jnp.ones((B, L), bool)
  jax.block_until_ready(_forward(_layer(encoders.make('t5'), debug_checks=True), x, mask))
  with pytest.raises(Exception, match='not Toeplitz'):
    jax.block_until_ready(_forward(_layer(_LyingToeplitz(), debug_checks=True), x, mask))
  # Without debug_checks nothing is inspected.
  jax.block_until_ready(_forward(_layer(_LyingToeplitz()), x, mask))


def test_layer_without_own_position_params_takes_them_from_the_caller():
  encoder = encoders.make('t5')
  owner = _layer(encoder)
  borrower = _layer(encoder, own_position_params=False)
  assert borrower.position_params is None
  x = _x()
  with pytest.raises(ValueError, match='position_params'):
    borrower(x)
  # Same seed: the projections match (the position params are drawn after them).
  shared = [variable_values(p) for p in owner.position_params]
  np.testing.assert_allclose(borrower(x, position_params=shared), owner(x), atol=1e-6)
  bias = terms.parts.scalar_bias(borrower.parts, shared, L, L)
  np.testing.assert_allclose(borrower(x, position_params=shared, position_bias=bias), owner(x), atol=1e-6)


def test_layer_validation_names_the_bad_value():
  t5 = encoders.make('t5')
  with pytest.raises(ValueError, match='num_heads=0'):
    RelativeMultiHeadAttention(0, DIM, t5, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match='model_dim=15 is not divisible'):
    RelativeMultiHeadAttention(2, 15, t5, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="implementation='flash'"):
    RelativeMultiHeadAttention(2, DIM, t5, implementation='flash', rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="dtype='float16'"):
    RelativeMultiHeadAttention(2, DIM, t5, dtype='float16', rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match='encoder='):
    RelativeMultiHeadAttention(2, DIM, 't5', rngs=nnx.Rngs(0))
  layer = _layer(t5)
  with pytest.raises(ValueError, match=r'x must be \(batch, length, 16\)'):
    layer(jnp.ones((2, 5, 8)))
  with pytest.raises(ValueError, match='positions must be an int array'):
    layer(_x(), positions=jnp.zeros((B, L), jnp.float32))
  with pytest.raises(ValueError, match='padding/key mask'):
    layer(_x(), padding_mask=jnp.ones((B, L + 1), bool))
  if 'xpos' in encoders.names():
    with pytest.raises(ValueError, match='causal-only'):
      _layer(encoders.make('xpos'), causal=False)


def test_vmap_and_jit_of_the_layer():
  layer = _layer(encoders.make('shaw_vector', max_distance=2))
  graphdef, state = nnx.split(layer)

  def one(x):
    return nnx.merge(graphdef, state)(x[None])[0]

  x = _x()
  batched = jax.jit(jax.vmap(one))(x)
  chex.assert_trees_all_close(batched, _forward(layer, x, jnp.ones((B, L), bool)), atol=1e-5)


def test_attend_rejects_half_given_positions():
  q = jnp.ones((1, 3, 1, 4))
  with pytest.raises(ValueError, match='both q_positions and k_positions'):
    attend(call.AttentionInputs.checked(q, q, q, call.Positions(query=jnp.zeros((1, 3), jnp.int32))), (), [])
  with pytest.raises(ValueError, match="implementation='flash'"):  # 'pallas' is an implementation
    functional.check_implementation('flash')
