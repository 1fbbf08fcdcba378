"""Model-level properties for every encoder case: translation invariance of relative encodings (bidirectional)
and causality of DecoderLM (absolute encodings included, since the model adds them at its input)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax.encoders import contract
from relpos_jax.nn import DecoderLM, BidirectionalModel, ModelConfig

B, L, VOCAB = 2, 6, 11

_forward = nnx.jit(lambda model, tokens, positions: model(tokens, positions=positions))


def _config(encoder):
  return ModelConfig(vocab_size=VOCAB, encoder=encoder, num_layers=1, model_dim=16, num_heads=2, mlp_ratio=2.0)


def _tokens(seed=0):
  return jax.random.randint(jax.random.key(seed), (B, L), 0, VOCAB, jnp.int32)


def _query_dependent(encoder):
  """Relative, yet not Toeplitz: the bias also depends on the query position itself (FIRE)."""
  return any(
      p.kind is contract.Kind.SCALAR_BIAS and not p.is_toeplitz and p.is_relative for p in contract.leaves(encoder)
  )


def _causal_only(encoder):
  return any(p.requires_causal for p in contract.leaves(encoder))


def test_translation_invariance_of_relative_encoders(encoder_case):
  """Outputs at positions p .. p + L - 1 do not depend on p for relative encoders; absolute ones change.

  Query-dependent relative biases (FIRE: b(i, j) is normalised by psi(max(i, L_threshold))) are relative but
  not shift-invariant by design, and are excluded for that reason. Causal-only encoders (xPos) are tested in
  a causal model, where the property holds for the keys they are defined on.
  """
  name, encoder = encoder_case
  if _query_dependent(encoder):
    pytest.skip(
        f'{name}: its bias depends on the query position itself (not Toeplitz), so it is not '
        f'translation invariant by design'
    )
  if encoder.kind is contract.Kind.POSITION_REMAP and not encoder.is_relative:
    pytest.skip(
        f'{name}: grouped / chunked positions depend on where the sequence starts, but only beyond '
        f'the window or chunk, which defaults put past these lengths (tests/nn/test_remap.py)'
    )
  model_cls = DecoderLM if _causal_only(encoder) else BidirectionalModel
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')  # NoPE in a bidirectional model warns; tested in test_models.py.
    model = model_cls(_config(encoder), rngs=nnx.Rngs(params=0, dropout=1))
  tokens = _tokens()
  outputs = [_forward(model, tokens, jnp.broadcast_to(jnp.arange(L, dtype=jnp.int32) + p, (B, L))) for p in (0, 3, 37)]
  if encoder.is_relative:
    for out in outputs[1:]:
      np.testing.assert_allclose(out, outputs[0], atol=5e-5, rtol=1e-5)
  else:
    for out in outputs[1:]:
      assert float(jnp.max(jnp.abs(out - outputs[0]))) > 1e-3, f'{name}: absolute, yet shift-invariant'


def test_decoder_is_causal(encoder_case):
  _, encoder = encoder_case
  model = DecoderLM(_config(encoder), rngs=nnx.Rngs(params=0, dropout=1))
  tokens = _tokens()
  positions = jnp.broadcast_to(jnp.arange(L, dtype=jnp.int32), (B, L))
  full = _forward(model, tokens, positions)
  for t in (1, 4):
    changed = tokens.at[:, t].set((tokens[:, t] + 1) % VOCAB)
    out = _forward(model, changed, positions)
    np.testing.assert_array_equal(out[:, :t], full[:, :t])
    assert float(jnp.max(jnp.abs(out[:, t] - full[:, t]))) > 0
