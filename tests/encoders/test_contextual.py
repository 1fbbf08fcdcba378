"""The position-from-content encoders (and those acting after the scores) against direct NumPy transcriptions of
their papers' reference code (values and gradients), through the attention core the layer uses (`functional.attend`, explicit path).

  cope            facebookresearch/RAM projects/cope/src/cope/context_position.py
  fox             zhixuan-lin/forgetting-transformer (forgetting_attention: log_lambda = cumsum(log_fgate))
  stick_breaking  shawntan/stickbreaking-attention sb_ref.py and its tests (o + rem * v)
  dape            chuanyang-Zheng/DAPE DAPE.py (v1) and megatron/model/positional_embeddings.py (v2)
  path            fla-org/flash-linear-attention fla/ops/path_attn/naive.py (the chunked UT-transform
                  reference) and fla/layers/path_attn.py (w and beta from x)
  ssmax, logn     Nakanishi 2025's softmax(s log(n) z); QwenLM/Qwen's logn_list

The references run in float64 NumPy, per batch element and head, written the way the reference code is
written (loops, flips, explicit products), not the way relpos_jax computes.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import encoders
from relpos_jax.encoders import cope as cope_lib
from relpos_jax.encoders import path as path_lib
from relpos_jax.nn import attend, terms
from relpos_jax.nn import call

B, L, H, D, MODEL = 2, 7, 2, 8, 12


def _inputs(seed=0, length=L):
  rng = np.random.default_rng(seed)
  q, k, v = (rng.normal(size=(B, length, H, D)) for _ in range(3))
  x = rng.normal(size=(B, length, MODEL))
  return q, k, v, x


@functools.partial(jax.jit, static_argnames=('enc', 'causal'))
def _attend_jit(enc, params, q, k, v, x, key_mask, causal):
  parts, params = (enc,), [params]
  features = terms.parts.token_features(parts, params, x)
  return attend(
      call.AttentionInputs.checked(q, k, v, key_mask=key_mask, features=features),
      parts,
      params,
      call.AttentionSettings.checked(causal=causal, implementation='einsum'),
  )


def _attend(enc, params, q, k, v, x, *, causal=True, key_mask=None):
  """The attention core with the single part `enc`, jitted (the encoder is static)."""
  f32 = lambda a: jnp.asarray(a, jnp.float32)
  return _attend_jit(enc, params, f32(q), f32(k), f32(v), f32(x), key_mask, causal)


def _np_softmax_attend(logits, valid, v):
  """logits (Lq, Lk), valid bool, v (Lk, D) -> (Lq, D)."""
  logits = np.where(valid, logits, -np.inf)
  with np.errstate(invalid='ignore'):  # Rows with no visible key (left padding) are NaN; never compared.
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def _per_head(fn, q, k, v, *extra):
  """Runs fn(q_bh, k_bh, v_bh, b, h) for every batch element and head -> (B, L, H, D)."""
  out = np.zeros(q.shape[:2] + (q.shape[2], v.shape[-1]))
  for b in range(q.shape[0]):
    for h in range(q.shape[2]):
      out[b, :, h] = fn(q[b, :, h], k[b, :, h], v[b, :, h], b, h)
  return out


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _log_sigmoid(x):
  return -np.logaddexp(0.0, -x)


def _numeric_grad(f, x, eps=1e-6):
  """Central differences of the scalar f at every entry of the float64 array x."""
  grad = np.zeros_like(x)
  for index in np.ndindex(x.shape):
    step = np.zeros_like(x)
    step[index] = eps
    grad[index] = (f(x + step) - f(x - step)) / (2 * eps)
  return grad


def _weights(shape, seed=5):
  return np.random.default_rng(seed).normal(size=shape)


def _check_values_and_grad(jax_fn, np_fn, arg, atol=2e-5, grad_atol=2e-4):
  """jax_fn(arg) vs np_fn(arg) (float64), and the gradient of a random projection of both."""
  r = _weights(np.shape(np_fn(arg)))
  np.testing.assert_allclose(np.asarray(jax_fn(jnp.asarray(arg, jnp.float32))), np_fn(arg), atol=atol, rtol=1e-4)
  got = jax.grad(lambda a: jnp.sum(jax_fn(a) * r))(jnp.asarray(arg, jnp.float32))
  want = _numeric_grad(lambda a: float(np.sum(np_fn(a) * r)), np.asarray(arg, np.float64))
  np.testing.assert_allclose(np.asarray(got), want, atol=grad_atol, rtol=1e-3)


def _causal(length=L):
  return np.tril(np.ones((length, length), bool))


# ----------------------------------------------------------------------------------------------------------
# CoPE


def _np_cope(q, k, v, table, npos):
  """RAM's ContextPosSelfAttn.forward for one head (cope_sep_key, cope_val_gates, cope_nodiv off)."""
  d = q.shape[-1]
  mask = _causal(q.shape[0]).astype(np.float64)
  gate_logits = q @ k.T
  gates = _sigmoid(gate_logits / math.sqrt(d)) * mask
  positions = np.flip(np.flip(gates, -1).cumsum(-1), -1)
  positions = np.minimum(positions, npos - 1)
  pos_logits_fixed = q @ table
  ceil, floor = np.ceil(positions).astype(int), np.floor(positions).astype(int)
  pos_ceil_weight = positions - floor
  pos_logits = np.take_along_axis(pos_logits_fixed, ceil, -1) * pos_ceil_weight + np.take_along_axis(
      pos_logits_fixed, floor, -1
  ) * (1 - pos_ceil_weight)
  attn_logits = (gate_logits + pos_logits) / math.sqrt(d)
  return _np_softmax_attend(attn_logits, mask > 0, v)


