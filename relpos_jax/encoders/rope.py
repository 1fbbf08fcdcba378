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
  longrope  required           4096                    short_factor = ones, long_factor = s^(2k/(D-2)),
                                                       attention_factor = sqrt(1 + ln s / ln L_orig)

YaRN extras: truncate = True, mscale / mscale_all_dim (DeepSeek-V2; together or not at all), attn_factor = 1,
dynamic = False (dynamic YaRN: s = max(1, L / L_orig) from the current length; no factor).

Options for every rule (defaults: off):
  partial_rotary_factor f   rotate only the first int(D f) dims of each head (GPT-NeoX `rotary_pct`, HF
                            `partial_rotary_factor`): frequencies, and any attention factor, are over those dims.
  frequency_fraction p      p-RoPE (Barbero et al. 2024, "Round and Round We Go!"): keep the floor(p D'/2)
                            highest frequencies, the other pairs are position-free (zero frequency).
  resonance                 Resonance RoPE (Wang et al. 2024): every wavelength rounded to an integer,
                            theta -> 2 pi / round(2 pi / theta) (after the rule; static rules only).

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
import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

# `base` is also RoPE's hyperparameter name; the contract module goes by `contract` here.
from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import rope_scaling
from relpos_jax.encoders.registry import register

LAYOUTS = ('half', 'interleaved')
# The rules, their hyperparameters and frequencies: one table, `rope_scaling.RULES`.
SCALINGS = tuple(rope_scaling.RULES)
# The largest attention factor (YaRN's, LongRoPE's) and the largest of the settings it is made of (mscale,
# mscale_all_dim, attn_factor): q and k are both multiplied by it, so scores by its square, and 1e6 times any
# score stays finite in float32 (attention_factor=1e30 gave NaN outputs). Published values are about 1 to 1.5.
MAX_ATTENTION_FACTOR = 1e3

_REQUIRED = rope_scaling.REQUIRED
# Per rule: the scaling hyperparameters it uses, with their published default (or _REQUIRED). attention_factor
# None means "the paper's 0.1 ln s + 1", filled in by __post_init__.
_RULE_FIELDS = {name: rule.fields for name, rule in rope_scaling.RULES.items()}
# Every rule's hyperparameters, in the order of the dataclass's fields.
_SCALING_FIELDS = (
    'factor',
    'original_max_position',
    'beta_fast',
    'beta_slow',
    'low_freq_factor',
    'high_freq_factor',
    'attention_factor',
    'truncate',
    'mscale',
    'mscale_all_dim',
    'attn_factor',
    'dynamic',
    'short_factor',
    'long_factor',
)
# The rules whose frequencies depend on the traced length (max position + 1).
_LENGTH_DEPENDENT = tuple(name for name, rule in rope_scaling.RULES.items() if rule.length_dependent)

_TWO_32 = 2.0**32


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
  turns = signed_hi * jnp.float32(2.0**-32) + frac_lo.astype(jnp.float32) * jnp.float32(2.0**-64)
  return turns * jnp.float32(2 * np.pi)


def rotary_angles(positions, inv_freq) -> jax.Array:
  """The angles positions * inv_freq reduced to [-pi, pi), float32, exact to one float32 rounding.

  positions: int array (...); inv_freq: (D/2,) frequencies in rad/position. A numpy array (a constant known
  at trace time) is converted from float64; a jax array (traced, e.g. dynamic NTK) from float32 and may
  carry leading axes broadcasting against positions[..., None]. Returns positions.shape + (D/2,), up to
  broadcasting.
  """
  positions = validation.int_array(
      'rotary_angles', 'positions', positions, limit=validation.MAX_RELATIVE, hint=_FRACTIONAL_HINT
  )
  if isinstance(inv_freq, (np.ndarray, list, tuple)):
    hi, lo = _static_turns(np.asarray(inv_freq, np.float64))
  else:
    hi, lo = _traced_turns(jnp.asarray(inv_freq, jnp.float32) / jnp.float32(2 * np.pi))
  return _angles_from_turns(positions, hi, lo)


# ----------------------------------------------------------------------------------------------------------
# The rotation, shared with xpos.

_FRACTIONAL_HINT = (
    'Fractional positions are what linear scaling computes exactly: use ' 'rope(scaling="linear", factor=s).'
)


def check_rotary_inputs(who: str, params, x: jax.Array, positions, min_head_dim: int = 2) -> tuple[int, jax.Array]:
  """Validates x (..., L, H, D) against integer positions broadcastable to (..., L); returns (D, positions)."""
  if x.ndim < 3:
    raise ValueError(f'{who}: x must be (..., length, heads, head_dim), got shape {x.shape}.')
  head_dim = check_head_dim(who, x.shape[-1], min_head_dim)
  dims = params.get('dims') if isinstance(params, dict) else None
  if dims is not None and dims.head_dim is not None and dims.head_dim != head_dim:
    raise ValueError(
        f'{who}: x has head_dim={head_dim} but the params were initialised for ' f'head_dim={dims.head_dim}.'
    )
  positions = validation.int_array(who, 'positions', positions, hint=_FRACTIONAL_HINT)
  lead = x.shape[:-2]
  try:
    ok = positions.ndim >= 1 and np.broadcast_shapes(positions.shape, lead) == lead
  except ValueError:
    ok = False
  if not ok or positions.shape[-1] != lead[-1]:
    raise ValueError(
        f'{who}: positions of shape {positions.shape} do not match x of shape {x.shape}; '
        f'they must broadcast to x.shape[:-2] = {lead} with length {lead[-1]} last.'
    )
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
  truncate: bool | None = None
  mscale: float | None = None
  mscale_all_dim: float | None = None
  attn_factor: float | None = None
  dynamic: bool | None = None
  short_factor: tuple | None = None
  long_factor: tuple | None = None
  partial_rotary_factor: float = 1.0
  frequency_fraction: float = 1.0
  resonance: bool = False

  def __post_init__(self):
    name = self.name
    validation.number(name, 'base', self.base, above=1)
    validation.choice(name, 'layout', self.layout, LAYOUTS)
    validation.choice(name, 'scaling', self.scaling, SCALINGS)
    rule = dict(_RULE_FIELDS[self.scaling])
    dynamic_yarn = self.scaling == 'yarn' and self.dynamic is True
    if dynamic_yarn:
      # Dynamic YaRN takes its factor from the current length: a fixed one would be ignored.
      validation.require(
          self.factor is None,
          name,
          'factor',
          self.factor,
          'None with dynamic=True (dynamic YaRN uses s = max(1, L / original_max_position))',
      )
      rule['factor'] = None
    for field in _SCALING_FIELDS:
      value = getattr(self, field)
      if field not in rule:
        users = [s for s, fields in _RULE_FIELDS.items() if field in fields]
        validation.require(
            value is None,
            name,
            field,
            value,
            f'None with scaling={self.scaling!r} ({field} belongs to scaling in {users})',
        )
      elif value is None and rule[field] is _REQUIRED:
        raise validation.invalid(name, field, value, f'a number >= 1: scaling={self.scaling!r} needs it')
      elif value is None and rule[field] is not None:
        object.__setattr__(self, field, rule[field])  # The rule's published default.
    if self.factor is not None:
      validation.number(name, 'factor', self.factor, at_least=1)
    if self.original_max_position is not None:
      validation.positive_int(name, 'original_max_position', self.original_max_position)
    if self.scaling == 'yarn':
      self._check_yarn(name, dynamic_yarn)
    if self.scaling == 'llama3':
      validation.number(name, 'low_freq_factor', self.low_freq_factor, above=0)
      validation.number(
          name, 'high_freq_factor', self.high_freq_factor, above=self.low_freq_factor, above_name='low_freq_factor'
      )
    if self.scaling == 'longrope':
      for field in ('short_factor', 'long_factor'):
        value = getattr(self, field)
        if value is not None:
          ok = (
              isinstance(value, tuple)
              and len(value) > 0
              and all(
                  isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in value
              )
          )
          validation.require(
              ok, name, field, value, 'None (the default) or a tuple of finite numbers > 0, ' 'one per rotated pair'
          )
      if self.attention_factor is None:
        object.__setattr__(
            self, 'attention_factor', rope_scaling.longrope_attention_factor(self.factor, self.original_max_position)
        )
      validation.number(name, 'attention_factor', self.attention_factor, above=0, at_most=MAX_ATTENTION_FACTOR)
    f, p = self.partial_rotary_factor, self.frequency_fraction
    for field, value in (('partial_rotary_factor', f), ('frequency_fraction', p)):
      ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value <= 1
      validation.require(ok, name, field, value, 'a number in (0, 1]')
    validation.require(isinstance(self.resonance, bool), name, 'resonance', self.resonance, 'True or False')
    if self.resonance:
      validation.require(
          self.scaling != 'dynamic' and not dynamic_yarn,
          name,
          'resonance',
          self.resonance,
          'False with length-dependent (dynamic) frequencies: rounding applies to fixed ones',
      )

  def _check_yarn(self, name: str, dynamic_yarn: bool) -> None:
    validation.number(name, 'beta_slow', self.beta_slow, above=0)
    validation.number(name, 'beta_fast', self.beta_fast, above=self.beta_slow, above_name='beta_slow')
    for field in ('truncate', 'dynamic'):
      validation.require(isinstance(getattr(self, field), bool), name, field, getattr(self, field), 'True or False')
    for field in ('mscale', 'mscale_all_dim'):
      if getattr(self, field) is not None:
        validation.number(name, field, getattr(self, field), above=0, at_most=MAX_ATTENTION_FACTOR)
    if (self.mscale is None) != (self.mscale_all_dim is None):
      raise validation.invalid(
          name,
          'mscale' if self.mscale_all_dim is None else 'mscale_all_dim',
          None,
          'a number > 0 whenever the other of mscale / mscale_all_dim is set (the ' 'attention factor is their ratio)',
      )
    validation.number(name, 'attn_factor', self.attn_factor, above=0, at_most=MAX_ATTENTION_FACTOR)
    if dynamic_yarn:
      validation.require(
          self.attention_factor is None,
          name,
          'attention_factor',
          self.attention_factor,
          'None with dynamic=True (it follows the current factor)',
      )
      return
    if self.attention_factor is None:
      object.__setattr__(
          self,
          'attention_factor',
          rope_scaling.yarn_attention_factor(self.factor, self.mscale, self.mscale_all_dim, self.attn_factor),
      )
    validation.number(name, 'attention_factor', self.attention_factor, above=0, at_most=MAX_ATTENTION_FACTOR)

  # --- frequencies -----------------------------------------------------------------------------------------

  @property
  def length_dependent(self) -> bool:
    """Whether the frequencies follow the current length (max position + 1 of the positions rotated): dynamic
    NTK, dynamic YaRN, LongRoPE."""
    return self.scaling in _LENGTH_DEPENDENT or self.dynamic is True

  def rotary_dim(self, head_dim: int) -> int:
    """How many leading dims of a head rotate: int(D * partial_rotary_factor) (HF's rounding)."""
    return int(head_dim * self.partial_rotary_factor)

  def _check_head_dim(self, head_dim) -> None:
    check_head_dim(self.name, head_dim)
    d = self.rotary_dim(head_dim)
    if d < 2 or d % 2:
      raise validation.invalid(
          self.name,
          'partial_rotary_factor',
          self.partial_rotary_factor,
          f'a fraction whose int(head_dim * f) is even and >= 2 (head_dim={head_dim} ' f'gives {d} rotated dims)',
      )
    needs_two_pairs = self.scaling in ('ntk', 'dynamic') or (self.scaling == 'longrope' and self.long_factor is None)
    if needs_two_pairs:
      # The exponent D / (D - 2) needs at least two pairs.
      validation.require(
          d >= 4, self.name, 'head_dim', head_dim, f'an even int with >= 4 rotated dims with scaling={self.scaling!r}'
      )
    if rope_scaling.kept_frequencies(d // 2, self.frequency_fraction) < 1:
      raise validation.invalid(
          self.name,
          'frequency_fraction',
          self.frequency_fraction,
          f'a fraction keeping at least one of the {d // 2} frequencies',
      )
    if self.scaling == 'longrope':
      for field in ('short_factor', 'long_factor'):
        value = getattr(self, field)
        if value is not None and len(value) != d // 2:
          raise validation.invalid(
              self.name,
              field,
              value,
              f'{d // 2} factors, one per rotated pair ' f'(head_dim={head_dim}, {d} rotated dims)',
          )

  def _finish(self, inv_freq: np.ndarray) -> np.ndarray:
    """The options applied after the rule: resonance rounding, then p-RoPE's zeroed frequencies."""
    if self.resonance:
      inv_freq = rope_scaling.resonance(inv_freq)
    if self.frequency_fraction < 1:
      inv_freq = rope_scaling.p_rope(inv_freq, self.frequency_fraction)
    return inv_freq

  def inverse_frequencies(self, head_dim: int, length: int | None = None) -> np.ndarray:
    """theta_k (rad per position) for the D'/2 rotated pairs under this rule, float64 numpy.

    D' = rotary_dim(head_dim). `length` (the current sequence length, max position + 1) is needed by the
    length-dependent rules only ('dynamic', 'longrope', dynamic YaRN).
    """
    self._check_head_dim(head_dim)
    d = self.rotary_dim(head_dim)
    if self.length_dependent:
      validation.positive_int(self.name, 'length', length)
    elif length is not None:
      raise validation.invalid(
          self.name,
          'length',
          length,
          f'None with scaling={self.scaling!r} (only '
          f'length-dependent rules {_LENGTH_DEPENDENT} and dynamic YaRN use it)',
      )
    return self._finish(rope_scaling.RULES[self.scaling].inverse_frequencies(self, d, length))

  @property
  def vector_scale(self) -> float:
    """The factor applied to every rotated q and k (YaRN's sqrt(1/t), LongRoPE's); the logits gain its
    square. Dynamic YaRN's follows the length (see `_scale`)."""
    return self.attention_factor if self.scaling in ('yarn', 'longrope') and not self.dynamic else 1.0

  @staticmethod
  def _length(positions: jax.Array) -> jax.Array:
    """The current length of each sequence, max position + 1 along the last axis, float32 (..., 1)."""
    return jnp.max(positions, axis=-1, keepdims=True).astype(jnp.float32) + 1.0

  def _traced_angles(
      self, d: int, positions: jax.Array, turns: jax.Array, unscaled: jax.Array, theta: np.ndarray
  ) -> jax.Array:
    """Angles from traced turns per position; where `unscaled`, the float64-exact plain frequencies."""
    keep = np.ones(d // 2)
    if self.frequency_fraction < 1:
      keep[rope_scaling.kept_frequencies(d // 2, self.frequency_fraction) :] = 0.0
    hi, lo = _traced_turns(turns * keep.astype(np.float32))
    plain_hi, plain_lo = _static_turns(self._finish(theta))
    hi = jnp.where(unscaled, plain_hi, hi)
    lo = jnp.where(unscaled, plain_lo, lo)
    return _angles_from_turns(positions, hi, lo)

  def _angles(self, head_dim: int, positions: jax.Array) -> jax.Array:
    d = self.rotary_dim(head_dim)
    theta = rope_scaling.default_inverse_frequencies(d, self.base)
    if self.scaling == 'longrope':
      # Short factors while the sequence fits the original context, long ones beyond (Phi-3, HF).
      short = rotary_angles(
          positions, self._finish(rope_scaling.longrope(d, self.base, rope_scaling.longrope_factors(self, d, False)))
      )
      long = rotary_angles(
          positions, self._finish(rope_scaling.longrope(d, self.base, rope_scaling.longrope_factors(self, d, True)))
      )
      return jnp.where((self._length(positions) > self.original_max_position)[..., None], long, short)
    if self.scaling == 'yarn' and self.dynamic:
      # Dynamic YaRN: theta (1 - ramp + ramp / s) with s = max(1, L / L_orig) of each sequence.
      s = jnp.maximum(self._length(positions) / self.original_max_position, 1.0)
      ramp = rope_scaling.yarn_ramp(
          d, self.base, self.original_max_position, self.beta_fast, self.beta_slow, self.truncate
      )
      turns = (theta / (2 * np.pi)).astype(np.float32) * (1.0 - ramp + ramp / s[..., None]).astype(jnp.float32)
      return self._traced_angles(d, positions, turns, (s == 1.0)[..., None], theta)
    if self.scaling != 'dynamic':
      return rotary_angles(positions, self.inverse_frequencies(head_dim))
    # Dynamic NTK: theta'_k = theta_k g^(-2k / (D - 2)) with g from the traced length of each sequence
    # (max position + 1 along the last axis; Hugging Face takes one length for the whole batch).
    g = rope_scaling.dynamic_ntk_ratio(self._length(positions), self.factor, self.original_max_position, jnp.maximum)
    exponent = -np.arange(0, d, 2, dtype=np.float64) / (d - 2)
    turns = (theta / (2 * np.pi)).astype(np.float32) * jnp.exp(jnp.log(g)[..., None] * exponent)
    # Below the original length RoPE is unchanged: use the float64-exact plain frequencies bit for bit.
    return self._traced_angles(d, positions, turns, (g == 1.0)[..., None], theta)

  def _scale(self, positions: jax.Array):
    if self.scaling == 'yarn' and self.dynamic:
      s = jnp.maximum(self._length(positions) / self.original_max_position, 1.0)
      factor = rope_scaling.yarn_attention_factor(s, self.mscale, self.mscale_all_dim, self.attn_factor, log=jnp.log)
      return factor.astype(jnp.float32)[..., None, None]  # (..., 1, 1, 1) against (..., L, 1, D/2)
    return None if self.vector_scale == 1.0 else jnp.float32(self.vector_scale)

  # --- the encoder contract --------------------------------------------------------------------------------

  def check_dims(self, dims_):
    if dims_.head_dim is not None:
      self._check_head_dim(dims_.head_dim)

  def rotate(self, params, x, positions):
    head_dim, positions = check_rotary_inputs(self.name, params, x, positions)
    self._check_head_dim(head_dim)
    return self._apply(x, self._angles(head_dim, positions), self._scale(positions))

  def rotate_divided(self, params, x, positions, divisor: int):
    """x rotated at positions / divisor, exactly: frequencies theta / divisor at the integer positions.

    What leaky ReRoPE needs (`remap.ReRope`); fixed-frequency rules only (not length-dependent ones).
    """
    head_dim, positions = check_rotary_inputs(self.name, params, x, positions)
    self._check_head_dim(head_dim)
    if divisor == 1:
      return self.rotate(params, x, positions)
    if self.length_dependent:
      raise validation.invalid(
          self.name,
          'scaling',
          self.scaling,
          'a fixed-frequency rule to rotate at ' 'fractional positions (leaky ReRoPE)',
      )
    angles = rotary_angles(positions, self.inverse_frequencies(head_dim) / divisor)
    return self._apply(x, angles, self._scale(positions))

  def _apply(self, x, angles, scale):
    head_dim = x.shape[-1]
    d = self.rotary_dim(head_dim)
    if d == head_dim:
      return apply_rotation(x, angles, self.layout, scale)
    # Partial rotary: the leading d dims rotate (and carry any attention factor), the rest pass through.
    rotated = apply_rotation(x[..., :d], angles, self.layout, scale)
    return jnp.concatenate([rotated, x[..., d:]], axis=-1)


def inverse_frequencies(head_dim: int, length: int | None = None, **rope_hparams) -> np.ndarray:
  """The inverse frequencies of `rope(**rope_hparams)` at head_dim (validated), e.g. for plotting:

  inverse_frequencies(64, scaling='yarn', factor=8.0, original_max_position=512)
  """
  return Rope(**rope_hparams).inverse_frequencies(head_dim, length)
