"""Attention parts composed: compositions that ran something other than what they said (remaps over bases whose
frequencies follow the length, two score transforms reading neighbouring keys, stick-breaking beside DAPE v2),
CoPE tiled under x64, and the tiled stick-breaking backward's precision. Each test failed before its fix
(issue 36, part B)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders
from relpos_jax.nn import functional, terms
from relpos_jax.nn import call

# ---------------------------------------------------------------------------------------------------------
# The tiled stick-breaking backward against a float64 reference.


def _stick_breaking_grads(q, k, v, cotangent, implementation, dtype, spec='stick_breaking'):
  parts = terms.parts.attention_parts(encoders.from_spec(spec))
  params = [None] * len(parts)

  def loss(q, k, v):
    out = functional.attend(
        call.AttentionInputs.checked(q, k, v),
        parts,
        params,
        call.AttentionSettings.checked(causal=True, implementation=implementation),
    )
    return jnp.sum(out * cotangent.astype(dtype))

  return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*(jnp.asarray(x, dtype) for x in (q, k, v)))


def _relative(a, ref):
  a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
  return np.linalg.norm(a - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize('length, logit_scale', [(2048, 1.0), (2048, 200.0)])
def test_tiled_stick_breaking_gradients_match_a_float64_reference(length, logit_scale):
  """The carry's cotangent used to be G - R (all keys' sum of g A minus the nearer keys'): a difference of two
  nearly equal float32 sums whose error every farther key's dq picked up (2e-5 relative at L = 2,048, 2.6e-4
  with |z| ~ 200; the explicit path: 2e-7, 7e-6). Now the farther keys' sum is accumulated directly."""
  rng = np.random.default_rng(0)
  q, k, v, cotangent = (rng.standard_normal((1, length, 1, 16)) for _ in range(4))
  q = q * logit_scale  # logits q . k / 4 of standard deviation ~ logit_scale
  with jax.enable_x64(True):
    reference = [np.asarray(g) for g in _stick_breaking_grads(q, k, v, cotangent, 'einsum', jnp.float64)]
  explicit = _stick_breaking_grads(q, k, v, cotangent, 'einsum', jnp.float32)
  tiled = _stick_breaking_grads(q, k, v, cotangent, 'blockwise', jnp.float32)
  for name, t, e, r in zip(('dq', 'dk', 'dv'), tiled, explicit, reference):
    assert _relative(t, e) < 1e-5, (name, _relative(t, e))
    assert _relative(t, r) < max(1e-5, 2 * _relative(e, r)), (name, _relative(t, r), _relative(e, r))