def test_cope_matches_the_reference_values_and_gradients():
  enc = encoders.make('cope', npos=4)  # small npos: the clamp at npos - 1 is exercised at L = 7
  params = enc.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL)
  table = _weights((D, 4), seed=1)
  q, k, v, x = _inputs()
  ref = lambda t: _per_head(lambda qh, kh, vh, b, h: _np_cope(qh, kh, vh, t, 4), q, k, v)
  run = lambda t: _attend(enc, {**params, 'embedding': t}, q, k, v, x)
  _check_values_and_grad(run, ref, table)
  # Gradients with respect to the queries (through the gates, the interpolation and the content).
  ref_q = lambda qq: _per_head(lambda qh, kh, vh, b, h: _np_cope(qh, kh, vh, table, 4), qq, k, v)
  run_q = lambda qq: _attend(enc, {**params, 'embedding': jnp.asarray(table, jnp.float32)}, qq, k, v, x)
  _check_values_and_grad(run_q, ref_q, q)


def test_cope_positions_count_the_open_gates():
  gates = jnp.asarray([[1.0, 0.0, 1.0, 1.0]])
  np.testing.assert_allclose(cope_lib.contextual_positions(gates, 65), [[3.0, 2.0, 2.0, 1.0]])
  np.testing.assert_allclose(cope_lib.contextual_positions(gates, 3), [[2.0, 2.0, 2.0, 1.0]])


# ----------------------------------------------------------------------------------------------------------
# FoX


def _np_fox(q, k, v, x, kernel, bias, key_mask=None):
  """forgetting_attention for one batch element, all heads; padded tokens' log f = 0 (its seq_start)."""
  log_fgate = _log_sigmoid(x @ kernel + bias)  # (L, H)
  if key_mask is not None:
    log_fgate = np.where(key_mask[:, None], log_fgate, 0.0)
  log_lambda = np.cumsum(log_fgate, axis=0)
  out = np.zeros(q.shape)
  valid = _causal(q.shape[0]) & (np.ones(q.shape[0], bool) if key_mask is None else key_mask)[None, :]
  for h in range(q.shape[1]):
    logits = q[:, h] @ k[:, h].T / math.sqrt(q.shape[-1]) + log_lambda[:, None, h] - log_lambda[None, :, h]
    out[:, h] = _np_softmax_attend(logits, valid, v[:, h])
  return out


def test_fox_matches_the_reference_values_and_gradients():
  enc = encoders.make('fox')
  params = enc.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL)
  q, k, v, x = _inputs()
  kernel, bias = _weights((MODEL, H), 2), _weights((H,), 3)
  ref = lambda w: np.stack([_np_fox(q[b], k[b], v[b], x[b], w, bias) for b in range(B)])
  run = lambda w: _attend(enc, {**params, 'gate_kernel': w, 'gate_bias': jnp.asarray(bias, jnp.float32)}, q, k, v, x)
  _check_values_and_grad(run, ref, kernel)
  ref_b = lambda bb: np.stack([_np_fox(q[b], k[b], v[b], x[b], kernel, bb) for b in range(B)])
  run_b = lambda bb: _attend(
      enc, {**params, 'gate_kernel': jnp.asarray(kernel, jnp.float32), 'gate_bias': bb}, q, k, v, x
  )
  _check_values_and_grad(run_b, ref_b, bias)


