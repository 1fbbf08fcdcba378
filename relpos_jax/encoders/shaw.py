"""Learnable clipped relative position embeddings (Shaw, Uszkoreit & Vaswani 2018).

The distance is clipped, clip(j - i) = max(-k, min(k, j - i)) with k = max_distance, and indexes a table of
2k + 1 entries, so every length reads a valid entry (the lecture's code indexes with j - i + k and never
clips, which fails for |j - i| > k). Beyond k all distances share the edge entries.

Two forms:
  shaw        a scalar bias per head: b_h(j - i) = w_h[clip(j - i)]             (2k + 1, num_heads) table
  shaw_vector the paper's form, e_ij = q_i . (k_j + a^K_{clip(j-i)}) / sqrt(d),
              z_i = sum_j w_ij (v_j + a^V_{clip(j-i)}), tables a^K, a^V of shape (2k + 1, H, head_dim):
              unique per layer and head as the paper's base model (section 4.1); `per_head=False` shares one
              (2k + 1, head_dim) table across heads, as its big model. The attention layer consumes them
              without building (L, L, d).

The paper's base model clips at k = 16 (section 4.1; it reports no gain beyond k >= 2 for translation);
k = 0 is allowed (a single learned constant, the paper's ablation).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def clipped_index(rel: jax.Array, max_distance: int) -> jax.Array:
  """Table row of relative position rel: clip(rel, -k, k) + k."""
  return jnp.clip(jnp.asarray(rel, jnp.int32), -max_distance, max_distance) + max_distance


def _check_max_distance(name, max_distance):
  validation.positive_int(name, 'max_distance', max_distance, minimum=0, maximum=(validation.MAX_TABLE_ROWS - 1) // 2)


@register('shaw')
@dataclasses.dataclass(frozen=True)
class Shaw(contract.TableBiasEncoder):
  max_distance: int = 16

  def __post_init__(self):
    _check_max_distance(self.name, self.max_distance)

  @property
  def num_buckets(self):
    return 2 * self.max_distance + 1

  def bucket(self, rel):
    return clipped_index(rel, self.max_distance)


@register('shaw_vector')
@dataclasses.dataclass(frozen=True)
class ShawVector(contract.VectorRelativeEncoder):
  max_distance: int = 16
  use_value_embeddings: bool = True
  per_head: bool = True

  def __post_init__(self):
    _check_max_distance(self.name, self.max_distance)

  @property
  def clip_distance(self):
    return self.max_distance

  def init_params(self, rng, dims_):
    init = jax.nn.initializers.normal(dims_.head_dim**-0.5)
    key_rng, value_rng = jax.random.split(rng)
    heads = (dims_.num_heads,) if self.per_head else ()
    shape = (2 * self.max_distance + 1,) + heads + (dims_.head_dim,)
    params = {'key_table': init(key_rng, shape, jnp.float32)}
    if self.use_value_embeddings:
      params['value_table'] = init(value_rng, shape, jnp.float32)
    return params

  def _lookup(self, params, table, rel):
    rows = jnp.take(params[table], clipped_index(rel, self.max_distance), axis=0)
    if self.per_head:
      return rows
    return jnp.broadcast_to(rows[..., None, :], rows.shape[:-1] + (contract.dims(params).num_heads, rows.shape[-1]))

  def key_embeddings(self, params, rel):
    return self._lookup(params, 'key_table', rel)

  def value_embeddings(self, params, rel):
    if not self.use_value_embeddings:
      return None
    return self._lookup(params, 'value_table', rel)
