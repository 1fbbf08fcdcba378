"""PoPE, polar coordinate position embeddings (Gopalakrishnan, Csordás, Schmidhuber & Mozer 2025, "Decoupling
the 'What' and 'Where' With Polar Coordinate Positional Embeddings", arXiv:2509.10534; reference:
x-transformers `PolarEmbedding` and `apply_polar_pos_emb`).

Each of the D features of a query or key becomes a complex number whose magnitude is the content and whose
phase is the position: feature c of x at position p maps to

    softplus(x_c) * (cos(p theta_c), sin(p theta_c)),     theta_c = base^(-c / D),  c = 0 .. D - 1

(D frequencies, one per feature, not D/2 pairs as in RoPE), laid out as [magnitudes * cos, magnitudes * sin],
so q and k grow to 2D features. Keys get a learned phase bias delta_{h,c}, clamped to [-2 pi, 0] and
initialised at 0: the score is sum_c softplus(q_c) softplus(k_c) cos((i - j) theta_c - delta_{h,c}), a
function of j - i only (relative). The non-negative magnitudes cannot steer the phase ("what" and "where"
decouple). Queries are also multiplied by sqrt(2), so that the layer's 1/sqrt(2D) score scale equals the
reference's 1/sqrt(D). Phases use RoPE's exact integer-position arithmetic (`rope.rotary_angles`).
Published default: base = 10000.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import rope
from relpos_jax.encoders.registry import register


def pope_frequencies(head_dim: int, base: float) -> np.ndarray:
  """theta_c = base^(-c / D), c = 0 .. D - 1 (float64)."""
  return base ** (-np.arange(head_dim, dtype=np.float64) / head_dim)


@register('pope')
@dataclasses.dataclass(frozen=True)
class PoPE(contract.RotaryEncoder):
  """`pope`, `pope(base=500.0)`: polar embeddings, q and k of D features -> 2D."""

  base: float = 10000.0
  needs_head_dim = True  # The learned phase bias is (heads, head_dim).
  one_rotation = False  # Keys get the phase bias, queries the factor sqrt(2).
  widens_head = True  # D features -> 2D.

  def __post_init__(self):
    validation.number(self.name, 'base', self.base, above=1)

  def init_params(self, rng, dims_):
    del rng
    return {'phase_bias': jnp.zeros((dims_.num_heads, dims_.head_dim), jnp.float32)}

  def _polar(self, params, x, positions, bias=None):
    if x.ndim < 3:
      raise ValueError(f'{self.name}: x must be (..., length, heads, head_dim), got shape {x.shape}.')
    head_dim = x.shape[-1]
    dims_ = contract.dims(params)
    if dims_.head_dim is not None and dims_.head_dim != head_dim:
      raise ValueError(
          f'{self.name}: x has head_dim={head_dim} but the params were initialised for ' f'head_dim={dims_.head_dim}.'
      )
    positions = jnp.asarray(positions)
    if not jnp.issubdtype(positions.dtype, jnp.integer) or positions.shape[-1] != x.shape[-3]:
      raise ValueError(
          f'{self.name}: positions must be integers of shape (..., {x.shape[-3]}), got '
          f'{positions.dtype} {positions.shape}.'
      )
    angles = rope.rotary_angles(positions, pope_frequencies(head_dim, self.base))[..., None, :]  # (.., L, 1, D)
    if bias is not None:
      angles = angles + bias
    magnitude = jax.nn.softplus(x.astype(jnp.float32))
    out = jnp.concatenate([magnitude * jnp.cos(angles), magnitude * jnp.sin(angles)], axis=-1)
    return out.astype(x.dtype)

  def rotate_queries(self, params, q, positions):
    return (self._polar(params, q, positions) * np.float32(math.sqrt(2.0))).astype(q.dtype)

  def rotate_keys(self, params, k, positions):
    bias = jnp.clip(params['phase_bias'], -2 * math.pi, 0.0)  # (H, D)
    return self._polar(params, k, positions, bias)

  def rotate(self, params, x, positions):
    """Keys' map (with the phase bias); queries use `rotate_queries`."""
    return self.rotate_keys(params, x, positions)