def test_fox_with_left_padding_matches_the_reference_seq_start():
  enc = encoders.make('fox')
  q, k, v, x = _inputs()
  kernel, bias = _weights((MODEL, H), 2), _weights((H,), 3)
  params = {
      **enc.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL),
      'gate_kernel': jnp.asarray(kernel, jnp.float32),
      'gate_bias': jnp.asarray(bias, jnp.float32),
  }
  key_mask = np.array([[True] * L, [False] * 3 + [True] * (L - 3)])
  got = _attend(enc, params, q, k, v, x, key_mask=jnp.asarray(key_mask))
  want = np.stack([_np_fox(q[b], k[b], v[b], x[b], kernel, bias, key_mask[b]) for b in range(B)])
  np.testing.assert_allclose(np.asarray(got)[1, 3:], want[1, 3:], atol=2e-5, rtol=1e-4)
  np.testing.assert_allclose(np.asarray(got)[0], want[0], atol=2e-5, rtol=1e-4)


def test_fox_bias_only_is_the_alibi_form_bias_it_reduces_to():
  bias_only = encoders.make('fox', bias_only=True)
  assert bias_only.kind is encoders.Kind.SCALAR_BIAS and bias_only.is_toeplitz
  params = {**bias_only.init(jax.random.key(0), 4), 'gate_bias': jnp.asarray([-1.0, 0.0, 0.5, 3.0])}
  slopes = -_log_sigmoid(np.asarray([-1.0, 0.0, 0.5, 3.0]))  # m_h = -log sigmoid(b_h)
  alibi = encoders.make('alibi', learnable_slopes=True)
  alibi_params = {**alibi.init(jax.random.key(0), 4), 'log_slopes': jnp.asarray(np.log(slopes), jnp.float32)}
  np.testing.assert_allclose(
      relpos_jax.bias_matrix(bias_only, params, 9, 9),
      relpos_jax.bias_matrix(alibi, alibi_params, 9, 9),
      atol=1e-5,
      rtol=1e-5,
  )
  # The data-dependent FoX with a zero gate kernel has the constant gate sigmoid(b_h): the same attention.
  full = encoders.make('fox')
  q, k, v, x = _inputs()
  full_params = {
      **full.init(jax.random.key(0), 4, head_dim=D, model_dim=MODEL),
      'gate_kernel': jnp.zeros((MODEL, 4)),
      'gate_bias': params['gate_bias'],
  }
  q4, k4, v4 = (np.concatenate([a, a], axis=2) for a in (q, k, v))
  np.testing.assert_allclose(
      _attend(full, full_params, q4, k4, v4, x), _attend(bias_only, params, q4, k4, v4, x), atol=1e-5, rtol=1e-5
  )


# ----------------------------------------------------------------------------------------------------------
# Stick-breaking


def _np_stickbreaking(q, k, v, attend_current=False):
  """sb_ref.stickbreaking plus the reference test's o + rem * v, for one head."""
  length = q.shape[0]
  cum_weight = np.tril(np.ones((length, length)), -1)
  mask = np.triu(np.ones((length, length)), 1 if attend_current else 0).astype(bool)  # True = masked
  logits = q @ k.T / math.sqrt(q.shape[-1])
  log_z = np.where(mask, -1e5, _log_sigmoid(logits))
  log_beta = np.where(mask, 0.0, _log_sigmoid(-logits))
  re_cum_log_beta = np.einsum('ij,jk->ik', log_beta, cum_weight)
  att = np.exp(log_z + re_cum_log_beta)
  return att @ v + (1 - att.sum(-1))[:, None] * v


@pytest.mark.parametrize('attend_current', [False, True])
def test_stick_breaking_matches_the_reference_values_and_gradients(attend_current):
  enc = encoders.make('stick_breaking', attend_current=attend_current)
  params = enc.init(jax.random.key(0), H)
  q, k, v, x = _inputs()
  ref = lambda qq: _per_head(lambda qh, kh, vh, b, h: _np_stickbreaking(qh, kh, vh, attend_current), qq, k, v)
  _check_values_and_grad(lambda qq: _attend(enc, params, qq, k, v, x), ref, q)
  ref_k = lambda kk: _per_head(lambda qh, kh, vh, b, h: _np_stickbreaking(qh, kh, vh, attend_current), q, kk, v)
  _check_values_and_grad(lambda kk: _attend(enc, params, q, kk, v, x), ref_k, k)


@pytest.mark.parametrize('length', [1, 7, 8, 9, 31, 64, 100])
@pytest.mark.parametrize('chunk', [8, 32])
def test_stick_breaking_reverse_cumsum_equals_numpy_on_and_off_chunk_boundaries(length, chunk):
  from relpos_jax.encoders.stick_breaking import reverse_exclusive_cumsum

  x = np.random.default_rng(length).normal(size=(2, 3, length)) * 10
  expected = np.flip(np.cumsum(np.flip(x, -1), -1), -1) - x
  np.testing.assert_allclose(reverse_exclusive_cumsum(jnp.asarray(x, jnp.float32), chunk), expected, atol=1e-4)


