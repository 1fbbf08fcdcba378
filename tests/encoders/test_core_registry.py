"""Every registered encoder, found by iterating the registry: jit with the encoder static, and gradients.

An encoder another engineer registers later is covered automatically (the Toeplitz properties of scalar
biases are in test_core_properties.py). Gradients are taken under jit: eager mode would compile every primitive.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import encoders
from relpos_jax.encoders import Kind
from relpos_jax.encoders.combine import combine

HEAD_DIM = 8
MODEL_DIM = 16


def default_instance(name: str) -> encoders.Encoder:
  return encoders.registry.make_default(name)


@functools.lru_cache(maxsize=None)
def init_params(encoder, num_heads: int, seed: int = 0):
  return encoder.init(jax.random.key(seed), num_heads, head_dim=HEAD_DIM, model_dim=MODEL_DIM)


ALL = encoders.names()


def test_the_registry_holds_the_core_encoders():
  for name in (
      'distance',
      'shaw',
      'shaw_vector',
      't5',
      'piecewise',
      'multiscale',
      'sinusoidal',
      'learned',
      'absolute_score',
  ):
    assert name in ALL


# --- jit with the encoder as a static argument, by kind ------------------------------------------

CONTENT_KINDS = (Kind.CONTEXTUAL, Kind.SCORE_TRANSFORM, Kind.NORMALIZER, Kind.TEMPERATURE)


def _content_outputs(enc, params, length: int = 6):
  """The entry point of a kind that reads the content, on a random causal problem: a list of arrays."""
  keys = jax.random.split(jax.random.key(7), 4)
  q = jax.random.normal(keys[0], (2, length, 2, HEAD_DIM))
  k = jax.random.normal(keys[1], (2, length, 2, HEAD_DIM))
  x = jax.random.normal(keys[2], (2, length, MODEL_DIM))
  valid = (jnp.arange(length)[None, :] <= jnp.arange(length)[:, None])[None, None]
  key_mask = jnp.ones((2, length), bool)
  q_index = jnp.arange(length, dtype=jnp.int32)
  if enc.kind is Kind.TEMPERATURE:
    return [enc.temperature(params, (q_index + 1.0)[None], q_index)]
  scores = jax.random.normal(keys[3], (2, 2, length, length))
  if enc.kind is Kind.SCORE_TRANSFORM:
    bias = relpos_jax.bias_matrix(enc.base, params['base'], length, length)
    return [enc.transform(params, scores, bias, valid)]
  features = enc.token_features(params, x) if enc.kind is Kind.CONTEXTUAL else None
  ctx = encoders.AttentionContext(
      query=q, key=k, features=features, valid=valid, key_mask=key_mask, q_index=q_index, scale=HEAD_DIM**-0.5
  )
  if enc.kind is Kind.NORMALIZER:
    return [o for o in enc.weights(params, scores, ctx) if o is not None]
  return [jnp.where(valid, enc.score_term(params, ctx), 0.0)]


CASES = [(n, default_instance(n)) for n in ALL] + [
    ('sinusoidal + t5', combine(encoders.make('sinusoidal'), encoders.make('t5'))),
    (
        'absolute_score(learned) + multiscale',
        combine(
            encoders.make('absolute_score', base=encoders.make('learned', max_length=64)), encoders.make('multiscale')
        ),
    ),
]
IDS = [label for label, _ in CASES]


def _check_jit(enc, params, label):
  """Runs the kind's entry points under jax.jit with the encoder static; checks them against another path."""
  rng = np.random.default_rng(0)
  if enc.kind is Kind.SCALAR_BIAS:
    matrix = jax.jit(relpos_jax.bias_matrix, static_argnums=(0, 2, 3))
    pairs = jax.jit(relpos_jax.bias_at_positions, static_argnums=(0,))
    expected = pairs(enc, params, jnp.arange(3) + 4, jnp.arange(7))
    for q_offset in (4, jnp.int32(4)):  # a Python int, and a traced offset
      out = matrix(enc, params, 3, 7, q_offset)
      assert out.shape == (params['dims'].num_heads, 3, 7), label
      np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6, err_msg=label)
    return
  rel = relpos_jax.relative_positions(4, 6)
  if enc.kind is Kind.VECTOR_RELATIVE:
    for method in ('key_embeddings', 'value_embeddings'):
      eager = getattr(enc, method)(params, rel)
      if eager is None:
        continue
      jitted = jax.jit(lambda e, p, r, m=method: getattr(e, m)(p, r), static_argnums=0)(enc, params, rel)
      np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-6, err_msg=f'{label}.{method}')
    return
  if enc.kind is Kind.ROTARY:
    x = jnp.asarray(rng.normal(size=(2, 6, 2, HEAD_DIM)), jnp.float32)
    positions = jnp.broadcast_to(jnp.arange(6), (2, 6))
    for method in ('rotate_queries', 'rotate_keys'):
      jitted = jax.jit(lambda e, p, x, q, m=method: getattr(e, m)(p, x, q), static_argnums=0)
      eager = getattr(enc, method)(params, x, positions)
      np.testing.assert_allclose(
          jitted(enc, params, x, positions), eager, rtol=1e-5, atol=1e-5, err_msg=f'{label}.{method}'
      )
    return
  if enc.kind is Kind.ABSOLUTE:
    positions = jnp.arange(6)
    jitted = jax.jit(lambda e, p, q: e.embed(p, q), static_argnums=0)(enc, params, positions)
    np.testing.assert_allclose(jitted, enc.embed(params, positions), rtol=1e-5, atol=1e-6, err_msg=label)
    return
  if enc.kind is Kind.POSITION_REMAP:
    q_pos = jnp.broadcast_to(jnp.arange(5) + 3, (2, 5))
    k_pos = jnp.broadcast_to(jnp.arange(8), (2, 8))
    jitted = jax.jit(lambda e, q, k: e.score_sets(q, k), static_argnums=0)(enc, q_pos, k_pos)
    for a, b in zip(jax.tree.leaves(jitted), jax.tree.leaves(enc.score_sets(q_pos, k_pos))):
      np.testing.assert_array_equal(a, b, err_msg=label)
    return _check_jit(enc.base, params, f'{label} > base')
  if enc.kind is Kind.COMBINED:
    for part, part_params in enc.terms(params):
      _check_jit(part, part_params, f'{label} > {type(part).__name__}')
    return
  if enc.kind in CONTENT_KINDS:
    jitted = jax.jit(_content_outputs, static_argnums=0)(enc, params)
    for got, want in zip(jitted, _content_outputs(enc, params)):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=label)
    return
  raise AssertionError(f'{label}: unknown kind {enc.kind}')


