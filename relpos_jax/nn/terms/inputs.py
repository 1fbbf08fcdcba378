"""The parts that act before any score: a rotation of q and k (kind ROTARY: `Rotation`, applied by the layer
before attention, nothing per tile) and an absolute embedding x + p_i (kind ABSOLUTE: `Absolute`, added by the
model at its input, not in the layer).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from relpos_jax.nn.terms import base


@dataclasses.dataclass(frozen=True)
class Rotation(base.Term):
  """q and k rotated at their positions, in float32 (the encoders' contract) and cast back to the inputs'
  dtype, so a bfloat16 model keeps bfloat16 matmuls but exact angles."""

  stage = base.Stage.ROTATE
  kernel_form = True  # applied before any kernel
  dot_product_form = True

  def rotate(self, part, params, query, key, q_positions, k_positions):
    query = part.rotate_queries(params, query.astype(jnp.float32), q_positions).astype(query.dtype)
    key = part.rotate_keys(params, key.astype(jnp.float32), k_positions).astype(key.dtype)
    return query, key


@dataclasses.dataclass(frozen=True)
class Absolute(base.Term):
  """An absolute embedding p_i the model adds to its input: never inside attention (no per-tile form)."""

  stage = base.Stage.INPUT
  tiles = False
  dot_product_form = True

  def embed(self, part, params, positions):
    return jnp.asarray(part.embed(params, positions), jnp.float32)