def test_stick_breaking_weights_stay_exact_at_large_logits():
  """log beta = z + log(1 - beta) cancels z: at |z| = 80 the weights still equal the reference's."""
  from relpos_jax.encoders.stick_breaking import stick_breaking_weights

  logits = np.array([[-80.0, 80.0, 3.0, -2.0, 80.0, 40.0]])
  allowed = np.ones(logits.shape, bool)
  weights, carry = stick_breaking_weights(jnp.asarray(logits, jnp.float32), jnp.asarray(allowed))
  log_rest = _log_sigmoid(-logits)
  after = np.flip(np.cumsum(np.flip(log_rest, -1), -1), -1) - log_rest
  np.testing.assert_allclose(weights, np.exp(_log_sigmoid(logits) + after), atol=1e-6)
  np.testing.assert_allclose(carry, log_rest.sum(-1), rtol=1e-6)


# ----------------------------------------------------------------------------------------------------------
# DAPE


def _leaky(x):
  return np.where(x > 0, x, 0.01 * x)


def _np_conv_1xk(x, kernel, bias):
  """torch Conv2d(C_in, C_out, (1, k), padding (0, k // 2)) on x (C_in, Lq, Lk); kernel (k, C_in, C_out)."""
  size = kernel.shape[0]
  pad = size // 2
  c_in, q_len, k_len = x.shape
  padded = np.zeros((c_in, q_len, k_len + 2 * pad))
  padded[:, :, pad : pad + k_len] = x
  out = np.zeros((kernel.shape[2], q_len, k_len))
  for o in range(kernel.shape[2]):
    for i in range(q_len):
      for j in range(k_len):
        out[o, i, j] = bias[o] + np.sum(kernel[:, :, o].T * padded[:, i, j : j + size])
  return out


def _np_dape(scores, bias, layers, version, zero_masked_hidden=True):
  """DAPE's x + a + mlp2(cat(x, a)) for one batch element: scores (H, L, L), bias (H, L, L).

  version 2 is Alibi_DAPEV2: mlp2(tril(cat)); zero_masked_hidden also zeroes the hidden activations above
  the diagonal (relpos_jax's one documented change, so that decoding equals the full forward).
  """
  x_a_bias = np.concatenate([scores, bias], axis=0)  # (2H, L, L)
  (k1, b1), (k2, b2) = [(np.asarray(l['kernel'], np.float64), np.asarray(l['bias'], np.float64)) for l in layers]
  if version == 1:
    hidden = _leaky(np.einsum('cij,cd->dij', x_a_bias, k1[0]) + b1[:, None, None])
    out = np.einsum('cij,cd->dij', hidden, k2[0]) + b2[:, None, None]
  else:
    tril = np.tril(np.ones(scores.shape[-2:]))
    hidden = _leaky(_np_conv_1xk(x_a_bias * tril, k1, b1))
    if zero_masked_hidden:
      hidden = hidden * tril
    out = _np_conv_1xk(hidden, k2, b2)
  return scores + bias + out


@pytest.mark.parametrize('version', [1, 2])
def test_dape_matches_the_reference_values_and_gradients(version):
  enc = encoders.from_spec(f'dape(kerple_log, version={version}, mlp_width=6)')
  params = enc.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL)
  q, k, v, x = _inputs()
  bias = np.asarray(relpos_jax.bias_matrix(enc.base, params['base'], L, L), np.float64)

  def ref(qq, zero_masked_hidden=True):
    out = np.zeros(v.shape)
    for b in range(B):
      scores = np.einsum('ihd,jhd->hij', qq[b], k[b]) / math.sqrt(D)
      logits = _np_dape(scores, bias, params['layers'], version, zero_masked_hidden)
      for h in range(H):
        out[b, :, h] = _np_softmax_attend(logits[h], _causal(), v[b, :, h])
    return out

  _check_values_and_grad(lambda qq: _attend(enc, params, qq, k, v, x), ref, q)
  if version == 2:
    # The unmodified reference agrees on the last row, whose masked neighbours are off the edge anyway.
    got = np.asarray(_attend(enc, params, q, k, v, x))
    np.testing.assert_allclose(got[:, -1], ref(q, zero_masked_hidden=False)[:, -1], atol=2e-5, rtol=1e-4)
    assert np.max(np.abs(got[:, :-1] - ref(q, zero_masked_hidden=False)[:, :-1])) > 1e-4


