"""Transformer-XL: key embeddings against a naive computation of W_R R_{i-j}, the sign convention, the
paper's four-term score, gradients to W_R, u and v, d_R selection, validation."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders


def _init(encoder, num_heads=2, head_dim=4, model_dim=None, seed=0):
  return encoder.init(jax.random.PRNGKey(seed), num_heads, head_dim=head_dim, model_dim=model_dim)


def _naive_key_embeddings(params, rel, base=10000.0):
  """Loops: R_d[k] = sin(d / base^(2k/d_R)), R_d[d_R/2 + k] = cos(...), d = i - j = -rel; then W_R."""
  w_r = np.asarray(params['w_r'], np.float64)
  d_r = w_r.shape[0]
  out = np.zeros(np.shape(rel) + w_r.shape[1:])
  for index, r in np.ndenumerate(np.asarray(rel)):
    distance = -int(r)
    emb = np.zeros(d_r)
    for k in range(d_r // 2):
      emb[k] = np.sin(distance / base ** (2 * k / d_r))
      emb[d_r // 2 + k] = np.cos(distance / base ** (2 * k / d_r))
    out[index] = np.einsum('r,rhd->hd', emb, w_r)
  return out


@functools.partial(jax.jit, static_argnums=0)
def _key_embeddings(encoder, params, rel):
  return encoder.key_embeddings(params, rel)


def test_key_embeddings_match_a_naive_computation():
  encoder = encoders.make('transformer_xl')
  params = _init(encoder, num_heads=3, head_dim=4, model_dim=10)
  rel = np.array([[-7, -1, 0], [1, 5, -300]])
  got = _key_embeddings(encoder, params, jnp.asarray(rel))
  assert got.shape == (2, 3, 3, 4)
  np.testing.assert_allclose(got, _naive_key_embeddings(params, rel), atol=1e-6)


def test_sign_convention_rel_is_minus_the_papers_distance():
  encoder = encoders.make('transformer_xl')
  params = _init(encoder)
  # Key 3 positions back: rel = j - i = -3, the paper's R_{i-j} = R_3, whose sine part is positive.
  behind, ahead = jax.jit(encoder.relative_embeddings)(params, jnp.asarray([-3, 3]))
  d_r = params['w_r'].shape[0]
  np.testing.assert_allclose(behind[0], np.sin(3.0), rtol=1e-6)
  np.testing.assert_allclose(behind[d_r // 2], np.cos(3.0), rtol=1e-6)
  np.testing.assert_allclose(ahead[0], -np.sin(3.0), rtol=1e-6)


def _scores(encoder, params, q, k):
  """A_ij = (q_i + u) . k_j + (q_i + v) . W_R R_{i-j}, assembled from the encoder's parts."""
  length = q.shape[0]
  rel = jnp.arange(length)[None, :] - jnp.arange(length)[:, None]  # j - i
  u, v = encoder.query_biases(params)
  content = jnp.einsum('ihd,jhd->hij', q + u, k)
  position = jnp.einsum('ihd,ijhd->hij', q + v, encoder.key_embeddings(params, rel))
  return content + position


def test_four_terms_of_the_paper():
  encoder = encoders.make('transformer_xl')
  params = _init(encoder, num_heads=2, head_dim=4)
  rng = np.random.default_rng(0)
  q, k = rng.normal(size=(5, 2, 4)), rng.normal(size=(5, 2, 4))
  u, v, w_r = (np.asarray(params[n], np.float64) for n in ('u', 'v', 'w_r'))
  d_r = w_r.shape[0]
  expected = np.zeros((2, 5, 5))
  for i in range(5):
    for j in range(5):
      theta = 10000.0 ** (-np.arange(0, d_r, 2) / d_r)
      r = np.concatenate([np.sin((i - j) * theta), np.cos((i - j) * theta)])
      wr = np.einsum('r,rhd->hd', r, w_r)
      for h in range(2):
        a = q[i, h] @ k[j, h]
        b = q[i, h] @ wr[h]
        c = u[h] @ k[j, h]
        d = v[h] @ wr[h]
        expected[h, i, j] = a + b + c + d
  got = jax.jit(_scores, static_argnums=0)(encoder, params, jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32))
  np.testing.assert_allclose(got, expected, atol=1e-5)
  assert encoder.value_embeddings(params, jnp.arange(3)) is None


