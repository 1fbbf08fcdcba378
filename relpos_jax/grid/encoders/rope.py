"""Rotary encodings on a grid: each frequency pair of a head is rotated by an angle that reads the coordinates.

rope_axial (Heo, Park, Han & Yun 2024, "Rotary Position Embedding for Vision Transformer", ECCV 2024; reference
naver-ai/rope-vit models/vit_rope.py `compute_axial_cis`): the D/2 pairs are split into one chunk per axis,
each rotated by its own coordinate with 1-D RoPE frequencies theta^(-2 A k / D), k < D / (2A) (A = axes; 2-D:
theta^(-4k/D), the reference's `arange(0, dim, 4)[:dim // 4] / dim`). Chunks in the reference's order, the
fastest axis first: (x = column, y = row) for 2-D, then t for 3-D. theta = 100 (the reference's rope_theta for
axial models). Pairs are (2k, 2k + 1), the reference's `view_as_complex` layout ('interleaved').

rope_mixed (the same paper and code, `init_random_2d_freqs` and `compute_mixed_cis`): learned 2-D frequencies,
one vector per pair, head and layer: angle_k = x * f^x_{h,k} + y * f^y_{h,k}, initialised as the reference does,
with magnitudes theta^(-4k/D) (k < D/4, theta = 10 for the mixed models) in two directions per head, at a random
angle a_h and at a_h + pi/2: f^x = [m cos a_h, m cos(a_h + pi/2)], f^y = [m sin a_h, m sin(a_h + pi/2)]. Each
attention layer owns its encoder params, so the frequencies are per layer as the reference's `freqs` of shape
(2, depth, ...). The reference excludes them from weight decay (`no_weight_decay`); the package's optimiser
decays every matrix (ndim >= 2, relpos_jax.train.optim), so a ViT trained with decay should pass
`relpos_jax.nn.vit.weight_decay_mask` as AdamW's mask, which leaves them (and every position parameter) out. 2-D
only.

mrope (Qwen2-VL, Wang et al. 2024; huggingface/transformers modeling_qwen2_vl.py
`apply_multimodal_rotary_pos_emb`): coordinates (t, h, w); 1-D RoPE frequencies base^(-2k/D) (k < D/2, base
10000) in the 'half' layout (`rotate_half`), pair k rotated by the coordinate of its section: the first
sections[0] frequencies read t, the next sections[1] read h, the rest w (`mrope_section`; Qwen2-VL's (16, 24,
24) for D = 128, here scaled to any D: h = w = floor(3 D / 16), t the rest). `interleaved=True` is Qwen3-VL's
layout (modeling_qwen3_vl.py `apply_interleaved_mrope`): frequency k reads h when k % 3 == 1 and k < 3
sections[1], w when k % 3 == 2 and k < 3 sections[2], t otherwise (Qwen3-VL's (24, 20, 20) for D = 128, scaled:
h = w = floor(20 D / 128)). A text token with t = h = w is rotated exactly as 1-D RoPE; `mrope_index.py` builds
the ids of a mixed text + image sequence as Qwen2-VL's `get_rope_index` does.

Every rotation leaves the class token (coordinates CLASS_TOKEN) unrotated, as rope-vit rotates x[:, 1:] only.
Integer coordinates take 1-D RoPE's exact phases (`relpos_jax.encoders.rope.rotary_angles`); float ones are
multiplied in float32.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import rope as rope_1d
from relpos_jax.grid.contract import GridRotaryEncoder
from relpos_jax.grid.registry import register


def _angles(coordinate, inv_freq: np.ndarray):
  """coordinate (...) int or float, static frequencies (n,) -> float32 (..., n)."""
  if jnp.issubdtype(coordinate.dtype, jnp.integer):
    return rope_1d.rotary_angles(coordinate, inv_freq)
  return coordinate[..., None] * jnp.asarray(inv_freq, jnp.float32)


@register('rope_axial')
@dataclasses.dataclass(frozen=True)
class RopeAxial(GridRotaryEncoder):
  base: float = 100.0
  layout: str = 'interleaved'

  def __post_init__(self):
    super().__post_init__()
    validation.number(self.name, 'base', self.base, above=1)
    validation.choice(self.name, 'layout', self.layout, rope_1d.LAYOUTS)

  def check_dims(self, dims_):
    if dims_.head_dim is not None:
      validation.require(
          dims_.head_dim % (2 * self.axes) == 0,
          self.name,
          'head_dim',
          dims_.head_dim,
          f'a multiple of 2 * axes = {2 * self.axes} (each axis rotates head_dim / (2 axes) pairs)',
      )

  def inv_freq(self, head_dim: int) -> np.ndarray:
    """(head_dim / (2 axes),) float64: one axis's frequencies, theta^(-2 A k / D)."""
    a = self.axes
    return 1.0 / (self.base ** (np.arange(0, head_dim, 2 * a)[: head_dim // (2 * a)].astype(np.float64) / head_dim))

  def angles(self, params, positions, head_dim):
    freq = self.inv_freq(head_dim)
    # The fastest axis first (x = column, then y = row, then t), as rope-vit concatenates [freqs_x, freqs_y].
    return jnp.concatenate([_angles(positions[..., a], freq) for a in reversed(range(self.axes))], axis=-1)


@register('rope_mixed')
@dataclasses.dataclass(frozen=True)
class RopeMixed(GridRotaryEncoder):
  base: float = 10.0
  layout: str = 'interleaved'

  def __post_init__(self):
    super().__post_init__()
    validation.require(self.axes == 2, self.name, 'axes', self.axes, '2 (RoPE-Mixed is defined on images)')
    validation.number(self.name, 'base', self.base, above=1)
    validation.choice(self.name, 'layout', self.layout, rope_1d.LAYOUTS)

  needs_head_dim = True

  def check_dims(self, dims_):
    validation.require(
        dims_.head_dim % 4 == 0, self.name, 'head_dim', dims_.head_dim, 'a multiple of 4 (two directions per head)'
    )

  def init_params(self, rng, dims_):
    d = dims_.head_dim
    mag = 1.0 / (self.base ** (jnp.arange(0, d, 4)[: d // 4].astype(jnp.float32) / d))  # (D/4,)
    angle = jax.random.uniform(rng, (dims_.num_heads, 1), jnp.float32) * 2 * jnp.pi
    fx = jnp.concatenate([mag * jnp.cos(angle), mag * jnp.cos(jnp.pi / 2 + angle)], axis=-1)  # (H, D/2)
    fy = jnp.concatenate([mag * jnp.sin(angle), mag * jnp.sin(jnp.pi / 2 + angle)], axis=-1)
    return {'freqs': jnp.stack([fx, fy], axis=0)}  # (2, H, D/2): x (column) then y (row)

  def angles(self, params, positions, head_dim):
    p = jnp.asarray(positions, jnp.float32)
    x, y = p[..., 1], p[..., 0]
    f = params['freqs']
    return x[..., None, None] * f[0] + y[..., None, None] * f[1]  # (..., L, H, D/2)


@register('mrope')
@dataclasses.dataclass(frozen=True)
class MRope(GridRotaryEncoder):
  axes: int = 3
  base: float = 10000.0
  sections: tuple | None = None
  interleaved: bool = False

  def __post_init__(self):
    super().__post_init__()
    validation.require(self.axes == 3, self.name, 'axes', self.axes, '3 (t, h, w; an image has t = 0)')
    validation.number(self.name, 'base', self.base, above=1)
    ok = self.sections is None or (
        isinstance(self.sections, tuple)
        and len(self.sections) == 3
        and all(validation.is_int(s) and s >= 0 for s in self.sections)
    )
    validation.require(ok, self.name, 'sections', self.sections, 'None or a tuple of 3 ints >= 0 (t, h, w)')

  layout = 'half'
  needs_head_dim = True

  def sections_for(self, head_dim: int) -> tuple[int, int, int]:
    half = head_dim // 2
    if self.sections is not None:
      return tuple(int(s) for s in self.sections)
    hw = (20 * half) // 64 if self.interleaved else (3 * half) // 8
    return (half - 2 * hw, hw, hw)

  def check_dims(self, dims_):
    rope_1d.check_head_dim(self.name, dims_.head_dim)
    t, h, w = self.sections_for(dims_.head_dim)
    half = dims_.head_dim // 2
    validation.require(
        t + h + w == half,
        self.name,
        'sections',
        self.sections,
        f'3 sections (t, h, w) summing to head_dim / 2 = {half}',
    )

  def axis_of_frequency(self, head_dim: int) -> np.ndarray:
    """Int (D/2,): which coordinate (0 = t, 1 = h, 2 = w) each frequency reads."""
    t, h, w = self.sections_for(head_dim)
    k = np.arange(head_dim // 2)
    if not self.interleaved:
      return np.where(k < t, 0, np.where(k < t + h, 1, 2))
    return np.where((k % 3 == 1) & (k < 3 * h), 1, np.where((k % 3 == 2) & (k < 3 * w), 2, 0))

  def angles(self, params, positions, head_dim):
    inv_freq = 1.0 / (self.base ** (np.arange(0, head_dim, 2).astype(np.float64) / head_dim))
    which = self.axis_of_frequency(head_dim)
    per_axis = [_angles(positions[..., a], inv_freq) for a in range(3)]  # each (..., L, D/2)
    return jnp.where(which == 0, per_axis[0], jnp.where(which == 1, per_axis[1], per_axis[2]))