def test_dape_rejects_what_it_cannot_wrap():
  for bad in (
      'dape(rope)',
      'dape(shaw_vector)',
      'dape(alibi, version=3)',
      'dape(alibi, mlp_width=0)',
      'dape(alibi, version=2, kernel_size=2)',
      'dape(alibi, kernel_size=5)',
  ):
    with pytest.raises(ValueError, match='dape'):
      encoders.from_spec(bad)


# ----------------------------------------------------------------------------------------------------------
# PaTH


def _np_naive_path_logits(q, k, w, beta, chunk_size):
  """fla's naive_path_attn logits (before the scale and softmax) for one head, no forget gate."""
  length = q.shape[0]
  pad = (-length) % chunk_size
  q, k, w = (np.concatenate([a, np.zeros((pad, a.shape[1]))]) for a in (q, k, w))
  beta = np.concatenate([beta, np.zeros(pad)])
  seq_len, n, bt = q.shape[0], q.shape[0] // chunk_size, chunk_size
  w_beta = w * beta[:, None]
  q, k, w, w_beta = (a.reshape(n, bt, -1) for a in (q, k, w, w_beta))
  mask = np.triu(np.ones((bt, bt), bool), 0)
  t_mat = -np.where(mask, 0.0, w_beta @ np.swapaxes(w, -1, -2))
  for i in range(1, bt):
    t_mat[..., i, :i] = t_mat[..., i, :i] + (t_mat[..., i, :, None] * t_mat[..., :, :i]).sum(-2)
  t_mat = t_mat + np.eye(bt)
  twbk = t_mat @ np.where(mask, 0.0, w_beta @ np.swapaxes(k, -1, -2))
  qw = np.tril(q @ np.swapaxes(w, -1, -2))
  twb = t_mat @ w_beta
  a_local = np.tril(q @ np.swapaxes(k, -1, -2)) - qw @ twbk
  q = q - qw @ twb
  k = k - np.swapaxes(twbk, -1, -2) @ w
  h_mat = np.swapaxes(w, -1, -2) @ twb
  a = np.zeros((seq_len, seq_len))
  q, k = q.reshape(seq_len, -1), k.reshape(seq_len, -1)
  for i in range(0, seq_len, bt):
    q_i = q[i : i + bt].copy()
    for j in range(i - bt, -bt, -bt):
      a[i : i + bt, j : j + bt] = q_i @ k[j : j + bt].T
      q_i = q_i - q_i @ h_mat[j // bt]
  for i in range(n):
    a[i * bt : (i + 1) * bt, i * bt : (i + 1) * bt] = a_local[i]
  return np.where(np.tril(np.ones((seq_len, seq_len), bool)), a, 0.0)[:length, :length]


def _np_path_by_definition(q, k, w, beta):
  """a_ij = q_i^T H_i H_{i-1} ... H_{j+1} k_j with explicit d x d matrices."""
  length, d = q.shape
  out = np.zeros((length, length))
  for i in range(length):
    product = np.eye(d)
    for j in range(i, -1, -1):
      out[i, j] = q[i] @ product @ k[j]
      product = product @ (np.eye(d) - beta[j] * np.outer(w[j], w[j]))
  return out


def _unit_rows(x):
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize('block_size', [3, 64])
def test_path_logits_match_fla_naive_and_the_definition(block_size):
  rng = np.random.default_rng(4)
  length = 9
  q, k = rng.normal(size=(2, length, D))
  w = _unit_rows(rng.normal(size=(length, D)))
  beta = 2 * _sigmoid(rng.normal(size=length))
  naive = _np_naive_path_logits(q, k, w, beta, chunk_size=4)
  np.testing.assert_allclose(naive, _np_path_by_definition(q, k, w, beta), atol=1e-10)
  got = path_lib.householder_logits(
      jnp.asarray(q)[None, :, None],
      jnp.asarray(k)[None, :, None],
      jnp.asarray(w)[None, :, None],
      jnp.asarray(beta)[None, :, None],
      jnp.arange(length),
      block_size=block_size,
  )[0, 0]
  np.testing.assert_allclose(got, naive, atol=1e-4, rtol=1e-4)


def test_path_logits_gradients_match_the_definition():
  rng = np.random.default_rng(6)
  length = 6
  q, k = rng.normal(size=(2, length, D))
  w = _unit_rows(rng.normal(size=(length, D)))
  beta = 2 * _sigmoid(rng.normal(size=length))
  run = lambda a: path_lib.householder_logits(
      jnp.asarray(q, jnp.float32)[None, :, None],
      jnp.asarray(k, jnp.float32)[None, :, None],
      a[None, :, None],
      jnp.asarray(beta, jnp.float32)[None, :, None],
      jnp.arange(length),
      block_size=4,
  )[0, 0]
  _check_values_and_grad(run, lambda a: _np_path_by_definition(q, k, a, beta), w)
  run_beta = lambda bb: path_lib.householder_logits(
      jnp.asarray(q, jnp.float32)[None, :, None],
      jnp.asarray(k, jnp.float32)[None, :, None],
      jnp.asarray(w, jnp.float32)[None, :, None],
      bb[None, :, None],
      jnp.arange(length),
      block_size=4,
  )[0, 0]
  _check_values_and_grad(run_beta, lambda bb: _np_path_by_definition(q, k, w, bb), beta)


def _np_path_layer(q, k, v, x, params, rank):
  """PaTHAttention's training branch for one batch element: w, beta from x, then the naive logits."""
  p = {name: np.asarray(value, np.float64) for name, value in params.items() if name != 'dims'}
  w = x @ p['w_down'] @ p['w_up']  # Linear(hidden, 32) -> Linear(32, kv_dim)
  size = p['w_conv'].shape[0]
  conv = np.zeros_like(w)
  for t in range(w.shape[0]):  # ShortConvolution: causal depthwise conv, then silu
    for m in range(size):
      if t - (size - 1) + m >= 0:
        conv[t] += p['w_conv'][m] * w[t - (size - 1) + m]
  w = conv * _sigmoid(conv)
  w = w.reshape(w.shape[0], H, D)
  w = w / np.sqrt(np.sum(w * w, -1, keepdims=True) + 1e-6)
  beta = 2 * _sigmoid(x @ p['beta_kernel'] + p['beta_bias'])
  out = np.zeros(q.shape)
  for h in range(H):
    logits = _np_naive_path_logits(q[:, h], k[:, h], w[:, h], beta[:, h], chunk_size=4)
    out[:, h] = _np_softmax_attend(logits / math.sqrt(D), _causal(q.shape[0]), v[:, h])
  return out


def test_path_layer_matches_the_reference_values_and_gradients():
  enc = encoders.make('path', rank=5)
  params = enc.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL)
  params = {
      **params,
      'w_down': params['w_down'] * 20,
      'w_up': params['w_up'] * 20,  # O(1) directions
      'beta_bias': jnp.asarray([0.3, -0.2]),
  }
  q, k, v, x = _inputs()
  run = lambda xx: _attend(enc, params, q, k, v, xx)
  ref = lambda xx: np.stack([_np_path_layer(q[b], k[b], v[b], xx[b], params, 5) for b in range(B)])
  _check_values_and_grad(run, ref, x, grad_atol=5e-4)


