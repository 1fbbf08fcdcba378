"""xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer"): rotary embeddings with exponential decay.

Pair k of a head of dimension D is rotated as in RoPE and scaled by zeta_k to the power position / B:

    zeta_k = (2k / D + gamma) / (1 + gamma),   gamma = 0.4,   B = scale_base = 512     (k = 0 .. D/2 - 1)
    query at n:  R_n q * zeta^( n / B)         key at m:  R_m k * zeta^(-m / B)

so pair k contributes zeta_k^((n - m) / B) times its RoPE term: a score that depends on n - m only and,
since zeta_k < 1, decays with the distance n - m >= 0 (fast for the high-frequency pairs, k small).

Causal only: a key ahead of the query (m > n) gets zeta^((n - m) / B) > 1, growing without bound with the
distance, which is why the paper (and torchscale) apply xPos to causal language models. `requires_causal`
says so to the attention layer.

Numerical range: zeta^(n / B) over/underflows float32 once |n| ln(1/zeta_0) / B > ~87, i.e. |n| > ~35,600
for zeta_0 = 0.4 / 1.4. As torchscale (microsoft/torchscale, `xpos_relative_position.py`), positions are
centred before the decay: the exponent uses n - c with c = ceil(N / 2), N = (last position + 1), the same c
for queries and keys (it cancels in n - m), which doubles the usable range to sequences of ~71,000. Concrete
positions farther than |n - c| ~ 34,700 (exponent 85, B = 512) raise ValueError; under jit they cannot be
inspected and the scores turn inf / NaN, so keep traced evaluation lengths below ~69,000. Here c
is computed per sequence from the positions passed (max along the last axis + 1), so queries and keys must
be rotated with position arrays that end at the same position: true for self-attention, randomized
positions, and causal cached decoding whose cache holds the positions seen so far. Pass `center=` to both
`rotate_queries` and `rotate_keys` when that does not hold (a fixed-size cache).

`rotate` is ambiguous here (queries and keys are scaled inversely) and raises ValueError; call
`rotate_queries` / `rotate_keys`. Layout: 'interleaved' by default, as torchscale's `rotate_every_two`; the
rotation itself is RoPE's (exact phases, float32, base 10000).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import rope
from relpos_jax.encoders.registry import register

# exp(x) overflows float32 at x ~ 88.7; 85 leaves room for the |q|, |k| the decay multiplies.
_MAX_EXPONENT = 85.0


def zeta(head_dim: int, gamma: float) -> np.ndarray:
  """zeta_k = (2k / D + gamma) / (1 + gamma) for k = 0 .. D/2 - 1, float64 (torchscale's `scale`)."""
  return (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim + gamma) / (1.0 + gamma)


@register('xpos')
@dataclasses.dataclass(frozen=True)
class XPos(contract.RotaryEncoder):
  gamma: float = 0.4
  scale_base: float = 512.0
  base: float = 10000.0
  layout: str = 'interleaved'

  requires_causal: ClassVar[bool] = True
  one_rotation: ClassVar[bool] = False  # Queries scaled by zeta^(n/B), keys by zeta^(-m/B).

  def __post_init__(self):
    validation.number(self.name, 'gamma', self.gamma, above=0)
    validation.number(self.name, 'scale_base', self.scale_base, above=0)
    validation.number(self.name, 'base', self.base, above=1)
    validation.choice(self.name, 'layout', self.layout, rope.LAYOUTS)

  def check_dims(self, dims_):
    if dims_.head_dim is not None:
      rope.check_head_dim(self.name, dims_.head_dim)

  def rotate(self, params, x, positions):
    raise ValueError(
        'xpos: rotate() is ambiguous because queries are scaled by zeta^(n/B) and keys by '
        'zeta^(-m/B); call rotate_queries or rotate_keys.'
    )

  @staticmethod
  def center(positions: jax.Array) -> jax.Array:
    """torchscale's centre: ceil(N / 2) with N = last position + 1, per sequence; shape (..., 1)."""
    last = jnp.max(jnp.asarray(positions, jnp.int32), axis=-1, keepdims=True)
    return (last + 2) // 2

  def _rotate(self, params, x, positions, center, sign: int):
    head_dim, positions = rope.check_rotary_inputs(self.name, params, x, positions)
    c = self.center(positions) if center is None else validation.int_array(self.name, 'center', center)
    log_zeta = np.log(zeta(head_dim, self.gamma)) / self.scale_base  # (D/2,), float64 constants.
    self._check_range(positions, c, np.max(np.abs(log_zeta)))
    # The centred offset is an exact integer; one float32 product and exp per pair.
    offset = (positions - c).astype(jnp.float32)[..., None]  # (..., L, 1)
    decay = jnp.exp(sign * offset * log_zeta.astype(np.float32))[..., None, :]  # (..., L, 1, D/2)
    inv_freq = rope.rope_scaling.default_inverse_frequencies(head_dim, self.base)
    return rope.apply_rotation(x, rope.rotary_angles(positions, inv_freq), self.layout, decay)

  def _check_range(self, positions, c, steepest: float) -> None:
    """Concrete positions only: |n - c| |ln zeta_0| / B must stay below ~88, where exp overflows in float32."""
    values, centre = validation.concrete(positions), validation.concrete(c)
    if values is None or centre is None or not values.size:
      return
    limit = int(_MAX_EXPONENT / steepest)
    farthest = int(np.max(np.abs(values.astype(np.int64) - centre.astype(np.int64))))
    if farthest > limit:
      raise ValueError(
          f'{self.name}: a position lies {farthest} from the centre c = ceil(N / 2); the decay '
          f'zeta^((n - c) / B) overflows float32 beyond |n - c| = {limit} (sequences of about '
          f'{2 * limit} positions with scale_base={self.scale_base}); use shorter sequences or a '
          f'larger scale_base.'
      )

  def rotate_queries(self, params, q, positions, *, center=None):
    """R_n q zeta^((n - c) / B); `center` (int or (..., 1) ints) overrides the per-sequence centre."""
    return self._rotate(params, q, positions, center, +1)

  def rotate_keys(self, params, k, positions, *, center=None):
    """R_m k zeta^(-(m - c) / B)."""
    return self._rotate(params, k, positions, center, -1)
