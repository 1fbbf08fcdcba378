"""PaTH's tiled form (`implementation='blockwise'`): key tiles nearest first with the query carried per row
through the tiles between (`path.householder_tile_logits`, `terms.content.ReplacedContent` with `carries`),
against the explicit path's chunked logits (`path._householder_logits_chunked`, itself pinned to the definition
in test_path_chunked.py).

Outputs and gradients (every parameter and the layer input) equal the explicit path's for lengths off the tile
grid, several tile shapes, left and right padding, PaTH alone, PaTH-FoX and beside stick-breaking; queries at a cache offset; a future
token changes no earlier output; the tiled program holds no (L, L)-sized array, forward or backward.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.nn import RelativeMultiHeadAttention, functional
from relpos_jax.nn import call

B, L, DIM, HEADS = 2, 11, 16, 2
TOL = dict(atol=1e-4, rtol=1e-4)
PADDING = jnp.array([[False] * 2 + [True] * (L - 2), [True] * (L - 3) + [False] * 3])


def _layer(spec, implementation, block_size=None):
  options = dict(causal=True, implementation=implementation, block_size=block_size)
  return RelativeMultiHeadAttention(HEADS, DIM, encoders.from_spec(spec), rngs=nnx.Rngs(0), **options)


@nnx.jit
def _value_and_grads(layer, x, cotangent, padding_mask):
  def loss(layer, x):
    y = layer(x, padding_mask=padding_mask)
    return jnp.sum(y * cotangent), y

  (_, y), (g_layer, g_x) = nnx.value_and_grad(loss, argnums=(0, 1), has_aux=True)(layer, x)
  return y, g_x, g_layer


@pytest.mark.parametrize(
    'spec, block',
    [
        ('path', (4, 3)),
        ('path', (3, 5)),
        ('path', 2),
        ('path', 16),
        ('path + fox', (5, 4)),
        ('path + fox', (3, 2)),
        ('path + stick_breaking', (4, 3)),
    ],
)
def test_blockwise_equals_explicit_in_outputs_and_gradients(spec, block):
  """L = 11 off every tile grid (and one tile larger than it), queries and keys tiled differently, padding on
  the left of one row and the right of the other: outputs, the input's gradient and every parameter's
  (PaTH's projections, convolution and beta; FoX's gates; q, k, v, o) equal the explicit path's; beside
  stick-breaking too (its normalizer's nearest-first fold threads the same carry)."""
  fast, slow = _layer(spec, 'blockwise', block), _layer(spec, 'einsum')
  x = jax.random.normal(jax.random.key(1), (B, L, DIM))
  cotangent = jax.random.normal(jax.random.key(7), x.shape)
  # Outputs, the input's gradient and every parameter's gradient, leaf for leaf.
  (y1, gx1, gl1), (y2, gx2, gl2) = (_value_and_grads(layer, x, cotangent, PADDING) for layer in (fast, slow))
  tiled, explicit = jax.tree.leaves((y1, gx1, nnx.state(gl1))), jax.tree.leaves((y2, gx2, nnx.state(gl2)))
  assert len(tiled) == len(explicit) > 2
  for a, b in zip(tiled, explicit):
    np.testing.assert_allclose(a, b, **TOL)
  path_grads = [g for p, g in jax.tree_util.tree_leaves_with_path(nnx.state(gl1)) if 'w_conv' in str(p)]
  assert path_grads and all(float(jnp.abs(g).max()) > 0 for g in path_grads)  # PaTH's own weights learn


@pytest.mark.parametrize('offset, q_len, block', [(6, 5, (2, 3)), (3, 4, (4, 4)), (10, 1, (1, 3))])
def test_queries_at_a_cache_offset_tile_like_the_explicit_path(offset, q_len, block):
  """A prompt chunk (or one decoding step) at a cache offset among 11 cached keys, two unfilled slots: the
  tiled form places each query by its key index (rows off the tile grid), in values and gradients."""
  d = 4
  part = encoders.make('path')
  params = [part.init(jax.random.key(0), HEADS, head_dim=d, model_dim=DIM)]
  q, k, v = jax.random.normal(jax.random.key(2), (3, B, L, HEADS, d))
  features = [part.token_features(params[0], jax.random.normal(jax.random.key(3), (B, L, DIM)))]
  key_mask = jnp.arange(L)[None] < jnp.asarray([[L], [L - 2]])

  # What both paths share; only the implementation (and the tiles it takes) differs.
  positions = call.Positions(offset=offset)

  def run(implementation, q_, k_, v_):
    tiles = block if implementation == 'blockwise' else None
    inputs = call.AttentionInputs.checked(
        q_[:, offset : offset + q_len], k_, v_, positions, key_mask=key_mask, features=features
    )
    settings = call.AttentionSettings.checked(implementation, tiles, causal=True)
    return functional.attend(inputs, (part,), params, settings)

  def value_and_grads(implementation):
    loss = lambda *a: jnp.sum(jnp.sin(run(implementation, *a)))
    return jax.jit(lambda *a: (run(implementation, *a), jax.grad(loss, argnums=(0, 1, 2))(*a)))(q, k, v)

  (out, grads), (want_out, want_grads) = value_and_grads('blockwise'), value_and_grads('einsum')
  np.testing.assert_allclose(out, want_out, **TOL)
  for got, want in zip(grads, want_grads):
    np.testing.assert_allclose(got, want, **TOL)


@pytest.mark.parametrize('spec', ['path', 'path + fox'])
def test_a_future_token_changes_no_earlier_output(spec):
  """Causality of the tiled carry: changing token 7 of 11 (tiles 3 x 2) leaves outputs 0..6 bit for bit and
  changes output 7."""
  layer = _layer(spec, 'blockwise', (3, 2))
  x = jax.random.normal(jax.random.key(1), (B, L, DIM))
  changed = x.at[:, 7].add(1.0)
  y, y_changed = nnx.jit(lambda layer, x: layer(x))(layer, jnp.stack([x, changed]).reshape(2 * B, L, DIM)).reshape(
      2, B, L, DIM
  )
  np.testing.assert_array_equal(y[:, :7], y_changed[:, :7])
  assert float(jnp.abs(y[:, 7] - y_changed[:, 7]).max()) > 1e-3


def test_the_tiled_program_holds_no_length_squared_array():
  """Forward and backward of PaTH blockwise at L = 256, tiles of 32: no (L, L)-sized buffer in the program
  (the explicit path's has several)."""
  length = 256
  part = encoders.make('path')
  params = [part.init(jax.random.key(0), 1, head_dim=8, model_dim=8)]
  x = jax.random.normal(jax.random.key(1), (1, length, 8))

  def loss(implementation, q_):
    out = functional.attend(
        call.AttentionInputs.checked(q_, q_, q_, features=[part.token_features(params[0], x)]),
        (part,),
        params,
        call.AttentionSettings.checked(
            causal=True, implementation=implementation, block_size=32 if implementation == 'blockwise' else None
        ),
    )
    return jnp.sum(out)

  q = x.reshape(1, length, 1, 8)
  text = lambda impl: jax.jit(jax.grad(lambda q_: loss(impl, q_))).lower(q).as_text()
  assert f'{length}x{length}' in text('einsum')
  assert f'{length}x{length}' not in text('blockwise')