def test_path_with_fox_adds_the_gate_sums_before_the_scaling_as_the_reference():
  """PaTH-FoX (fla naive_path_attn): softmax((A + g_i - g_j) * scale), the gate sums inside the scaled logit;
  FoX alone adds them after the scaling (its own reference, above)."""
  path, fox = encoders.make('path', rank=5), encoders.make('fox')
  path_params = path.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL)
  path_params = {**path_params, 'w_down': path_params['w_down'] * 20, 'w_up': path_params['w_up'] * 20}
  kernel, bias = _weights((MODEL, H), 2), _weights((H,), 3)
  fox_params = {**fox.init(jax.random.key(1), H, head_dim=D, model_dim=MODEL), 'gate_bias': jnp.asarray(bias)}
  q, k, v, x = _inputs()
  parts = (path, fox)

  def run(w):
    params = [path_params, {**fox_params, 'gate_kernel': w}]
    features = terms.parts.token_features(parts, params, jnp.asarray(x, jnp.float32))
    f32 = lambda a: jnp.asarray(a, jnp.float32)
    return attend(
        call.AttentionInputs.checked(f32(q), f32(k), f32(v), features=features),
        parts,
        params,
        call.AttentionSettings.checked(causal=True),
    )

  def reference(w):
    out = np.zeros(q.shape)
    for b in range(B):
      p = {name: np.asarray(value, np.float64) for name, value in path_params.items() if name != 'dims'}
      wd = x[b] @ p['w_down'] @ p['w_up']
      size = p['w_conv'].shape[0]
      conv = np.zeros_like(wd)
      for t in range(wd.shape[0]):
        for m in range(size):
          if t - (size - 1) + m >= 0:
            conv[t] += p['w_conv'][m] * wd[t - (size - 1) + m]
      wd = (conv * _sigmoid(conv)).reshape(L, H, D)
      wd = wd / np.sqrt(np.sum(wd * wd, -1, keepdims=True) + 1e-6)
      beta = 2 * _sigmoid(x[b] @ p['beta_kernel'] + p['beta_bias'])
      g = np.cumsum(_log_sigmoid(x[b] @ w + bias), axis=0)  # (L, H)
      for h in range(H):
        a = _np_naive_path_logits(q[b, :, h], k[b, :, h], wd[:, h], beta[:, h], chunk_size=4)
        logits = (a + g[:, None, h] - g[None, :, h]) / math.sqrt(D)
        out[b, :, h] = _np_softmax_attend(logits, _causal(L), v[b, :, h])
    return out

  _check_values_and_grad(run, reference, kernel, grad_atol=5e-4)


