"""CoPE, contextual position encoding (Golovneva, Wang, Weston & Sukhbaatar 2024, "Contextual Position
Encoding: Learning to Count What's Important").

Positions are counted by the content: query i opens a gate on each key it sees,

    g_ij = sigmoid(q_i . k_j / sqrt(d)),     p_ij = sum_{t = j .. i} g_it   (clamped to npos - 1),

so p_ij is a fractional count of the keys between j and i that the query "counts" (words, sentences, a
symbol...). The logit gains the interpolated embedding of that position,

    logit_ij = (q_i . k_j + z_ij) / sqrt(d),    z_ij = (p - floor p) q_i . e[ceil p] + (1 - p + floor p) q_i . e[floor p],

with one learned table e of npos vectors of the head dimension, shared by the heads. q_i . e[n] is computed
once per query and position (L x npos, not L x L x d), then read at floor/ceil p_ij.

Tiled (`relpos_jax.nn.blockwise`): p_ij = (the gates of query i on the keys of j's own tile from j on) + (the
gates on every nearer key tile), a per-row carry summed once per (query tile, key tile) before the tile loop.

Reference: facebookresearch/RAM, projects/cope/src/cope/context_position.py (`ContextPosSelfAttn`): gates
from the attention logits, multiplied by the attention mask (padded and future keys count nothing),
`positions = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=npos - 1)`, the table `pos_emb` of shape
(head_dim, npos) initialised at zero, and the position logits added before the division by sqrt(d)
(`--cope-nodiv` off). Published default: npos = block_size + 1 (the training context plus one, "position 0
is possible"); here npos = 65, i.e. our default training length 64 + 1. Beyond npos - 1 every position reads
the last embedding, so a longer evaluation context reuses trained rows.

The paper's models are decoders: CoPE is causal only (`requires_causal`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def contextual_positions(gates: jax.Array, npos: int) -> jax.Array:
  """p_ij = sum_{t >= j} g_it along the last axis (the gates are zero where masked), clamped to npos - 1."""
  positions = jnp.flip(jnp.cumsum(jnp.flip(gates, -1), axis=-1), -1)
  return jnp.minimum(positions, npos - 1)


def interpolate(position_logits: jax.Array, positions: jax.Array) -> jax.Array:
  """position_logits (..., npos) at fractional positions (..., Lk): linear between floor and ceil."""
  floor = jnp.floor(positions)
  low = jnp.take_along_axis(position_logits, floor.astype(jnp.int32), axis=-1)
  high = jnp.take_along_axis(position_logits, jnp.ceil(positions).astype(jnp.int32), axis=-1)
  weight = positions - floor  # differentiable in the gates, as in the reference
  return high * weight + low * (1.0 - weight)


@register('cope')
@dataclasses.dataclass(frozen=True)
class CoPE(contract.ContextualEncoder):
  npos: int = 65

  counts_along_keys = True  # p_ij sums gates from j to i: tiles carry the nearer key tiles' row sums

  uses_head_vectors = True  # Its position embeddings have head_dim features, dotted with the queries.

  def __post_init__(self):
    # A (head_dim, npos) table: npos=1e9 tried to allocate 32 GB at init.
    validation.positive_int(self.name, 'npos', self.npos, minimum=2, maximum=validation.MAX_TABLE_ROWS)

  def init_params(self, rng, dims_):
    del rng
    return {'embedding': jnp.zeros((dims_.head_dim, self.npos), jnp.float32)}

  def gates(self, scaled_logits, valid) -> jax.Array:
    """g_ij = sigmoid(q_i . k_j * scale) from the scaled content logits, zero where `valid` is False."""
    gates = jax.nn.sigmoid(jnp.asarray(scaled_logits, jnp.float32))
    return gates if valid is None else jnp.where(valid, gates, 0.0)

  def counted_term(self, params, query, counts, scale) -> jax.Array:
    """The logit term at counts p_ij (B, H, Lq, Lk), clamped to npos - 1: z_ij * scale, float32.

    The scale is cast: a float64 one (1 / sqrt(d) from numpy under jax_enable_x64) made the term float64 and
    the tiled path's float32 loop carry a TypeError."""
    position_logits = jnp.einsum('bihd,dn->bhin', jnp.asarray(query, jnp.float32), params['embedding'])
    return interpolate(position_logits, jnp.minimum(counts, self.npos - 1)) * jnp.float32(scale)

  def score_term(self, params, ctx):
    q, k = jnp.asarray(ctx.query, jnp.float32), jnp.asarray(ctx.key, jnp.float32)
    gates = self.gates(jnp.einsum('bihd,bjhd->bhij', q, k) * ctx.scale, ctx.valid)
    return self.counted_term(params, ctx.query, contextual_positions(gates, self.npos), ctx.scale)
