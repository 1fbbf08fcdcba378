"""FoX, the Forgetting Transformer (Lin, Nikishin, He & Courville 2025, "Forgetting Transformer: Softmax
Attention with a Forget Gate", ICLR 2025).

Every token t gets a scalar forget gate per head, computed from the layer input x_t,

    f_t = sigmoid(w_h . x_t + b_h),

and query i attends to key j <= i with the logit

    q_i . k_j / sqrt(d) + D_ij,    D_ij = sum_{l = j+1 .. i} log f_l = c_i - c_j,    c_t = sum_{l <= t} log f_l,

a data-dependent decay computed with one cumulative sum (never an (L, L) loop): D_ii = 0 and D_ij falls as
the gates between j and i close. Reference: zhixuan-lin/forgetting-transformer (`fgate_proj =
Linear(hidden_size, num_heads, bias=True)`, `log_fgate = logsigmoid(fgate_logit.float())`, `log_lambda =
cumsum(log_fgate)`, logits + log_lambda_i - log_lambda_j); padding tokens get log f = 0 there (its
`seq_start` path), and here: a padded key is transparent, it neither decays nor is attended.

`fox(bias_only=True)` is the reference's data-independent gate (`fgate_type='bias_only'`): f_h =
sigmoid(b_h), so D_ij = (i - j) log sigmoid(b_h) = -m_h (i - j) with m_h = softplus(-b_h) -- ALiBi with one
learnable positive slope per head. It is therefore a scalar-bias encoder (kind SCALAR_BIAS, Toeplitz,
b_h(j - i) = m_h min(j - i, 0)), which lets it take the fused attention path like ALiBi.

Published defaults (the reference's `fgate_type='full'`): the gate projection initialised like the other
linear layers (normal, std 0.02) with zero bias, so f ~ sigmoid(0) = 1/2 at initialisation; the bias-only
gate's bias is zero (`fgate_bias_init=False`), slope log 2 for every head. The paper's model is causal, and
so is this encoder (`requires_causal`): the decay is a sum over the tokens between key and query.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register

INIT_STDDEV = 0.02  # The reference's initializer_range for the gate projection.


def log_forget(gate_logits: jax.Array, key_mask: jax.Array) -> jax.Array:
  """log f_t = log sigmoid(logit), 0 on padded tokens (transparent): (B, L, H) float32."""
  log_f = jax.nn.log_sigmoid(jnp.asarray(gate_logits, jnp.float32))
  return jnp.where(jnp.asarray(key_mask, bool)[..., None], log_f, 0.0)


@register('fox')
@dataclasses.dataclass(frozen=True)
class FoX(contract.ContextualEncoder):
  """`fox`: data-dependent forget gates; `fox(bias_only=True)`: a learnable ALiBi-like decay."""

  bias_only: bool = False

  requires_causal = True
  is_toeplitz = True  # Read only in the bias_only (scalar-bias) form.

  def __post_init__(self):
    validation.require(isinstance(self.bias_only, bool), self.name, 'bias_only', self.bias_only, 'True or False')

  @property
  def kind(self):
    return contract.Kind.SCALAR_BIAS if self.bias_only else contract.Kind.CONTEXTUAL

  @property
  def reads_positions(self):
    return self.bias_only  # The decay slope times the distance; the gates read the content.

  needs_head_dim = False

  @property
  def needs_model_dim(self):
    return not self.bias_only

  def init_params(self, rng, dims_):
    bias = jnp.zeros((dims_.num_heads,), jnp.float32)
    if self.bias_only:
      return {'gate_bias': bias}
    kernel = INIT_STDDEV * jax.random.normal(rng, (dims_.model_dim, dims_.num_heads), jnp.float32)
    return {'gate_kernel': kernel, 'gate_bias': bias}

  # --- bias_only: a scalar bias ---------------------------------------------------------------------------

  def slopes(self, params) -> jax.Array:
    """m_h = -log sigmoid(b_h) = softplus(-b_h) > 0, the decay per token of the bias-only gate."""
    return jax.nn.softplus(-params['gate_bias'])

  def bias(self, params, rel):
    if not self.bias_only:
      raise ValueError(
          'fox: the data-dependent forget gate depends on the tokens, not on j - i; only '
          'fox(bias_only=True) has a bias(rel). The attention layer computes fox from q, k, x.'
      )
    rel = jnp.asarray(rel, jnp.float32)[..., None]
    return self.slopes(params) * jnp.minimum(rel, 0.0)

  def pair_bias(self, params, q_pos, k_pos):
    return self.bias(params, jnp.asarray(k_pos, jnp.int32) - jnp.asarray(q_pos, jnp.int32))

  # --- the data-dependent gate ------------------------------------------------------------------------------

  def num_features(self, dims_):
    return dims_.num_heads

  def token_features(self, params, x):
    """The forget-gate logits w_h . x_t + b_h: (B, L, H) float32."""
    x = jnp.asarray(x, jnp.float32)
    return x @ params['gate_kernel'] + params['gate_bias']

  separable = True  # D_ij = c_i - c_j: the tiled paths read c per tile (`row_column_terms`).

  def row_column_terms(self, params, features, key_mask, q_index):
    """(c at the queries (B, H, Lq), -c at the keys (B, H, Lk)): D_ij is their outer sum."""
    del params
    c = jnp.cumsum(log_forget(features, key_mask), axis=1)  # (B, Lk, H)
    c_q = jnp.take(c, q_index, axis=1)  # (B, Lq, H)
    return jnp.moveaxis(c_q, -1, 1), -jnp.moveaxis(c, -1, 1)

  def score_term(self, params, ctx):
    row, column = self.row_column_terms(params, ctx.features, ctx.key_mask, ctx.q_index)
    return row[:, :, :, None] + column[:, :, None, :]
