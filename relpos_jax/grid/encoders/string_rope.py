"""STRING: RoPE in a learned orthogonal basis (Schenck, Reid, Jacob et al. 2025, "Learning the RoPEs: Better 2D and
3D Position Encodings with STRING", ICML 2025, arXiv:2502.02562).

STRING's rotation of a query or key at coordinates r (section 3, "Cayley-STRING"):

    R(r) = P^T RoPE(r) P,        P = (I - S)(I + S)^{-1}  (Cayley),   S = A - A^T skew-symmetric, learned

with RoPE(r) a grid RoPE: here rope_axial (rotation='axial', the paper's base; rope-vit's axial frequencies) or
rope_mixed (rotation='mixed', RoPE-Mixed's learned frequencies). Since P is orthogonal (P^T P = I, det P = 1), the
generators P^T D_a P of R(r) = exp(sum_a r_a P^T D_a P) commute, and

    (R(r_i) q) . (R(r_j) k) = (P q)^T RoPE(r_j - r_i) (P k)

depends on r_i - r_j only: exact translation invariance, as RoPE's (the paper's Theorem 3.2 family). At P = I it is
the base RoPE. parametrization='expm' takes P = exp(S) instead (the matrix exponential, the other map of
skew-symmetric matrices onto rotations; ComRoPE, Yu et al. 2025, "ComRoPE: Scalable and Robust Rotary Position
Embedding Parameterized by Trainable Commuting Angle Matrices", parametrises commuting generators this way too --
this encoder is STRING's dense-P form, not ComRoPE's block-diagonal ComRoPE-AP / ComRoPE-LD).

One P per head (H, D, D) for each layer (each layer owns its encoder params), A initialised to zero, so training
starts at the base RoPE; only A's strict upper triangle is read (S = triu(A, 1) - triu(A, 1)^T). No reference code
is public; the formulas are the paper's. Cost: two (D x D) products per token and head on top of RoPE (the paper
notes P can be folded into W_q, W_k at inference). The class token (no position) gets P^T P = I: unrotated.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import rope as rope_1d
from relpos_jax.grid.contract import GridRotaryEncoder
from relpos_jax.grid.encoders.rope import RopeAxial, RopeMixed
from relpos_jax.grid.registry import register

ROTATIONS = ('axial', 'mixed')
PARAMETRIZATIONS = ('cayley', 'expm')
DEFAULT_BASE = {'axial': 100.0, 'mixed': 10.0}  # rope-vit's rope_theta for its axial and mixed models


def skew(a):
  """(..., D, D) -> the skew-symmetric S = triu(a, 1) - triu(a, 1)^T."""
  upper = jnp.triu(a, 1)
  return upper - jnp.swapaxes(upper, -1, -2)


def cayley(s):
  """P = (I - S)(I + S)^{-1} = (I + S)^{-1}(I - S) (the two factors commute); I + S is invertible for skew S."""
  eye = jnp.eye(s.shape[-1], dtype=s.dtype)
  return jnp.linalg.solve(eye + s, eye - s)


def expm(s):
  """P = exp(S), per leading index."""
  flat = s.reshape((-1,) + s.shape[-2:])
  return jax.vmap(jax.scipy.linalg.expm)(flat).reshape(s.shape)


@register('string')
@dataclasses.dataclass(frozen=True)
class String(GridRotaryEncoder):
  rotation: str = 'axial'
  base: float | None = None
  parametrization: str = 'cayley'
  layout: str = 'interleaved'

  needs_head_dim = True

  def __post_init__(self):
    super().__post_init__()
    validation.choice(self.name, 'rotation', self.rotation, ROTATIONS)
    validation.choice(self.name, 'parametrization', self.parametrization, PARAMETRIZATIONS)
    if self.base is not None:
      validation.number(self.name, 'base', self.base, above=1)
    validation.choice(self.name, 'layout', self.layout, rope_1d.LAYOUTS)
    if self.rotation == 'mixed':
      validation.require(self.axes == 2, self.name, 'axes', self.axes, "2 with rotation='mixed' (RoPE-Mixed is 2-D)")

  def rope(self) -> GridRotaryEncoder:
    """The base rotation RoPE(r): rope_axial or rope_mixed with this encoder's axes, base and layout."""
    base = DEFAULT_BASE[self.rotation] if self.base is None else self.base
    if self.rotation == 'axial':
      return RopeAxial(axes=self.axes, base=base, layout=self.layout)
    return RopeMixed(base=base, layout=self.layout)

  def check_dims(self, dims_):
    step = 2 * self.axes if self.rotation == 'axial' else 4
    validation.require(
        dims_.head_dim % step == 0,
        self.name,
        'head_dim',
        dims_.head_dim,
        f'a multiple of {step} (the {self.rotation} RoPE rotates head_dim / {step} pairs per '
        f'{"axis" if self.rotation == "axial" else "direction"})',
    )

  def init_params(self, rng, dims_):
    d = dims_.head_dim
    return {'skew': jnp.zeros((dims_.num_heads, d, d), jnp.float32), **self.rope().init_params(rng, dims_)}

  def orthogonal(self, params) -> jax.Array:
    """(num_heads, D, D) float32: P, orthogonal with det 1."""
    s = skew(jnp.asarray(params['skew'], jnp.float32))
    return cayley(s) if self.parametrization == 'cayley' else expm(s)

  def angles(self, params, positions, head_dim):
    return self.rope().angles(params, positions, head_dim)

  def rotate(self, params, x, positions):
    """P^T RoPE(r) P x for x (..., L, H, D) at coordinates (..., L, axes)."""
    dims = contract.dims(params)
    if x.ndim < 3 or x.shape[-1] != dims.head_dim or x.shape[-2] != dims.num_heads:
      raise ValueError(
          f'{self.name}: x must be (..., length, heads={dims.num_heads}, head_dim={dims.head_dim}) (the sizes the '
          f'params were initialised for), got shape {tuple(x.shape)}.'
      )
    p = self.orthogonal(params)
    moved = jnp.einsum('hde,...he->...hd', p, x.astype(jnp.float32))
    rotated = super().rotate(params, moved, positions)
    return jnp.einsum('hed,...he->...hd', p, rotated).astype(x.dtype)