def test_path_memory_has_no_length_squared_head_dim_buffer():
  """The logits' backward pass keeps O(L^2 d / block_size + L^2) floats, not O(L^2 d) (nor L^2 d^2)."""
  length, d = 256, 16
  q = jnp.ones((1, length, 1, d))
  w = jnp.ones((1, length, 1, d)) / 4.0
  beta = jnp.ones((1, length, 1))

  def loss(q):
    return jnp.sum(path_lib.householder_logits(q, q, w, beta, jnp.arange(length), block_size=64))

  # The largest intermediate the backward pass saves, from the jaxpr of the VJP's residuals.
  _, vjp = jax.vjp(loss, q)
  residual_sizes = [leaf.size for leaf in jax.tree.leaves(vjp) if hasattr(leaf, 'size')]
  assert max(residual_sizes) <= 2 * length * length, max(residual_sizes)


# ----------------------------------------------------------------------------------------------------------
# Temperature


def test_ssmax_and_logn_match_their_formulas():
  q, k, v, x = _inputs(length=12)
  ssmax = encoders.make('ssmax')
  params = {**ssmax.init(jax.random.key(0), H), 's': jnp.asarray([0.43, 0.9])}
  logn = encoders.make('logn', train_length=4)
  logn_list = [math.log(i, 4) if i > 4 else 1 for i in range(1, 13)]  # Qwen's logn_list
  for enc, p, factor in (
      (ssmax, params, lambda i, h: [0.43, 0.9][h] * math.log(i + 1)),
      (logn, logn.init(jax.random.key(0), H), lambda i, h: logn_list[i]),
  ):

    def ref(qq, enc=enc, factor=factor):
      def head(qh, kh, vh, b, h):
        logits = qh @ kh.T / math.sqrt(D)
        logits = logits * np.asarray([factor(i, h) for i in range(12)])[:, None]
        return _np_softmax_attend(logits, _causal(12), vh)

      return _per_head(head, qq, k, v)

    _check_values_and_grad(lambda qq, enc=enc, p=p: _attend(enc, p, qq, k, v, x), ref, q)


def test_llama4_scale_matches_its_formula_and_refuses_bad_fields():
  """Ministral 3's query scale 1 + beta ln(1 + floor(p / L_orig)), by hand at beta 0.5, L_orig 4: 1 for p < 4,
  1 + 0.5 ln 2 for 4 <= p < 8, 1 + 0.5 ln 3 from 8 (every head alike); against transformers in tests/reference."""
  q, k, v, x = _inputs(length=12)
  enc = encoders.make('llama4_scale', beta=0.5, original_max_position=4)
  params = enc.init(jax.random.key(0), H)
  factors = [1.0] * 4 + [1 + 0.5 * math.log(2)] * 4 + [1 + 0.5 * math.log(3)] * 4

  def ref(qq):
    def head(qh, kh, vh, b, h):
      logits = qh @ kh.T / math.sqrt(D) * np.asarray(factors)[:, None]
      return _np_softmax_attend(logits, _causal(12), vh)

    return _per_head(head, qq, k, v)

  _check_values_and_grad(lambda qq: _attend(enc, params, qq, k, v, x), ref, q)
  for field, value in (('beta', -0.1), ('beta', float('nan')), ('original_max_position', 0)):
    with pytest.raises(ValueError, match=f'{field}'):
      encoders.make('llama4_scale', **{field: value})


