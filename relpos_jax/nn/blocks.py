"""The pre-norm transformer block: x + Dropout(Attn(Norm(x))), then x + Dropout(MLP(Norm(x))).

Pre-norm (Xiong et al. 2020) trains without warm-up tricks at the small scales of length-generalization
studies. Dropout is on the residual branches only (not on the attention weights), which keeps
`jax.nn.dot_product_attention` usable for every kind that allows it. The residual stream stays float32;
sublayers compute in the model dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from relpos_jax.nn import attention as attention_lib

NORMS = ('rmsnorm', 'layernorm')


def make_norm(kind: str, dim: int, rngs: nnx.Rngs) -> nnx.Module:
  """RMSNorm (Zhang & Sennrich 2019) or LayerNorm (Ba et al. 2016), computed in float32."""
  if kind == 'rmsnorm':
    return nnx.RMSNorm(dim, dtype=jnp.float32, param_dtype=jnp.float32, rngs=rngs)
  if kind == 'layernorm':
    return nnx.LayerNorm(dim, dtype=jnp.float32, param_dtype=jnp.float32, rngs=rngs)
  raise ValueError(f'norm={kind!r} is invalid; allowed: {NORMS}.')


class MLP(nnx.Module):
  """Linear(model_dim, hidden) -> GELU -> Linear(hidden, model_dim)."""

  def __init__(self, model_dim: int, hidden_dim: int, *, dtype, rngs: nnx.Rngs):
    linear = dict(dtype=dtype, param_dtype=jnp.float32, rngs=rngs)
    self.up = nnx.Linear(model_dim, hidden_dim, **linear)
    self.down = nnx.Linear(hidden_dim, model_dim, **linear)

  def __call__(self, x):
    return self.down(jax.nn.gelu(self.up(x)))


class TransformerBlock(nnx.Module):
  """One pre-norm block around a `RelativeMultiHeadAttention`. `positions` are what the layer takes: 1-D int
  positions (B, L), or a grid's as one value (`call.Grid(shape, class_token)`, `call.Coordinates(values)`), built
  once per forward by the model and handed to every block."""

  def __init__(
      self,
      model_dim: int,
      num_heads: int,
      encoder,
      *,
      mlp_hidden_dim: int,
      causal: bool,
      dropout_rate: float = 0.0,
      norm: str = 'rmsnorm',
      dtype='float32',
      implementation: str | None = None,
      block_size=None,
      own_position_params: bool = True,
      debug_checks: bool = False,
      model_adds_absolute: bool = False,
      window: int | None = None,
      rngs: nnx.Rngs,
  ):
    dtype = attention_lib.canonical_dtype(dtype)
    self.dtype = dtype
    self.attention_norm = make_norm(norm, model_dim, rngs)
    self.attention = attention_lib.RelativeMultiHeadAttention(
        num_heads,
        model_dim,
        encoder,
        causal=causal,
        dtype=dtype,
        implementation=implementation,
        block_size=block_size,
        own_position_params=own_position_params,
        debug_checks=debug_checks,
        model_adds_absolute=model_adds_absolute,
        window=window,
        rngs=rngs,
    )
    self.mlp_norm = make_norm(norm, model_dim, rngs)
    self.mlp = MLP(model_dim, mlp_hidden_dim, dtype=dtype, rngs=rngs)
    self.dropout = nnx.Dropout(dropout_rate, rngs=rngs)

  def _mlp_branch(self, x, deterministic):
    h = self.mlp(self.mlp_norm(x).astype(self.dtype))
    return x + self.dropout(h, deterministic=deterministic).astype(jnp.float32)

  def __call__(
      self,
      x,
      *,
      positions=None,
      padding_mask=None,
      position_bias=None,
      position_params=None,
      deterministic: bool = True,
      segment_ids=None,
  ):
    h = self.attention(
        self.attention_norm(x).astype(self.dtype),
        positions=positions,
        padding_mask=padding_mask,
        position_bias=position_bias,
        position_params=position_params,
        segment_ids=segment_ids,
    )
    x = x + self.dropout(h, deterministic=deterministic).astype(jnp.float32)
    return self._mlp_branch(x, deterministic)

  def attention_weights(self, x, *, positions=None, padding_mask=None, position_params=None, segment_ids=None):
    """The attention distribution (B, H, L, L) of this block's attention on x (its norm first), as `__call__`
    attends (`RelativeMultiHeadAttention.attention_weights`): for diagnostics (attention entropy)."""
    return self.attention.attention_weights(
        self.attention_norm(x).astype(self.dtype),
        positions=positions,
        padding_mask=padding_mask,
        position_params=position_params,
        segment_ids=segment_ids,
    )

  def decode(
      self, x, cache, *, positions=None, padding_mask=None, position_bias=None, position_params=None, segment_ids=None
  ):
    h, cache = self.attention.decode(
        self.attention_norm(x).astype(self.dtype),
        cache,
        positions=positions,
        padding_mask=padding_mask,
        position_bias=position_bias,
        position_params=position_params,
        segment_ids=segment_ids,
    )
    x = x + h.astype(jnp.float32)
    return self._mlp_branch(x, True), cache
