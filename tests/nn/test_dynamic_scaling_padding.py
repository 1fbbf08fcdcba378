"""Length-dependent rotary rules (dynamic NTK, dynamic YaRN, LongRoPE) read each row's real length: padding does
not change the real tokens' outputs (docs/guide promises padded tokens are
transparent). Before, the padded length picked the scaling and moved the outputs by 0.02-0.08."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax.encoders.spec import from_spec
from relpos_jax.nn.attention import RelativeMultiHeadAttention
from relpos_jax.nn.linen import RelativeMultiHeadAttention as LinenAttention

LENGTH_DEPENDENT = [
    'rope(scaling="dynamic", factor=2.0, original_max_position=4)',
    'rope(scaling="yarn", dynamic=True, original_max_position=4)',
    'rope(scaling="longrope", factor=4.0, original_max_position=6)',
]
REAL, PADDED = 6, 11  # LongRoPE switches to its long factors past 6 positions: padding to 11 crossed it.


def _inputs():
  x = jax.random.normal(jax.random.key(1), (2, PADDED, 16))
  mask = jnp.arange(PADDED)[None, :] < jnp.array([[REAL], [PADDED]])  # row 0 right-padded, row 1 full
  return x, mask


@pytest.mark.parametrize('spec', LENGTH_DEPENDENT)
@pytest.mark.parametrize('causal', [True, False])
def test_padding_does_not_change_the_real_tokens_outputs(spec, causal):
  layer = RelativeMultiHeadAttention(2, 16, from_spec(spec), causal=causal, rngs=nnx.Rngs(0))
  x, mask = _inputs()
  padded = np.asarray(layer(x, padding_mask=mask))
  alone = np.asarray(layer(x[:1, :REAL]))
  np.testing.assert_allclose(padded[0, :REAL], alone[0], atol=1e-6)
  # The full row still uses its own (longer) length: the rule did change something there.
  short = np.asarray(layer(x[1:, :REAL]))
  assert not np.allclose(np.asarray(layer(x[1:]))[0, :REAL], short[0], atol=1e-4)


@pytest.mark.parametrize('spec', LENGTH_DEPENDENT)
def test_the_linen_twin_reads_the_real_length_too(spec):
  layer = LinenAttention(num_heads=2, encoder=from_spec(spec), causal=True)
  x, mask = _inputs()
  variables = layer.init(jax.random.key(0), x)
  padded = np.asarray(layer.apply(variables, x, padding_mask=mask))
  alone = np.asarray(layer.apply(variables, x[:1, :REAL]))
  np.testing.assert_allclose(padded[0, :REAL], alone[0], atol=1e-6)


def test_decoding_a_padded_prompt_reads_the_real_length():
  """A cache filled from a right-padded prompt, then one real token: as decoding the unpadded prompt."""
  spec = LENGTH_DEPENDENT[0]
  layer = RelativeMultiHeadAttention(2, 16, from_spec(spec), causal=True, rngs=nnx.Rngs(0))
  x, mask = _inputs()
  prompt = x[:1, :8]
  cache = layer.init_cache(1, 16)
  _, cache = layer.decode(prompt, cache, padding_mask=mask[:1, :8])
  padded_next, _ = layer.decode(x[:1, 8:9], cache, positions=jnp.array([[REAL]]))
  clean = layer.init_cache(1, 16)
  _, clean = layer.decode(prompt[:, :REAL], clean)
  clean_next, _ = layer.decode(x[:1, 8:9], clean)
  np.testing.assert_allclose(np.asarray(padded_next), np.asarray(clean_next), atol=1e-6)
