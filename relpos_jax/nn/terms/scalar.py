"""Scalar biases: b_h(i, j) added to the scaled scores (kind SCALAR_BIAS, and a precomputed `position_bias`).

  Toeplitz, contiguous positions   the Lq + Lk - 1 distinct values b_h(rel), evaluated once (O(L H)); a tile
                                   reads the bq + bk - 1 it needs (one dynamic slice) and expands them with
                                   `positions.toeplitz`. No (H, L, L) array ever exists (`ToeplitzBias`).
  otherwise (FIRE, the absolute    `encoder.pair_bias(params, q_pos, k_pos)` on the tile's positions (the
  score term, explicit or          encoder's own pure function, per tile: `PairBias`).
  randomized positions)
  a precomputed `position_bias`    sliced per tile (it is (H, Lq, Lk) already: no memory saving; `GivenBias`).

`bias_matrix` is the whole (H, Lq, Lk) or (B, H, Lq, Lk) bias of one part, for dot_product_attention.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import positions as positions_lib
from relpos_jax.encoders import matrices
from relpos_jax.nn.terms import base


@dataclasses.dataclass(frozen=True)
class ToeplitzBias(base.Term):
  """A Toeplitz scalar bias: the Lq + Lk - 1 distinct values once; a tile slices and expands its own."""

  stage = base.Stage.BIAS
  kernel_form = True  # the Pallas kernel reads the same distinct values per tile
  scalar_bias = True
  toeplitz = True
  dot_product_form = True

  def prepare(self, part, params, ctx):
    rel = positions_lib.distinct_relative_positions(ctx.padded_q_len, ctx.padded_k_len, ctx.q_offset)
    return jnp.asarray(part.bias(params, rel), jnp.float32).T  # (H, Lq + Lk - 1)

  def local(self, theta, tile):
    return base.slice_diagonals(theta, tile, axis=1)

  def accumulate(self, acc, d_local, tile):
    return base.add_diagonals(acc, d_local, tile, axis=1)

  def bias(self, part, local, tile):
    return positions_lib.toeplitz(local, tile.bq, tile.bk)[None]

  def whole_bias(self, part, params, q_len, k_len, where):
    return bias_matrix(
        part, params, q_len, k_len, q_offset=where.offset, q_positions=where.query, k_positions=where.key
    )


@dataclasses.dataclass(frozen=True)
class PairBias(base.Term):
  """Any scalar bias: the encoder's `pair_bias` at the tile's query and key positions."""

  stage = base.Stage.BIAS
  scalar_bias = True
  dot_product_form = True

  def bias(self, part, local, tile):
    b = part.pair_bias(local, tile.q_pos[:, :, None], tile.k_pos[:, None, :])  # (B|1, bq, bk, H)
    return jnp.moveaxis(jnp.asarray(b, jnp.float32), -1, 1)

  whole_bias = ToeplitzBias.whole_bias


@dataclasses.dataclass(frozen=True)
class GivenBias(base.Term):
  """A precomputed (B or 1, H, Lq, Lk) bias, padded; the tile slices it."""

  stage = base.Stage.BIAS

  def prepare(self, part, params, ctx):
    raise AssertionError('a given bias is prepared by the caller')

  def local(self, theta, tile):
    return jax.lax.dynamic_slice(theta, base.start(0, 0, tile.qs, tile.ks), theta.shape[:2] + (tile.bq, tile.bk))

  def accumulate(self, acc, d_local, tile):
    first = base.start(0, 0, tile.qs, tile.ks)
    return jax.lax.dynamic_update_slice(acc, jax.lax.dynamic_slice(acc, first, d_local.shape) + d_local, first)

  def bias(self, part, local, tile):
    return local


def bias_matrix(part, params, q_len: int, k_len: int, *, q_offset=0, q_positions=None, k_positions=None):
  """One scalar part's whole bias, float32: contiguous positions (H, q_len, k_len) via `bias_matrix`
  (Toeplitz from q_len + k_len - 1 values, or the encoder's own pair_bias when it is not Toeplitz);
  explicit positions (B, H, q_len, k_len) via `bias_at_positions`."""
  if q_positions is None:
    b = matrices.bias_matrix(part, params, q_len, k_len, q_offset)
  else:
    b = matrices.bias_at_positions(part, params, q_positions, k_positions)
  return jnp.asarray(b, jnp.float32)