def test_gradients_reach_w_r_u_and_v():
  encoder = encoders.make('transformer_xl')
  params = _init(encoder, num_heads=2, head_dim=4)
  rng = np.random.default_rng(1)
  q, k = (jnp.asarray(rng.normal(size=(6, 2, 4)), jnp.float32) for _ in range(2))

  def loss(learnable):
    return jnp.sum(jnp.tanh(_scores(encoder, {**params, **learnable}, q, k)))

  learnable = {name: params[name] for name in ('w_r', 'u', 'v')}
  grads = jax.jit(jax.grad(loss))(learnable)
  leaves = jax.tree_util.tree_leaves_with_path(params)
  assert {jax.tree_util.keystr(path) for path, _ in leaves} == {"['u']", "['v']", "['w_r']"}
  for name, g in grads.items():
    assert g.shape == params[name].shape
    assert np.all(np.isfinite(g)) and np.linalg.norm(g) > 1e-4, name


@pytest.mark.parametrize(
    'embedding_dim,model_dim,expected',
    [
        (None, None, 2 * 4),  # num_heads * head_dim
        (None, 10, 10),  # model_dim, when given to init
        (6, 10, 6),  # embedding_dim overrides both
    ],
)
def test_relative_embedding_dimension(embedding_dim, model_dim, expected):
  encoder = encoders.make('transformer_xl', embedding_dim=embedding_dim)
  params = _init(encoder, num_heads=2, head_dim=4, model_dim=model_dim)
  assert params['w_r'].shape == (expected, 2, 4)
  assert params['u'].shape == params['v'].shape == (2, 4)
  assert params['dims'] == encoders.Dims(2, 4, model_dim)


def test_max_distance_clamps_like_the_reference_clamp_len():
  encoder = encoders.make('transformer_xl', max_distance=4)
  assert encoder.clip_distance == 4 and encoders.make('transformer_xl').clip_distance is None
  params = _init(encoder)
  got = _key_embeddings(encoder, params, jnp.asarray([-4, -9, 4, 100]))
  np.testing.assert_array_equal(got[1], got[0])
  np.testing.assert_array_equal(got[3], got[2])
  assert not np.allclose(got[0], got[2])


def test_far_distances_are_accurate():
  """The sinusoid uses exact phases: distance 10^6 is encoded as precisely as distance 1."""
  encoder = encoders.make('transformer_xl', embedding_dim=8)
  params = _init(encoder)
  r = np.asarray(encoder.relative_embeddings(params, jnp.asarray(-(10**6))), np.float64)
  theta = 10000.0 ** (-np.arange(0, 8, 2) / 8)
  np.testing.assert_allclose(r, np.concatenate([np.sin(1e6 * theta), np.cos(1e6 * theta)]), atol=1e-6)


def test_contract():
  encoder = encoders.make('transformer_xl')
  assert 'transformer_xl' in encoders.names()
  assert encoder.kind is encoders.Kind.VECTOR_RELATIVE and encoder.is_relative
  assert hash(encoder) == hash(encoders.make('transformer_xl'))
  with pytest.raises(ValueError, match='head_dim=None'):
    encoder.init(jax.random.PRNGKey(0), 2)


@pytest.mark.parametrize(
    'hparams,named',
    [
        (dict(embedding_dim=7), 'embedding_dim=7'),
        (dict(embedding_dim=0), 'embedding_dim=0'),
        (dict(base=1.0), 'base=1.0'),
        (dict(max_distance=-1), 'max_distance=-1'),
        (dict(init_stddev=0.0), 'init_stddev=0.0'),
    ],
)
def test_invalid_hyperparameters_name_the_value(hparams, named):
  with pytest.raises(ValueError, match=named):
    encoders.make('transformer_xl', **hparams)


def test_odd_relative_dimension_at_init_raises():
  with pytest.raises(ValueError, match='d_R=9 is invalid'):
    _init(encoders.make('transformer_xl'), num_heads=3, head_dim=3)
