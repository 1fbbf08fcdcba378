"""PaTH's chunked logits (`path._householder_logits_chunked`) against the per-key scan and the definition, and
the tiled form's step (`path.householder_tile_logits`, swept by hand) against the definition.

The definition a_ij = q_i^T H_i H_{i-1} ... H_{j+1} k_j is built with explicit D x D products (numpy float64
for values, jnp for gradients); the scan is the algorithm the chunked form replaces for multi-token calls.
Lengths on and off the chunk boundaries, beta near 0 and near 2, a padded tail (beta = 0, zero keys).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax.encoders import path as path_lib

B, H = 2, 2


def _inputs(length, d, seed=0, padded=0):
  rng = np.random.default_rng(seed)
  q, k = rng.normal(size=(2, B, length, H, d))
  w = rng.normal(size=(B, length, H, d))
  w /= np.linalg.norm(w, axis=-1, keepdims=True)
  beta = 2.0 / (1.0 + np.exp(-3.0 * rng.normal(size=(B, length, H))))
  beta[0, 1] = 1e-4  # A factor close to the identity,
  beta[1, 2] = 2.0 - 1e-4  # and one close to a reflection.
  if padded:  # Padded tokens: transparent factors, zero keys.
    beta[:, length - padded :] = 0.0
    k[:, length - padded :] = 0.0
  return q, k, w, beta


def _np_definition(q, k, w, beta):
  """(B, H, L, L) by explicit float64 D x D products, one (query, key) pair at a time."""
  b, length, h, d = q.shape
  out = np.zeros((b, h, length, length))
  for bb in range(b):
    for hh in range(h):
      for i in range(length):
        product = np.eye(d)
        for j in range(i, -1, -1):
          out[bb, hh, i, j] = q[bb, i, hh] @ product @ k[bb, j, hh]
          product = product @ (np.eye(d) - beta[bb, j, hh] * np.outer(w[bb, j, hh], w[bb, j, hh]))
  return out


def _jnp_definition(q, k, w, beta):
  """The same in jnp (differentiable): every query's running product H_i ... H_{j+1}, j from last to first."""
  b, length, h, d = q.shape
  eye = jnp.eye(d)
  index = jnp.arange(length)
  products = jnp.broadcast_to(eye, (b, h, length, d, d))  # one per query i
  columns = [None] * length
  for j in range(length - 1, -1, -1):
    visible = (index >= j)[:, None, None]
    row = jnp.einsum('bihd,bhide,bhe->bhi', q, products, k[:, j])
    columns[j] = jnp.where(index >= j, row, 0.0)
    factor = eye - beta[:, j, :, None, None] * jnp.einsum('bhd,bhe->bhde', w[:, j], w[:, j])
    products = jnp.where(visible, products @ factor[:, :, None], products)
  return jnp.stack(columns, axis=-1)


@pytest.mark.parametrize(
    'length, chunk, d, padded',
    [(13, 4, 4, 0), (16, 4, 8, 0), (5, 8, 6, 0), (13, 4, 5, 3), (16, 4, 4, 4)],
)
def test_chunked_equals_scan_and_definition_in_values_and_gradients(length, chunk, d, padded):
  q, k, w, beta = _inputs(length, d, seed=length + d, padded=padded)
  index = jnp.arange(length)
  chunked = lambda *a: path_lib.householder_logits(*a, index, block_size=chunk, method='chunked')
  scan = lambda *a: path_lib.householder_logits(*a, index, block_size=chunk, method='scan')
  args = tuple(jnp.asarray(a, jnp.float32) for a in (q, k, w, beta))
  got = chunked(*args)
  np.testing.assert_allclose(got, _np_definition(q, k, w, beta), atol=1e-4, rtol=1e-4)
  np.testing.assert_allclose(got, scan(*args), atol=1e-4, rtol=1e-4)
  cotangent = jnp.asarray(np.random.default_rng(1).normal(size=got.shape), jnp.float32)
  grads = lambda fn: jax.jit(jax.grad(lambda *a: jnp.sum(fn(*a) * cotangent), argnums=(0, 1, 2, 3)))(*args)
  for name, g_chunked, g_scan, g_definition in zip(
      ('query', 'key', 'w', 'beta'), grads(chunked), grads(scan), grads(_jnp_definition)
  ):
    np.testing.assert_allclose(g_chunked, g_definition, atol=1e-4, rtol=1e-4, err_msg=name)
    np.testing.assert_allclose(g_chunked, g_scan, atol=1e-4, rtol=1e-4, err_msg=name)


