"""Rotary position embeddings (Su et al. 2021, RoFormer) and their context-extension scalings.

RoPE rotates each pair of a query/key head dimension by an angle proportional to the position,
(a, b) -> (a cos(p theta_k) - b sin(p theta_k), a sin(p theta_k) + b cos(p theta_k)), theta_k = base^(-2k/D),
so <R_i q, R_j k> depends on the positions only through j - i. Published default: base = 10000.

Layouts (which dimensions form pair k), named explicitly because checkpoints disagree:
  'half'         pair k = (k, k + D/2)    GPT-NeoX, Llama, Hugging Face `rotate_half`       (default)
  'interleaved'  pair k = (2k, 2k + 1)    RoFormer paper, GPT-J, mesh-tensorflow, torchscale
The two are the same rotation up to a permutation of the head dimension.

Context extension is the `scaling` hyperparameter of the one registered encoder 'rope' (not separate
names): every rule only changes the inverse frequencies (and, for YaRN, a scale of q and k), the rotation is
shared, and one name keeps specs such as `rope(scaling='yarn', factor=4.0)` readable. The formulas live in
`rope_scaling`; hyperparameters and their defaults per rule:

  scaling   factor s           original_max_position   other
  none      -                  -                       -
  linear    required           -                       -
  ntk       required           -                       -
  dynamic   required           2048                    -
  yarn      required           2048                    beta_fast = 32, beta_slow = 1, attention_factor = 0.1 ln s + 1
  llama3    8                  8192                    low_freq_factor = 1, high_freq_factor = 4

(2048 is the default of the YaRN reference code, LLaMA-1's context; set it to your training length.)
A hyperparameter that does not belong to the chosen rule is an error, so `rope(factor=4.0)` without a
scaling cannot silently do nothing.

Precision. The angle p * theta in float32 is off by up to |p theta| * 2^-24: 0.06 rad at p = 10^6, which
breaks the relative-only property at long range. `rotary_angles` computes the phase exactly instead: the
frequency in turns per position is stored as a 64-bit binary fraction (two uint32 words, from the float64
frequency), the product with the int32 position is formed with 16-bit limbs in uint32 arithmetic (exact,
wrapping mod 2^32 drops whole turns), and only the reduced phase in [-1/2, 1/2) turn is converted to a
float32 angle in [-pi, pi). The angle error is then about one float32 rounding (~1e-7 rad) at any position
up to 2^31 - 1 (and for negative positions). Dynamic NTK, whose frequencies depend on the traced length,
converts its float32 frequencies the same way: their float32 rounding changes the frequency slightly, never
the linearity of the phase in the position, so the relative-only property holds to the same tolerance.
All rotation arithmetic is float32 whatever the input dtype; the result is cast back to x.dtype.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

# `base` is also RoPE's hyperparameter name; the contract module goes by `contract` here.
from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import rope_scaling
from relpos_jax.encoders.registry import register

LAYOUTS = ('half', 'interleaved')
SCALINGS = ('none', 'linear', 'ntk', 'dynamic', 'yarn', 'llama3')

_REQUIRED = object()
# Per rule: the scaling hyperparameters it uses, with their published default (or _REQUIRED). attention_factor
# None means "the paper's 0.1 ln s + 1", filled in by __post_init__.
_RULE_FIELDS = {
    'none': {},
    'linear': {'factor': _REQUIRED},
    'ntk': {'factor': _REQUIRED},
    'dynamic': {'factor': _REQUIRED, 'original_max_position': 2048},
    'yarn': {'factor': _REQUIRED, 'original_max_position': 2048, 'beta_fast': 32.0, 'beta_slow': 1.0,
             'attention_factor': None},
    'llama3': {'factor': 8.0, 'original_max_position': 8192, 'low_freq_factor': 1.0,
               'high_freq_factor': 4.0},
}
_SCALING_FIELDS = ('factor', 'original_max_position', 'beta_fast', 'beta_slow', 'low_freq_factor',
                   'high_freq_factor', 'attention_factor')

_TWO_32 = 2.0 ** 32


# ----------------------------------------------------------------------------------------------------------
# Exact phases.

def _static_turns(inv_freq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Frequencies in rad/position (float64) -> turns/position mod 1 as a 64-bit fraction (hi, lo) uint32."""
  turns = np.asarray(inv_freq, np.float64) / (2 * np.pi)
  turns = turns - np.floor(turns)  # Whole turns per position never change a phase.
  scaled = turns * _TWO_32  # Exact: scaling by a power of two; so are the subtraction and floor below.
  hi = np.floor(scaled)
  lo = np.floor((scaled - hi) * _TWO_32)
  return hi.astype(np.uint32), lo.astype(np.uint32)


