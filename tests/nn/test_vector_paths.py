"""The efficient vector-relative paths (Shaw a^K/a^V, Transformer-XL) against a reference that
materialises every pair's (H, D) embedding: values and gradients, both table branches, caches, explicit
positions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders
from relpos_jax.nn import attend, attention_mask, skew
from relpos_jax.nn import call

# ----------------------------------------------------------------------------------------------------------
# The efficient vector-relative paths against a reference that materialises (Lq, Lk, H, D).


def naive_vector_attention(q, k, v, encoder, params, rel, mask):
  """Shaw / Transformer-XL attention written out with every pair's embedding (the definition)."""
  a_k = encoder.key_embeddings(params, rel)  # rel.shape + (H, D)
  a_v = encoder.value_embeddings(params, rel)
  u, vb = encoder.query_biases(params)
  qu = q + (0.0 if u is None else u)
  qv = q + (0.0 if vb is None else vb)
  pair = 'bijhd' if rel.ndim == 3 else 'ijhd'
  scores = jnp.einsum('bihd,bjhd->bhij', qu, k) + jnp.einsum(f'bihd,{pair}->bhij', qv, a_k)
  scores = scores / np.sqrt(q.shape[-1])
  scores = jnp.where(mask, scores, -1e30)
  w = jax.nn.softmax(scores, axis=-1)
  out = jnp.einsum('bhij,bjhd->bihd', w, v)
  if a_v is not None:
    out = out + jnp.einsum(f'bhij,{pair}->bihd', w, a_v)
  return out


VECTOR_CONFIGS = [
    # (label, encoder, q_len, k_len, q_offset, explicit positions, causal, filled keys)
    ('shaw_clipped', dict(name='shaw_vector', max_distance=2), 8, 8, 0, False, False, None),
    ('shaw_clipped_causal', dict(name='shaw_vector', max_distance=2), 8, 8, 0, False, True, None),
    ('shaw_distinct', dict(name='shaw_vector', max_distance=16), 8, 8, 0, False, False, None),
    ('shaw_k0', dict(name='shaw_vector', max_distance=0), 6, 6, 0, False, False, None),
    (
        'shaw_no_values',
        dict(name='shaw_vector', max_distance=2, use_value_embeddings=False),
        6,
        6,
        0,
        False,
        False,
        None,
    ),
    ('xl_distinct', dict(name='transformer_xl'), 8, 8, 0, False, False, None),
    ('xl_clipped', dict(name='transformer_xl', max_distance=3), 8, 8, 0, False, True, None),
    ('shaw_cache_clipped', dict(name='shaw_vector', max_distance=2), 3, 16, 5, False, True, 8),
    ('shaw_cache_distinct', dict(name='shaw_vector', max_distance=16), 3, 16, 5, False, True, 8),
    ('xl_cache_distinct', dict(name='transformer_xl'), 3, 12, 9, False, True, 12),
    ('xl_cache_clipped', dict(name='transformer_xl', max_distance=2), 2, 12, 4, False, True, 6),
    ('shaw_explicit', dict(name='shaw_vector', max_distance=2), 8, 8, 0, True, False, None),
    ('shaw_explicit_wide', dict(name='shaw_vector', max_distance=16), 8, 8, 0, True, True, None),
    ('xl_explicit_pairwise', dict(name='transformer_xl'), 8, 8, 0, True, False, None),
    ('xl_explicit_clipped', dict(name='transformer_xl', max_distance=3), 8, 8, 0, True, True, None),
]