@pytest.mark.parametrize('offset, q_len, chunk', [(0, 7, 4), (3, 7, 4), (8, 5, 4), (12, 7, 4), (5, 2, 8), (2, 3, 3)])
def test_chunked_at_a_cache_offset_equals_the_scan(offset, q_len, chunk):
  """Queries q_offset .. q_offset + Lq - 1 among Lk keys (prefill into a cache), offset traced under jit, on
  and off the chunk grid (the keys shifted by a transparent pad)."""
  k_len, d = 19, 5
  q, k, w, beta = (jnp.asarray(a, jnp.float32) for a in _inputs(k_len, d, seed=offset, padded=2))
  query = q[:, offset : offset + q_len]
  run = jax.jit(
      lambda o: path_lib.householder_logits(query, k, w, beta, o + jnp.arange(q_len), chunk, method='chunked')
  )
  want = path_lib.householder_logits(query, k, w, beta, offset + jnp.arange(q_len), chunk, method='scan')
  np.testing.assert_allclose(run(jnp.int32(offset)), want, atol=1e-5, rtol=1e-5)
  definition = _np_definition(*(np.asarray(a) for a in (q, k, w, beta)))
  np.testing.assert_allclose(want, definition[:, :, offset : offset + q_len], atol=1e-4)


def test_chunked_refuses_a_q_index_it_cannot_place():
  """Queries past the keys, or not contiguous: a ValueError naming q_index when it is known, NaN logits when
  it is traced (jit) -- never silently wrong ones."""
  q, k, w, beta = (jnp.asarray(a, jnp.float32) for a in _inputs(9, 4))
  cases = ((q[:, :4], jnp.arange(4) + 7), (q[:, :3], jnp.asarray([0, 2, 4])), (q, jnp.arange(9) + 1))
  for query, index in cases:
    with pytest.raises(ValueError, match=r"q_index.*method='scan'"):
      path_lib.householder_logits(query, k, w, beta, index, 4, method='chunked')
    traced = jax.jit(lambda i: path_lib.householder_logits(query, k, w, beta, i, 4, method='chunked'))
    assert np.isnan(traced(index)).all()


def test_default_method_scans_for_one_query_and_chunks_otherwise():
  q, k, w, beta = (jnp.asarray(a, jnp.float32) for a in _inputs(10, 4))
  whole = path_lib.householder_logits(q, k, w, beta, jnp.arange(10), 4)
  np.testing.assert_allclose(whole, _np_definition(*(np.asarray(a) for a in (q, k, w, beta))), atol=1e-4)
  step = path_lib.householder_logits(q[:, 6:7], k, w, beta, jnp.asarray([6]), 4)  # a decoding step
  np.testing.assert_allclose(step, whole[:, :, 6:7], atol=1e-5)
  with pytest.raises(ValueError, match='method'):
    path_lib.householder_logits(q, k, w, beta, jnp.arange(10), 4, method='fast')


def test_one_tile_step_sweep_gives_the_definition():
  """`householder_tile_logits` swept by hand over key tiles of 4, nearest first, for query tiles of 3 (so a
  query tile straddles key tiles and its diagonal rows sit anywhere in them), a padded tail: the definition."""
  length, d, size, bq = 13, 5, 4, 3
  q, k, w, beta = _inputs(length, d, seed=3, padded=2)
  pad = (-length) % size
  padded = lambda a: jnp.pad(jnp.asarray(a, jnp.float32), [(0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 2))
  tiles = path_lib.householder_key_tiles(padded(k), padded(w), padded(beta), size)
  query, key = jnp.moveaxis(jnp.asarray(q, jnp.float32), 2, 1), jnp.moveaxis(padded(k), 2, 1)
  got = np.zeros((B, H, length, length + pad))
  for qs in range(0, length, bq):
    q_t = query[:, :, qs : qs + bq]
    carry = jnp.zeros_like(q_t)
    for n in reversed(range((length + pad) // size)):
      rows = jnp.arange(qs, qs + q_t.shape[2], dtype=jnp.int32) - n * size
      share = {name: a[:, :, n] for name, a in tiles.items()}
      logits, carry = path_lib.householder_tile_logits(share, q_t, key[:, :, n * size : (n + 1) * size], carry, rows)
      got[:, :, qs : qs + bq, n * size : (n + 1) * size] = logits
  causal = np.tril(np.ones((length, length)))
  np.testing.assert_allclose(got[..., :length] * causal, _np_definition(q, k, w, beta), atol=1e-5)