def _traced_turns(turns: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The same for traced float32 turns per position: every step is exact in float32."""
  turns = turns.astype(jnp.float32)
  turns = turns - jnp.floor(turns)
  scaled = turns * jnp.float32(_TWO_32)
  hi = jnp.floor(scaled)
  lo = jnp.floor((scaled - hi) * jnp.float32(_TWO_32))
  return hi.astype(jnp.uint32), lo.astype(jnp.uint32)


def _mul_hi(a: jax.Array, b: jax.Array) -> jax.Array:
  """The high 32 bits of the 64-bit product of uint32 a and b, from 16-bit limbs (no uint64 without x64)."""
  mask = jnp.uint32(0xFFFF)
  a0, a1 = a & mask, a >> 16
  b0, b1 = b & mask, b >> 16
  p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0  # Each < 2^32.
  middle = (p00 >> 16) + (p01 & mask) + (p10 & mask)  # < 3 * 2^16: no overflow.
  return a1 * b1 + (p01 >> 16) + (p10 >> 16) + (middle >> 16)


def _angles_from_turns(positions: jax.Array, hi: jax.Array, lo: jax.Array) -> jax.Array:
  """positions[..., None] * (hi + lo 2^-32) 2^-32 turns, reduced to [-pi, pi) as float32."""
  p = jnp.asarray(positions, jnp.int32)[..., None]
  p_bits = jax.lax.bitcast_convert_type(p, jnp.uint32)  # p mod 2^32.
  # p * turns mod 1 as the 64-bit fraction (frac_hi, frac_lo); uint32 products wrap, dropping whole turns.
  frac_hi = p_bits * hi + _mul_hi(p_bits, lo)
  # A negative p reads as p + 2^32: take back 2^32 * turns, i.e. lo in the high word (mod 1 turn).
  frac_hi = frac_hi - jnp.where(p < 0, lo, jnp.uint32(0))
  frac_lo = p_bits * lo
  # Signed high word: the phase in [-1/2, 1/2) turn, where float32 is finest near 0.
  signed_hi = jax.lax.bitcast_convert_type(frac_hi, jnp.int32).astype(jnp.float32)
  turns = signed_hi * jnp.float32(2.0 ** -32) + frac_lo.astype(jnp.float32) * jnp.float32(2.0 ** -64)
  return turns * jnp.float32(2 * np.pi)


def rotary_angles(positions, inv_freq) -> jax.Array:
  """The angles positions * inv_freq reduced to [-pi, pi), float32, exact to one float32 rounding.

  positions: int array (...); inv_freq: (D/2,) frequencies in rad/position. A numpy array (a constant known
  at trace time) is converted from float64; a jax array (traced, e.g. dynamic NTK) from float32 and may
  carry leading axes broadcasting against positions[..., None]. Returns positions.shape + (D/2,), up to
  broadcasting.
  """
  positions = validation.int_array('rotary_angles', 'positions', positions, limit=validation.MAX_RELATIVE,
                                   hint=_FRACTIONAL_HINT)
  if isinstance(inv_freq, (np.ndarray, list, tuple)):
    hi, lo = _static_turns(np.asarray(inv_freq, np.float64))
  else:
    hi, lo = _traced_turns(jnp.asarray(inv_freq, jnp.float32) / jnp.float32(2 * np.pi))
  return _angles_from_turns(positions, hi, lo)


# ----------------------------------------------------------------------------------------------------------
# The rotation, shared with xpos.

_FRACTIONAL_HINT = ('Fractional positions are what linear scaling computes exactly: use '
                    'rope(scaling="linear", factor=s).')


def check_rotary_inputs(who: str, params, x: jax.Array, positions,
                        min_head_dim: int = 2) -> tuple[int, jax.Array]:
  """Validates x (..., L, H, D) against integer positions broadcastable to (..., L); returns (D, positions)."""
  if x.ndim < 3:
    raise ValueError(f'{who}: x must be (..., length, heads, head_dim), got shape {x.shape}.')
  head_dim = check_head_dim(who, x.shape[-1], min_head_dim)
  dims = params.get('dims') if isinstance(params, dict) else None
  if dims is not None and dims.head_dim is not None and dims.head_dim != head_dim:
    raise ValueError(f'{who}: x has head_dim={head_dim} but the params were initialised for '
                     f'head_dim={dims.head_dim}.')
  positions = validation.int_array(who, 'positions', positions, hint=_FRACTIONAL_HINT)
  lead = x.shape[:-2]
  try:
    ok = positions.ndim >= 1 and np.broadcast_shapes(positions.shape, lead) == lead
  except ValueError:
    ok = False
  if not ok or positions.shape[-1] != lead[-1]:
    raise ValueError(f'{who}: positions of shape {positions.shape} do not match x of shape {x.shape}; '
                     f'they must broadcast to x.shape[:-2] = {lead} with length {lead[-1]} last.')
  return head_dim, positions


def apply_rotation(x: jax.Array, angles: jax.Array, layout: str, scale=None) -> jax.Array:
  """Rotates pair k of x (..., L, H, D) by angles (..., L, D/2) in float32, times `scale`, cast back.

  `scale` (None, a number, or an array broadcasting against (..., L, 1, D/2)) multiplies each rotated pair:
  YaRN's attention factor, xpos's decay.
  """
  head_dim = x.shape[-1]
  half = head_dim // 2
  cos = jnp.cos(angles)[..., None, :]
  sin = jnp.sin(angles)[..., None, :]
  if scale is not None:
    cos, sin = cos * scale, sin * scale
  x32 = x.astype(jnp.float32)
  if layout == 'half':
    first, second = x32[..., :half], x32[..., half:]
  else:
    pairs = x32.reshape(x.shape[:-1] + (half, 2))
    first, second = pairs[..., 0], pairs[..., 1]
  rotated_first = first * cos - second * sin
  rotated_second = first * sin + second * cos
  if layout == 'half':
    out = jnp.concatenate([rotated_first, rotated_second], axis=-1)
  else:
    out = jnp.stack([rotated_first, rotated_second], axis=-1).reshape(x.shape)
  return out.astype(x.dtype)


# ----------------------------------------------------------------------------------------------------------
# Validation shared with xpos.

def check_head_dim(name: str, head_dim, minimum: int = 2) -> int:
  """The one head_dim check of the rotary encoders: an even int >= minimum (they rotate pairs)."""
  ok = validation.is_int(head_dim) and head_dim >= minimum and head_dim % 2 == 0
  validation.require(ok, name, 'head_dim', head_dim, f'an even int >= {minimum} (rotary encodings rotate pairs)')
  return int(head_dim)


@register('rope')
@dataclasses.dataclass(frozen=True)
class Rope(contract.RotaryEncoder):
  """RoPE with an optional context-extension rule; see the module docstring for the table of fields."""

  base: float = 10000.0
  layout: str = 'half'
  scaling: str = 'none'
  factor: float | None = None
  original_max_position: int | None = None
  beta_fast: float | None = None
  beta_slow: float | None = None
  low_freq_factor: float | None = None
  high_freq_factor: float | None = None
  attention_factor: float | None = None

  def __post_init__(self):
    name = self.name
    validation.number(name, 'base', self.base, above=1)
    validation.choice(name, 'layout', self.layout, LAYOUTS)
    validation.choice(name, 'scaling', self.scaling, SCALINGS)
    rule = _RULE_FIELDS[self.scaling]
    for field in _SCALING_FIELDS:
      value = getattr(self, field)
      if field not in rule:
        users = [s for s, fields in _RULE_FIELDS.items() if field in fields]
        validation.require(value is None, name, field, value,
                         f'None with scaling={self.scaling!r} ({field} belongs to scaling in {users})')
      elif value is None and rule[field] is _REQUIRED:
        raise validation.invalid(name, field, value, f'a number >= 1: scaling={self.scaling!r} needs it')
      elif value is None and rule[field] is not None:
        object.__setattr__(self, field, rule[field])  # The rule's published default.
    if self.factor is not None:
      validation.number(name, 'factor', self.factor, at_least=1)
    if self.original_max_position is not None:
      validation.positive_int(name, 'original_max_position', self.original_max_position)
    if self.scaling == 'yarn':
      validation.number(name, 'beta_slow', self.beta_slow, above=0)
      validation.number(name, 'beta_fast', self.beta_fast, above=self.beta_slow, above_name='beta_slow')
      if self.attention_factor is None:
        object.__setattr__(self, 'attention_factor', rope_scaling.yarn_attention_factor(self.factor))
      validation.number(name, 'attention_factor', self.attention_factor, above=0)
    if self.scaling == 'llama3':
      validation.number(name, 'low_freq_factor', self.low_freq_factor, above=0)
      validation.number(name, 'high_freq_factor', self.high_freq_factor, above=self.low_freq_factor,
                     above_name='low_freq_factor')

  # --- frequencies -----------------------------------------------------------------------------------------

  @property
  def min_head_dim(self) -> int:
    """2, or 4 for ntk / dynamic, whose exponent D / (D - 2) needs at least two pairs."""
    return 4 if self.scaling in ('ntk', 'dynamic') else 2

  def inverse_frequencies(self, head_dim: int, length: int | None = None) -> np.ndarray:
    """theta_k (rad per position) for k = 0 .. D/2 - 1 under this rule, float64 numpy.

    `length` (the current sequence length, max position + 1) is needed by 'dynamic' only.
    """
    check_head_dim(self.name, head_dim, self.min_head_dim)
    d, b, s = head_dim, self.base, self.factor
    if self.scaling == 'dynamic':
      validation.positive_int(self.name, 'length', length)
      return rope_scaling.dynamic(d, b, s, self.original_max_position, length)
    if length is not None:
      raise validation.invalid(self.name, 'length', length, f'None with scaling={self.scaling!r} (only '
                             f'scaling="dynamic" depends on the length)')
    if self.scaling == 'none':
      return rope_scaling.default_inverse_frequencies(d, b)
    if self.scaling == 'linear':
      return rope_scaling.linear(d, b, s)
    if self.scaling == 'ntk':
      return rope_scaling.ntk(d, b, s)
    if self.scaling == 'yarn':
      return rope_scaling.yarn(d, b, s, self.original_max_position, self.beta_fast, self.beta_slow)
    return rope_scaling.llama3(d, b, s, self.low_freq_factor, self.high_freq_factor,
                               self.original_max_position)

  @property
  def vector_scale(self) -> float:
    """The factor applied to every rotated q and k: YaRN's sqrt(1/t); the logits gain its square."""
    return self.attention_factor if self.scaling == 'yarn' else 1.0

  def _angles(self, head_dim: int, positions: jax.Array) -> jax.Array:
    if self.scaling != 'dynamic':
      return rotary_angles(positions, self.inverse_frequencies(head_dim))
    # Dynamic NTK: theta'_k = theta_k g^(-2k / (D - 2)) with g from the traced length of each sequence
    # (max position + 1 along the last axis; Hugging Face takes one length for the whole batch).
    length = jnp.max(positions, axis=-1, keepdims=True).astype(jnp.float32) + 1.0
    g = rope_scaling.dynamic_ntk_ratio(length, self.factor, self.original_max_position, jnp.maximum)
    exponent = -np.arange(0, head_dim, 2, dtype=np.float64) / (head_dim - 2)
    theta = rope_scaling.default_inverse_frequencies(head_dim, self.base)
    turns = (theta / (2 * np.pi)).astype(np.float32) * jnp.exp(jnp.log(g)[..., None] * exponent)
    hi, lo = _traced_turns(turns)
    # Below the original length RoPE is unchanged: use the float64-exact plain frequencies bit for bit.
    plain_hi, plain_lo = _static_turns(theta)
    unscaled = (g == 1.0)[..., None]
    hi = jnp.where(unscaled, plain_hi, hi)
    lo = jnp.where(unscaled, plain_lo, lo)
    return _angles_from_turns(positions, hi, lo)

  # --- the encoder contract --------------------------------------------------------------------------------

  def check_dims(self, dims_):
    if dims_.head_dim is not None:
      check_head_dim(self.name, dims_.head_dim, self.min_head_dim)

  def rotate(self, params, x, positions):
    head_dim, positions = check_rotary_inputs(self.name, params, x, positions, self.min_head_dim)
    scale = None if self.vector_scale == 1.0 else jnp.float32(self.vector_scale)
    return apply_rotation(x, self._angles(head_dim, positions), self.layout, scale)


def inverse_frequencies(head_dim: int, length: int | None = None, **rope_hparams) -> np.ndarray:
  """The inverse frequencies of `rope(**rope_hparams)` at head_dim (validated), e.g. for plotting:

      inverse_frequencies(64, scaling='yarn', factor=8.0, original_max_position=512)
  """
  return Rope(**rope_hparams).inverse_frequencies(head_dim, length)
