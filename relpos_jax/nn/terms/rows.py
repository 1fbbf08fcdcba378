"""Terms known per query row and per key column before any tile: a separable contextual term (FoX's
c_i - c_j: `RowColumnBias`) and a temperature (SSMax, log-n: `RowTemperature`, t_h(n_i) of the keys each
query sees, `visible_counts`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax.nn.terms import base


def visible_counts(q_len: int, k_len: int, *, causal: bool, q_offset, key_mask, mask) -> jax.Array:
  """(B or 1, Lq) float32: the keys each query sees (causal mask, padding, any further mask's first head).

  O(B Lk) from a running count of the real keys unless an arbitrary `mask` is given (then its own size):
  the temperatures' n_i, known before any score, on every path.
  """
  q_index = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)
  k_index = jnp.arange(k_len, dtype=jnp.int32)
  if mask is not None:
    valid = jnp.broadcast_to(jnp.asarray(mask, bool), jnp.shape(mask)[:2] + (q_len, k_len))[:, 0]
    if causal:
      valid = valid & (k_index[None, :] <= q_index[:, None])[None]
    if key_mask is not None:
      valid = valid & key_mask[:, None, :]
    return jnp.sum(valid, axis=-1).astype(jnp.float32)
  if key_mask is None:
    if not causal:
      return jnp.full((1, q_len), float(k_len), jnp.float32)
    return jnp.clip(q_index + 1, 0, k_len).astype(jnp.float32)[None]
  if not causal:
    return jnp.broadcast_to(jnp.sum(key_mask, axis=-1, keepdims=True), (key_mask.shape[0], q_len)).astype(jnp.float32)
  real_so_far = jnp.cumsum(key_mask.astype(jnp.int32), axis=-1)  # (B, Lk)
  last = jnp.take(real_so_far, jnp.clip(q_index, 0, k_len - 1), axis=-1)
  return jnp.where(q_index >= 0, last, 0).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class RowColumnBias(base.Contextual):
  """A separable contextual term (FoX's c_i - c_j): the encoder's `row_column_terms` once, an outer sum per tile.
  Beside a replaced content logit (PaTH) it joins that logit before the 1/sqrt(d) scaling, as the PaTH-FoX
  reference does (fla `naive_path_attn`: softmax((A + g_i - g_j) * scale)): `factor` = the scale then."""

  stage = base.Stage.BIAS

  factor: float = 1.0

  def prepare(self, part, params, ctx):
    row, column = part.row_column_terms(params, ctx.feature, ctx.key_mask, ctx.q_index)
    row = base.pad_axis(jnp.asarray(row, jnp.float32), 2, ctx.padded_q_len)
    return {'row': row, 'column': base.pad_axis(jnp.asarray(column, jnp.float32), 2, ctx.padded_k_len)}

  def local(self, theta, tile):
    return {
        'row': base.slice_rows(theta['row'], tile.qs, tile.bq),
        'column': base.slice_rows(theta['column'], tile.ks, tile.bk),
    }

  def accumulate(self, acc, d_local, tile):
    return {
        'row': base.add_rows(acc['row'], d_local['row'], tile.qs),
        'column': base.add_rows(acc['column'], d_local['column'], tile.ks),
    }

  def bias(self, part, local, tile):
    outer = local['row'][:, :, :, None] + local['column'][:, :, None, :]
    return outer if self.factor == 1.0 else outer * np.float32(self.factor)


@dataclasses.dataclass(frozen=True)
class RowTemperature(base.Term):
  """A temperature: every logit of query i times t_h(n_i), n_i the keys it sees (`visible_counts`), known
  before the tile loop; a tile scales its rows."""

  stage = base.Stage.ROW_TRANSFORM
  reads_content = True

  def row_factor(self, part, params, counts, q_index):
    return jnp.asarray(part.temperature(params, counts, q_index), jnp.float32)

  def prepare(self, part, params, ctx):
    factor = self.row_factor(part, params, ctx.counts, ctx.q_index)
    return base.pad_axis(factor, 2, ctx.padded_q_len)  # (B|1, H, padded Lq)

  def local(self, theta, tile):
    return base.slice_rows(theta, tile.qs, tile.bq)

  def accumulate(self, acc, d_local, tile):
    return base.add_rows(acc, d_local, tile.qs)

  def transform(self, part, local, s, tile):
    return s * local[..., None]