@pytest.mark.parametrize('label,enc', CASES, ids=IDS)
def test_jit_with_static_encoder(label, enc):
  _check_jit(enc, init_params(enc, 2), label)


# --- gradients reach every learnable leaf ---------------------------------------------------------

LENGTH = 24


def _outputs(enc, params):
  """The kind's differentiable outputs on a LENGTH x LENGTH problem."""
  if enc.kind is Kind.SCALAR_BIAS:
    return [relpos_jax.bias_matrix(enc, params, LENGTH, LENGTH)]
  rel = relpos_jax.relative_positions(LENGTH, LENGTH)
  if enc.kind is Kind.VECTOR_RELATIVE:
    outs = [enc.key_embeddings(params, rel), enc.value_embeddings(params, rel), *enc.query_biases(params)]
    return [o for o in outs if o is not None]
  if enc.kind is Kind.ROTARY:
    x = jax.random.normal(jax.random.key(1), (1, LENGTH, 2, HEAD_DIM))
    positions = jnp.arange(LENGTH)[None]
    return [enc.rotate_queries(params, x, positions), enc.rotate_keys(params, x, positions)]
  if enc.kind is Kind.ABSOLUTE:
    return [enc.embed(params, jnp.arange(LENGTH))]
  if enc.kind is Kind.COMBINED:
    return [o for part, p in enc.terms(params) for o in _outputs(part, p)]
  if enc.kind is Kind.POSITION_REMAP:
    from relpos_jax.nn import terms

    q = jax.random.normal(jax.random.key(1), (1, LENGTH, 2, HEAD_DIM))
    positions = jnp.arange(LENGTH)[None]
    scores, bias = terms.parts.remap_scores(enc, params, q, q, positions, positions)
    return [scores] + ([] if bias is None else [bias])
  if enc.kind in CONTENT_KINDS:
    return _content_outputs(enc, params, LENGTH)
  raise AssertionError(f'unknown kind {enc.kind}')


def _loss(enc, params):
  """A scalar through every output, randomly weighted so that no gradient cancels by symmetry."""
  total = 0.0
  for i, out in enumerate(_outputs(enc, params)):
    total = total + jnp.sum(out * jax.random.normal(jax.random.key(100 + i), out.shape))
  return total


@pytest.mark.parametrize('label,enc', CASES, ids=IDS)
def test_gradients_reach_every_learnable_leaf(label, enc):
  params = init_params(enc, 2)
  grads = jax.jit(jax.grad(_loss, argnums=1), static_argnums=0)(enc, params)
  leaves = jax.tree_util.tree_leaves_with_path(grads)
  assert len(leaves) == len(jax.tree.leaves(params))
  for path, grad in leaves:
    grad = np.asarray(grad)
    assert np.isfinite(grad).all(), f'{label}: non-finite gradient at {jax.tree_util.keystr(path)}'
    assert np.any(grad != 0), f'{label}: no gradient reaches {jax.tree_util.keystr(path)}'


def test_learnable_encoders_do_have_leaves_and_fixed_ones_none():
  # Guards the gradient test against passing vacuously.
  for name in ('distance', 'shaw', 't5', 'piecewise', 'multiscale', 'learned', 'absolute_score'):
    assert jax.tree.leaves(init_params(encoders.make(name), 2)), name
  for enc in (encoders.make('sinusoidal'), encoders.make('distance', learnable=False)):
    assert jax.tree.leaves(init_params(enc, 2)) == [], enc