@pytest.mark.parametrize(
    'label,spec,q_len,k_len,q_offset,explicit,causal,filled', VECTOR_CONFIGS, ids=[c[0] for c in VECTOR_CONFIGS]
)
def test_vector_paths_match_naive_values_and_gradients(label, spec, q_len, k_len, q_offset, explicit, causal, filled):
  del label
  spec = dict(spec)
  encoder = encoders.make(spec.pop('name'), **spec)
  heads, head_dim, batch = 2, 4, 2
  params = encoder.init(jax.random.key(0), heads, head_dim=head_dim, model_dim=heads * head_dim)
  kq, kk, kv, kc, kp = jax.random.split(jax.random.key(1), 5)
  q = jax.random.normal(kq, (batch, q_len, heads, head_dim))
  k = jax.random.normal(kk, (batch, k_len, heads, head_dim))
  v = jax.random.normal(kv, (batch, k_len, heads, head_dim))
  cotangent = jax.random.normal(kc, (batch, q_len, heads, head_dim))
  key_mask = None if filled is None else jnp.broadcast_to(jnp.arange(k_len) < filled, (batch, k_len))
  mask = attention_mask(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask)
  ref_mask = jnp.ones((1, 1, q_len, k_len), bool) if mask is None else mask
  settings = call.AttentionSettings.checked(causal=causal)
  if explicit:
    # Sorted distinct positions spread over [0, 40): far distances that exercise the clip.
    pos = jnp.sort(
        jax.vmap(lambda r: jax.random.choice(r, 40, (k_len,), replace=False))(jax.random.split(kp, batch)), axis=-1
    ).astype(jnp.int32)
    positions = call.Positions(query=pos[:, k_len - q_len :], key=pos)
    rel = pos[:, None, :] - pos[:, k_len - q_len :, None]
  else:
    positions = call.Positions(offset=q_offset)
    rel = jnp.arange(k_len)[None, :] - (jnp.arange(q_len)[:, None] + q_offset)

  def fast(q, k, v, params):
    out = attend(call.AttentionInputs.checked(q, k, v, positions, key_mask=key_mask), (encoder,), [params], settings)
    return jnp.sum(out * cotangent), out

  def slow(q, k, v, params):
    out = naive_vector_attention(q, k, v, encoder, params, rel, ref_mask)
    return jnp.sum(out * cotangent), out

  (_, out_fast), g_fast = jax.jit(jax.value_and_grad(fast, argnums=(0, 1, 2, 3), has_aux=True))(q, k, v, params)
  (_, out_slow), g_slow = jax.jit(jax.value_and_grad(slow, argnums=(0, 1, 2, 3), has_aux=True))(q, k, v, params)
  if causal or filled is not None:
    # Only rows that see a key are defined by the reference (ours are zero otherwise).
    assert bool(jnp.all(jnp.any(ref_mask, axis=-1)))
  np.testing.assert_allclose(out_fast, out_slow, atol=2e-5, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(g_fast), jax.tree.leaves(g_slow)):
    np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4)


def test_relative_table_chooses_branch_by_size():
  shaw = encoders.make('shaw_vector', max_distance=3)
  assert skew.relative_table(shaw, 4, 4).mode == 'distinct'  # 7 rows >= 7 positions
  assert skew.relative_table(shaw, 5, 5).mode == 'clipped'  # 7 rows < 9 positions
  assert skew.relative_table(shaw, 1, 20, q_offset=19).mode == 'clipped'
  pos = jnp.zeros((1, 4), jnp.int32)
  assert skew.relative_table(shaw, 4, 4, q_positions=pos, k_positions=pos).mode == 'clipped'
  xl = encoders.make('transformer_xl')
  assert skew.relative_table(xl, 4, 4).mode == 'distinct'
  assert skew.relative_table(xl, 4, 4, q_positions=pos, k_positions=pos).mode == 'pairwise'


def test_vector_path_never_builds_pairwise_head_dim_tensor():
  """The contiguous path's largest intermediate is (B, H, Lq, Lq + Lk - 1), never (Lq, Lk, ..., D)."""
  encoder = encoders.make('transformer_xl')
  heads, head_dim, length = 2, 8, 32
  params = encoder.init(jax.random.key(0), heads, head_dim=head_dim)
  q = jnp.ones((1, length, heads, head_dim))

  def f(q):
    return attend(call.AttentionInputs.checked(q, q, q), (encoder,), [params])

  jaxpr = jax.make_jaxpr(f)(q)
  for eqn in jaxpr.eqns:
    for var in eqn.outvars:
      shape = getattr(var.aval, 'shape', ())
      assert not (len(shape) >= 3 and shape.count(length) >= 2 and head_dim in shape[-1:]), (eqn, shape)


CAUSAL_DISTINCT = [c for c in VECTOR_CONFIGS if c[6] and not c[5]]  # causal, contiguous positions


