"""Length-aware temperature: logits scaled by the log of the number of keys a query sees (or of its position).

With n_i the number of keys query i attends over (i + 1 in a causal model without padding, the sequence
length in a bidirectional one), softmax(z) over n_i keys flattens as n_i grows: the largest weight falls
like 1/n_i at equal logits ("attention fading"). Both encoders multiply query i's logits by a factor that
grows with log n_i, so the peak stays sharp on longer contexts.

  ssmax   Scalable-Softmax (Nakanishi 2025, "Scalable-Softmax Is Superior for Attention"):
              softmax(s_h log(n_i) z_i),
          s_h a learnable scalar per head. Published default: s initialised at 0.43 (the paper's value; also
          the default of the PyTorch implementation gdevos010/Scalable-Softmax), no bias term (the paper's
          variant with a bias hurt length generalization).
  logn    Qwen's `use_logn_attn` (QwenLM/Qwen, modeling_qwen.py: `logn_list = [log(i, seq_length) if
          i > seq_length else 1 for i in range(1, ...)]`, queries multiplied by logn_list[i]):
              t_i = max(1, log(n_i) / log(L_train)),
          parameter-free; 1 up to the training length, then log_{L_train}(n_i). `train_length` is L_train
          (Qwen's `seq_length`; default 2048, Qwen-7B's first training context). Qwen scales the queries of a
          model with no additive bias; here the factor multiplies the whole logit (content and any bias
          term), which is the same thing when nothing else is added.

  llama4_scale  Llama 4's and Ministral 3's query scaling (transformers, models/ministral3/modeling_ministral3.py,
          `get_llama_4_attn_scale`; configs' `rope_parameters['llama_4_scaling_beta']`): queries multiplied by
              t_i = 1 + beta ln(1 + floor(p_i / L_orig)),
          p_i the query's position (its key index q_offset + i, transformers' position_ids for a sequence
          without padding), L_orig `original_max_position` (the config's original_max_position_embeddings).
          Parameter-free; 1 below L_orig, then a step at each multiple of it. Applied to the rotated query, so it
          multiplies the content logit: the same as the whole logit here when nothing else is added (Ministral
          has no bias). Ministral 3 uses beta = 0.1, L_orig = 16384.

Kind TEMPERATURE: composes with any other encoder (`rope + ssmax`, `nope + logn`), causal or not. n_i counts
the keys the mask leaves (padding excluded), so padded and unpadded sequences agree, and cached decoding
counts the cache like a full forward. A query that sees no key has n = 0; its factor is irrelevant (the
layer zeroes its output) and kept finite (log of max(n, 1)).
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def _finite_positive(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def log_count(num_visible) -> jnp.ndarray:
  return jnp.log(jnp.maximum(jnp.asarray(num_visible, jnp.float32), 1.0))


@register('ssmax')
@dataclasses.dataclass(frozen=True)
class SSMax(contract.TemperatureEncoder):
  init_s: float = 0.43

  carries_position = False  # A temperature alone tells no order (in a bidirectional model n_i = L).

  def __post_init__(self):
    validation.require(_finite_positive(self.init_s), self.name, 'init_s', self.init_s, 'a finite number > 0')

  def init_params(self, rng, dims_):
    del rng
    return {'s': jnp.full((dims_.num_heads,), self.init_s, jnp.float32)}

  def temperature(self, params, num_visible, q_index):
    del q_index
    return params['s'][None, :, None] * log_count(num_visible)[:, None, :]


@register('logn')
@dataclasses.dataclass(frozen=True)
class LogN(contract.TemperatureEncoder):
  train_length: int = 2048

  carries_position = False

  def __post_init__(self):
    validation.positive_int(self.name, 'train_length', self.train_length, minimum=2)

  def temperature(self, params, num_visible, q_index):
    del q_index
    factor = jnp.maximum(log_count(num_visible) / math.log(self.train_length), 1.0)  # (B, Lq)
    return jnp.broadcast_to(factor[:, None, :], (factor.shape[0], contract.dims(params).num_heads, factor.shape[1]))


@register('llama4_scale')
@dataclasses.dataclass(frozen=True)
class Llama4Scale(contract.TemperatureEncoder):
  beta: float = 0.1
  original_max_position: int = 16384

  carries_position = False  # It scales queries by where they are; the order of keys is still not told.

  def __post_init__(self):
    validation.number(self.name, 'beta', self.beta, at_least=0)
    validation.positive_int(self.name, 'original_max_position', self.original_max_position)

  def temperature(self, params, num_visible, q_index):
    # floor(p / L) in integers (exact at any position; transformers divides in float, the same below 2^24).
    steps = (jnp.asarray(q_index, jnp.int32) // self.original_max_position).astype(jnp.float32)
    factor = 1.0 + self.beta * jnp.log1p(steps)  # (Lq,)
    batch, heads = num_visible.shape[0], contract.dims(params).num_heads
    return jnp.broadcast_to(factor[None, None, :], (batch, heads, factor.shape[0]))