@pytest.mark.parametrize('spec', ['cope'])
def test_tiled_cope_runs_under_enable_x64(spec):
  """The softmax scale reached CoPE's tiled term as a float64 under jax_enable_x64 and turned the tile loop's
  float32 carry into float64: a TypeError from the while loop. Outputs and gradients as the explicit path."""
  rng = np.random.default_rng(1)
  q, k, v, cotangent = (rng.standard_normal((1, 9, 2, 8)).astype(np.float32) for _ in range(4))
  parts = terms.parts.attention_parts(encoders.from_spec(spec))
  params = [part.init(jax.random.key(0), 2, head_dim=8, model_dim=16) for part in parts]
  params = [jax.tree.map(lambda x: x + 0.1, p) for p in params]  # CoPE's table starts at zero

  def run(implementation):
    def loss(q, k, v):
      block_size = (4, 4) if implementation == 'blockwise' else None
      out = functional.attend(
          call.AttentionInputs.checked(q, k, v),
          parts,
          params,
          call.AttentionSettings.checked(causal=True, implementation=implementation, block_size=block_size),
      )
      return jnp.sum(out * cotangent), out

    (_, out), grads = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(q, k, v)
    return out, grads

  with jax.enable_x64(True):
    out, grads = run('blockwise')
    assert out.dtype == jnp.float32
  ref_out, ref_grads = run('einsum')
  np.testing.assert_allclose(out, ref_out, atol=1e-5, rtol=1e-5)
  for g, r in zip(grads, ref_grads):
    np.testing.assert_allclose(g, r, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# Stick-breaking beside DAPE version 2 (a score transform reading neighbouring keys).


def _layer_pair(spec, causal=True, block=(4, 3)):
  from flax import nnx

  from relpos_jax.nn import RelativeMultiHeadAttention

  return [
      RelativeMultiHeadAttention(
          2,
          16,
          encoders.from_spec(spec),
          causal=causal,
          implementation=impl,
          block_size=block if impl == 'blockwise' else None,
          rngs=nnx.Rngs(0),
      )
      for impl in ('blockwise', 'einsum')
  ]


def _assert_same_values_and_grads(fast, slow, x, padding_mask=None):
  from flax import nnx

  cotangent = jax.random.normal(jax.random.key(7), x.shape)

  def value_and_grads(layer):
    def loss(layer, x):
      y = layer(x, padding_mask=padding_mask)
      return jnp.sum(y * cotangent), y

    (_, y), (g_layer, g_x) = nnx.value_and_grad(loss, argnums=(0, 1), has_aux=True)(layer, x)
    return y, g_x, jax.tree.leaves(nnx.state(g_layer))

  y1, gx1, gl1 = value_and_grads(fast)
  y2, gx2, gl2 = value_and_grads(slow)
  np.testing.assert_allclose(y1, y2, atol=1e-4, rtol=1e-4)
  np.testing.assert_allclose(gx1, gx2, atol=1e-4, rtol=1e-4)
  assert len(gl1) == len(gl2) > 0
  for a, b in zip(gl1, gl2):
    np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    'spec',
    [
        'stick_breaking + dape(alibi, version=2)',
        pytest.param('dape(kerple_log, version=2) + stick_breaking', marks=pytest.mark.slow),
    ],
)
def test_stick_breaking_beside_dape_v2_runs_on_both_paths(spec):
  """It passed validation and then failed on every implementation, the explicit one included, with an error
  telling the user to use the explicit one. Now both paths run it, and agree (outputs and every gradient),
  causal with padding and tiles that do not divide L."""
  x = jax.random.normal(jax.random.key(0), (2, 11, 16))
  padding = jnp.array([[False] * 2 + [True] * 9, [True] * 8 + [False] * 3])
  fast, slow = _layer_pair(spec)
  _assert_same_values_and_grads(fast, slow, x, padding_mask=padding)


# ---------------------------------------------------------------------------------------------------------
# Remaps over a rotary base whose frequencies follow the current length.

_LENGTH_DEPENDENT_ROPES = [
    'rope(scaling="dynamic", factor=2.0, original_max_position=4)',
    'rope(scaling="yarn", dynamic=True, original_max_position=4)',
    'rope(scaling="longrope", factor=4.0, original_max_position=6)',
]
_REMAPS = ['self_extend({}, group_size=2, window=4)', 'dual_chunk({}, chunk=6, local_window=2)', 'rerope({}, window=4)']


@pytest.mark.parametrize('remap', _REMAPS)
@pytest.mark.parametrize('base', _LENGTH_DEPENDENT_ROPES)
def test_remaps_refuse_a_base_whose_frequencies_follow_the_length(remap, base):
  """The base read its "current length" from the remapped positions of whatever it was handed: padding changed
  real tokens' outputs, a partial last tile changed results, the tiled default differed from the explicit path
  by 0.48 at L = 600 and decoding from the forward by up to 0.08. Refused, naming the key, the value and what
  is allowed."""
  spec = remap.format(base)
  with pytest.raises(ValueError, match=r'base=.*is invalid; allowed: a rotary encoder whose frequencies do not follow'):
    encoders.from_spec(spec)


@pytest.mark.parametrize('remap', _REMAPS)
@pytest.mark.parametrize(
    'base', ['rope', 'rope(scaling="yarn", factor=2.0, original_max_position=4)', 'rope(scaling="ntk", factor=2.0)']
)
def test_remaps_keep_fixed_frequency_bases(remap, base):
  encoders.from_spec(remap.format(base))


def test_two_score_transforms_reading_neighbouring_keys_are_refused_when_composed():
  """Like stick-breaking beside DAPE v2, two DAPE v2 passed validation and then failed in attention (on every
  path): now the sum refuses them, naming the key, the value and what is allowed."""
  with pytest.raises(ValueError, match=r'parts=.* is invalid; allowed: at most one part that reads neighbouring keys'):
    encoders.from_spec('dape(alibi, version=2) + dape(t5, version=2, kernel_size=5)')
  encoders.from_spec('dape(alibi, version=2) + fox')  # one is fine