@pytest.mark.parametrize(
    'label,spec,q_len,k_len,q_offset,explicit,causal,filled',
    CAUSAL_DISTINCT,
    ids=[c[0] + '_causal_table' for c in CAUSAL_DISTINCT],
)
def test_causal_table_matches_naive(monkeypatch, label, spec, q_len, k_len, q_offset, explicit, causal, filled):
  """`relative_table(causal=True)` (rows rel <= 0 only) under a causal mask: same values and gradients.

  attend passes causal=causal itself; forcing it here keeps the causal table under test whatever the
  plumbing does.
  """
  full_table = skew.relative_table
  monkeypatch.setattr(skew, 'relative_table', lambda *args, **kwargs: full_table(*args, **{**kwargs, 'causal': True}))
  test_vector_paths_match_naive_values_and_gradients(label, spec, q_len, k_len, q_offset, explicit, causal, filled)


def test_causal_table_keeps_only_non_positive_rows():
  xl = encoders.make('transformer_xl')
  table = skew.relative_table(xl, 6, 6, causal=True)
  assert table.mode == 'distinct' and table.causal
  np.testing.assert_array_equal(table.rows, np.arange(-5, 1))
  cached = skew.relative_table(xl, 2, 10, q_offset=3, causal=True)
  np.testing.assert_array_equal(cached.rows, np.arange(-4, 1))
  assert skew.relative_table(xl, 2, 10, q_offset=8, causal=True).num_rows == 10  # drops rel 1
  # One query at the last key (decoding): every distinct row is <= 0 already, nothing to drop.
  assert not skew.relative_table(xl, 1, 10, q_offset=9, causal=True).causal
  # A traced offset or explicit positions keep every row.
  assert skew.relative_table(xl, 6, 6, q_offset=jnp.int32(0), causal=True).num_rows == 11
  pos = jnp.zeros((1, 4), jnp.int32)
  assert skew.relative_table(xl, 4, 4, q_positions=pos, k_positions=pos, causal=True).mode == 'pairwise'


def test_gather_and_aggregate_are_transposes():
  """<gather(P), W> == <P, aggregate(W)> on every table layout, and each one's gradient is the other."""
  shaw = encoders.make('shaw_vector', max_distance=2)
  xl = encoders.make('transformer_xl')
  pos = jnp.array([[0, 3, 4, 9, 20, 21]], jnp.int32)
  tables = [
      skew.relative_table(shaw, 6, 6),
      skew.relative_table(xl, 6, 6),
      skew.relative_table(xl, 6, 6, causal=True),
      skew.relative_table(shaw, 3, 9, q_offset=4),
      skew.relative_table(xl, 3, 9, q_offset=4),
      skew.relative_table(xl, 3, 9, q_offset=4, causal=True),
      skew.relative_table(xl, 1, 7, q_offset=6),
      skew.relative_table(xl, 5, 3, q_offset=-2, causal=True),
      skew.relative_table(shaw, 6, 6, q_positions=pos, k_positions=pos),
      skew.bucketed_table(jnp.arange(4), jax.random.randint(jax.random.key(0), (1, 6, 5), 0, 4)),  # iRPE's buckets
  ]
  for table in tables:
    kp, kw = jax.random.split(jax.random.key(table.num_rows))
    projected = jax.random.normal(kp, (1, 2, table.q_len, table.num_rows))
    weights = jax.random.normal(kw, (1, 2, table.q_len, table.k_len))
    if table.causal:  # pairs ahead read zero, so only weights the causal mask keeps are transposed
      weights = jnp.where(table.rel <= 0, weights, 0.0)

    # One compiled function per layout: op-by-op dispatch compiled each small op separately (2 s a table).
    @jax.jit
    def both_sides(projected, weights, table=table):
      gathered = lambda p: jnp.sum(skew.gather_rows(p, table) * weights)
      aggregated = skew.aggregate_weights(weights, table)
      return gathered(projected), jnp.sum(projected * aggregated), jax.grad(gathered)(projected), aggregated

    lhs, rhs, g_gather, aggregated = both_sides(projected, weights)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g_gather, aggregated, rtol=1e-6)