def test_temperature_counts_only_real_keys():
  """n_i counts the keys query i sees: left padding changes nothing for the real tokens."""
  enc = encoders.make('ssmax')
  params = enc.init(jax.random.key(0), H)
  q, k, v, x = _inputs()
  key_mask = jnp.asarray([[True] * L, [False] * 3 + [True] * (L - 3)])
  padded = _attend(enc, params, q, k, v, x, key_mask=key_mask)
  unpadded = _attend(enc, params, q[1:, 3:], k[1:, 3:], v[1:, 3:], x[1:, 3:])
  np.testing.assert_allclose(padded[1, 3:], unpadded[0], atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------------
# Shared properties: validation, causal-only, padding transparency, long lengths.


@pytest.mark.parametrize(
    'spec',
    [
        'cope(npos=1)',
        'cope(npos=2.5)',
        'fox(bias_only=1)',
        'path(rank=0)',
        'path(block_size=0)',
        'stick_breaking(attend_current=None)',
        'ssmax(init_s=0.0)',
        'ssmax(init_s=1e999)',
        'logn(train_length=1)',
    ],
)
def test_bad_hyperparameters_name_value_and_what_is_allowed(spec):
  with pytest.raises(ValueError, match='is invalid; allowed'):
    encoders.from_spec(spec)


def test_two_normalizers_or_two_content_replacements_are_refused():
  for spec in ('stick_breaking + stick_breaking(attend_current=True)', 'path + path(rank=4)'):
    with pytest.raises(ValueError, match='at most one'):
      encoders.from_spec(spec)
  with pytest.raises(ValueError, match='a position remap only beside parts that keep the content logit'):
    encoders.from_spec('path + rerope(rope, window=4)')


@pytest.mark.parametrize('spec', ['cope', 'fox', 'stick_breaking', 'path', 'dape(alibi, version=2)'])
def test_left_padding_is_transparent(spec):
  """A left-padded sequence gives its real tokens the outputs of the unpadded sequence."""
  enc = encoders.from_spec(spec)
  params = enc.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL)
  q, k, v, x = _inputs()
  key_mask = jnp.asarray([[True] * L, [False] * 3 + [True] * (L - 3)])
  padded = _attend(enc, params, q, k, v, x, key_mask=key_mask)
  unpadded = _attend(enc, params, q[1:, 3:], k[1:, 3:], v[1:, 3:], x[1:, 3:])
  np.testing.assert_allclose(padded[1, 3:], unpadded[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('spec', ['cope', 'fox', 'stick_breaking', 'path', 'dape(kerple_log)'])
def test_causal_only_encoders_refuse_a_bidirectional_layer(spec):
  from flax import nnx
  from relpos_jax.nn import RelativeMultiHeadAttention

  enc = encoders.from_spec(spec)
  if not enc.requires_causal:
    RelativeMultiHeadAttention(H, MODEL, enc, causal=False, rngs=nnx.Rngs(0))  # dape(kerple_log): both
    return
  with pytest.raises(ValueError, match='causal-only'):
    RelativeMultiHeadAttention(H, MODEL, enc, causal=False, rngs=nnx.Rngs(0))


@pytest.mark.parametrize(
    'spec',
    ['cope', 'fox', 'stick_breaking', 'path', 'dape(kerple_log, version=2)', 'rope + ssmax', 'logn(train_length=64)'],
)
def test_finite_values_and_gradients_at_long_lengths(spec):
  length, heads, head_dim = 1024, 1, 4  # one small head: the length is what is tested
  enc = encoders.from_spec(spec)
  parts = relpos_jax.nn.terms.parts.attention_parts(enc)
  params = relpos_jax.nn.terms.parts.init_params(
      parts, jax.random.key(0), num_heads=heads, head_dim=head_dim, model_dim=MODEL
  )
  rng = np.random.default_rng(0)
  q, k, v = (jnp.asarray(3 * rng.normal(size=(1, length, heads, head_dim)), jnp.float32) for _ in range(3))
  x = jnp.asarray(rng.normal(size=(1, length, MODEL)), jnp.float32)

  @jax.jit
  def loss(params, q):
    features = terms.parts.token_features(parts, params, x)
    out = attend(
        call.AttentionInputs.checked(q, k, v, features=features),
        parts,
        params,
        call.AttentionSettings.checked(causal=True, implementation='einsum'),
    )
    return jnp.mean(out**2)

  value, grads = jax.value_and_grad(loss, argnums=(0, 1))(params, q)
  assert bool(jnp.isfinite(value))
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))


@pytest.mark.parametrize('spec', ['cope', 'fox', 'path', 'stick_breaking', 'dape(alibi, version=2)', 'ssmax'])
def test_vmap_over_the_batch_equals_the_batched_call(spec):
  enc = encoders.from_spec(spec)
  params = enc.init(jax.random.key(0), H, head_dim=D, model_dim=MODEL)
  q, k, v, x = (jnp.asarray(a, jnp.float32) for a in _inputs())
  batched = _attend(enc, params, q, k, v, x)
  mapped = jax.vmap(lambda *a: _attend(enc, params, *(t[None] for t in a))[0])(q, k, v, x)
  np.testing.assert_allclose(mapped, batched, atol=1e-5, rtol=1e-5)
