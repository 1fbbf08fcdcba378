"""VideoRoPE (Wei, Liu, Zang et al. 2025, "VideoRoPE: What Makes for Good Video Rotary Position Embedding?", ICML
2025): M-RoPE's three coordinates (t, h, w) with the frequencies reallocated.

Reference: Wiselnn570/VideoRoPE videorope-transformer/modeling_videorope.py (commit 7712ca3f), the frequency layout
of `apply_m_modify_multimodal_rotary_pos_emb` and the ids of `get_t_scale_rope_index`. With M-RoPE's
sections (t, h, w) (Qwen2-VL's (16, 24, 24) at D = 128; scaled to any D as `mrope`'s), the D/2 frequencies
base^(-2k/D) in the 'half' layout (`rotate_half`) read

    k < h + w, k even:   h          (the highest frequencies, h and w interleaved: x1, y1, x2, y2, ...)
    k < h + w, k odd:    w
    k >= h + w:          t          (the lowest t frequencies: "low-frequency temporal allocation", LTA)

whereas M-RoPE gives t the highest ones (`mrope`, relpos_jax/grid/encoders/rope.py). The paper's other two parts
are in the ids (relpos_jax.grid.mrope_index.get_videorope_index): the diagonal layout (DL: h and w centred on the
frame's t, so text and video advance along t = h = w) and the adjustable temporal spacing (ATS: frames
scale_factor apart, 2 in the reference's training). A text token (t = h = w) is rotated exactly as 1-D RoPE, as
with M-RoPE. Coordinates (t, h, w): axes = 3; float ids (a fractional spacing) are rotated in float32.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import rope as rope_1d
from relpos_jax.grid.contract import GridRotaryEncoder
from relpos_jax.grid.encoders.rope import MRope
from relpos_jax.grid.registry import register


@register('videorope')
@dataclasses.dataclass(frozen=True)
class VideoRope(GridRotaryEncoder):
  axes: int = 3
  base: float = 10000.0
  sections: tuple | None = None

  layout = 'half'
  needs_head_dim = True

  def __post_init__(self):
    super().__post_init__()
    validation.require(self.axes == 3, self.name, 'axes', self.axes, '3 (t, h, w; an image has one frame)')
    # M-RoPE's checks of base and sections, named for this encoder.
    self.mrope()

  def mrope(self) -> MRope:
    try:
      return MRope(base=self.base, sections=self.sections)
    except ValueError as e:
      raise ValueError(str(e).replace('mrope', self.name, 1)) from None

  def sections_for(self, head_dim: int) -> tuple[int, int, int]:
    """M-RoPE's (t, h, w) sections: Qwen2-VL's (16, 24, 24) at head_dim 128, scaled to others."""
    return self.mrope().sections_for(head_dim)

  def check_dims(self, dims_):
    try:
      self.mrope().check_dims(dims_)
    except ValueError as e:
      raise ValueError(str(e).replace('mrope', self.name, 1)) from None

  def axis_of_frequency(self, head_dim: int) -> np.ndarray:
    """Int (D/2,): 1 (h) at even k < h + w, 2 (w) at odd k < h + w, 0 (t) beyond."""
    _, h, w = self.sections_for(head_dim)
    k = np.arange(head_dim // 2)
    return np.where(k < h + w, np.where(k % 2 == 0, 1, 2), 0)

  def angles(self, params, positions, head_dim):
    inv_freq = 1.0 / (self.base ** (np.arange(0, head_dim, 2).astype(np.float64) / head_dim))
    which = self.axis_of_frequency(head_dim)
    per_axis = [_angles(positions[..., a], inv_freq) for a in range(3)]  # each (..., L, D/2)
    return jnp.where(which == 0, per_axis[0], jnp.where(which == 1, per_axis[1], per_axis[2]))


def _angles(coordinate, inv_freq: np.ndarray):
  """coordinate (...) int or float, static frequencies (n,) -> float32 (..., n) (as rope.py: exact integer phases)."""
  if jnp.issubdtype(coordinate.dtype, jnp.integer):
    return rope_1d.rotary_angles(coordinate, inv_freq)
  return coordinate[..., None] * jnp.asarray(inv_freq, jnp.float32)
