"""What every scalar-bias encoder of the field (alibi, kerple, ggd_bam, fire, sandwich, mlp, nope) must do:
jit with the encoder static, carry gradients to every learnable leaf, reject bad hyperparameters by name."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import make

# (name, hyperparameters): every learnable configuration, and the parameter-free ones.
CONFIGS = [
    ('alibi', {}),
    ('alibi', {'bidirectional': True}),
    ('alibi', {'learnable_slopes': True}),
    ('kerple_power', {}),
    ('kerple_log', {}),
    ('ggd_bam', {}),
    ('ggd_bam', {'learn_loc': True, 'init_loc': -1.5}),
    ('fire', {}),
    ('sandwich', {}),
    ('sandwich', {'bidirectional': True, 'dim': 16}),
    ('mlp', {'hidden_dim': 16, 'depth': 2}),
    ('mlp', {'hidden_dim': 16, 'input_transform': 'linear'}),
    ('nope', {}),
]
IDS = [name + ''.join(f',{k}={v}' for k, v in hp.items()) for name, hp in CONFIGS]
LEARNABLE = {
    'alibi': False,
    'kerple_power': True,
    'kerple_log': True,
    'ggd_bam': True,
    'fire': True,
    'sandwich': False,
    'mlp': True,
    'nope': False,
}


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def _jitted_bias_matrix(encoder, params, q_len, k_len):
  return relpos_jax.bias_matrix(encoder, params, q_len, k_len)


@pytest.mark.parametrize('name, hparams', CONFIGS, ids=IDS)
def test_jit_with_the_encoder_static(name, hparams):
  enc = make(name, **hparams)
  assert hash(enc) == hash(make(name, **hparams))  # a usable static argument
  params = enc.init(jax.random.key(0), 3)
  eager = relpos_jax.bias_matrix(enc, params, 5, 7)
  jitted = _jitted_bias_matrix(enc, params, 5, 7)
  assert jitted.shape == (3, 5, 7) and jitted.dtype == jnp.float32
  np.testing.assert_allclose(jitted, eager, rtol=1e-6, atol=1e-6)
  assert np.all(np.isfinite(jitted))


@pytest.mark.parametrize('name, hparams', CONFIGS, ids=IDS)
def test_gradients_reach_every_learnable_leaf(name, hparams):
  enc = make(name, **hparams)
  params = enc.init(jax.random.key(1), 4)
  leaves = jax.tree_util.tree_leaves(params)
  learnable = LEARNABLE[name] or hparams.get('learnable_slopes', False)
  assert bool(leaves) == learnable
  if not learnable:
    return
  # A random cotangent, so that no symmetry of the bias cancels a gradient by accident.
  weights = jax.random.normal(jax.random.key(2), (4, 9, 9))
  grads = jax.grad(lambda p: jnp.sum(relpos_jax.bias_matrix(enc, p, 9, 9) * weights))(params)
  for path, grad in jax.tree_util.tree_leaves_with_path(grads):
    assert np.all(np.isfinite(grad)), path
    assert np.any(np.asarray(grad) != 0), f'no gradient reaches {jax.tree_util.keystr(path)}'


@pytest.mark.parametrize('name, hparams', CONFIGS, ids=IDS)
def test_structure_flags(name, hparams):
  enc = make(name, **hparams)
  assert enc.is_toeplitz == (name != 'fire')
  assert enc.carries_position == (name != 'nope')
  if enc.is_toeplitz:
    params = enc.init(jax.random.key(0), 2)
    checks.assert_toeplitz(np.asarray(relpos_jax.bias_matrix(enc, params, 6, 11, q_offset=3)))


@pytest.mark.parametrize('name, hparams', CONFIGS, ids=IDS)
def test_far_distances_stay_finite(name, hparams):
  enc = make(name, **hparams)
  params = enc.init(jax.random.key(0), 8)
  rel = jnp.array([-(10**6), -12345, -1, 0, 1, 10**6])
  if enc.is_toeplitz:
    out = enc.bias(params, rel)
  else:
    out = enc.pair_bias(params, jnp.full_like(rel, 10**6), rel + 10**6)
  assert out.shape == (6, 8) and np.all(np.isfinite(out))


INVALID = [
    ('alibi', 'bidirectional', 'yes'),
    ('alibi', 'learnable_slopes', 1),
    ('fire', 'mlp_width', 0),
    ('fire', 'mlp_width', 32.0),
    ('fire', 'init_c', -0.1),
    ('fire', 'init_c', 0.0),
    ('fire', 'init_threshold', float('inf')),
    ('fire', 'init_threshold', True),
    ('fire', 'eps', float('nan')),
    ('sandwich', 'dim', 3),
    ('sandwich', 'dim', 0),
    ('sandwich', 'dim', 128.0),
    ('sandwich', 'bidirectional', None),
    ('mlp', 'hidden_dim', 0),
    ('mlp', 'depth', -1),
    ('mlp', 'depth', True),
    ('mlp', 'input_transform', 'sqrt'),
]


@pytest.mark.parametrize('name, field, value', INVALID, ids=[f'{n}.{f}={v!r}' for n, f, v in INVALID])
def test_invalid_hyperparameters_name_the_value(name, field, value):
  with pytest.raises(ValueError, match=re.escape(f'{field}={value!r}')):
    make(name, **{field: value})


@pytest.mark.parametrize('name', ['kerple_power', 'kerple_log', 'nope'])
def test_parameter_less_dataclasses_reject_unknown_hyperparameters(name):
  with pytest.raises(ValueError, match='unknown hyperparameter'):
    make(name, slope=1.0)


@pytest.mark.parametrize('name', ['alibi', 'kerple_log', 'fire', 'sandwich', 'mlp', 'nope'])
@pytest.mark.parametrize('num_heads', [0, 2.0])
def test_invalid_head_counts(name, num_heads):
  with pytest.raises(ValueError, match=re.escape(f'num_heads={num_heads!r}')):
    make(name).init(jax.random.key(0), num_heads)
