"""The inverse frequencies of rotary embeddings, and the context-extension rules that rescale them.

RoPE (Su et al. 2021) rotates pair k of a head of dimension D at position p by the angle p * theta_k with

    theta_k = base^(-2k / D),   k = 0 .. D/2 - 1                       (the "inverse frequencies")

High k rotate slowly (long wavelengths lambda_k = 2 pi / theta_k); a model trained on length L_orig has
seen full turns only of the pairs with lambda_k < L_orig. Each rule below changes theta so that a longer
context looks, to those pairs, like the one seen in training (s = factor, the extension ratio):

  linear   Position Interpolation (Chen et al. 2023): p -> p / s, i.e. theta_k / s for every pair.
  ntk      NTK-aware base scaling (bloc97, 2023): base' = base * s^(D / (D - 2)); the highest frequency is
           kept and the lowest one is divided by exactly s.
  dynamic  Dynamic NTK (emozilla, 2023; as Hugging Face transformers `_compute_dynamic_ntk_parameters`):
           ntk with a factor that grows with the current length L once L > L_orig:
           base' = base * ((s L / L_orig) - (s - 1))^(D / (D - 2)); L <= L_orig leaves RoPE unchanged.
  yarn     YaRN (Peng et al. 2023), "NTK-by-parts" + attention temperature. As in the reference code
           (jquesnelle/yarn, HF `_compute_yarn_parameters`): the correction dimension of r full turns over
           L_orig is d(r) = D ln(L_orig / (2 pi r)) / (2 ln base); pairs below floor(d(beta_fast)) are left
           alone (extrapolated), pairs above ceil(d(beta_slow)) are interpolated (theta / s), with a ramp
           linear in the pair index between the two. The paper (section 3.2) writes the same ramp as linear
           in r = L / lambda; the reference code, which we follow, ramps linearly between the rounded
           correction dimensions. The attention factor sqrt(1/t) = 0.1 ln s + 1 (paper eq. 22) multiplies
           both q and k, so the logits gain (0.1 ln s + 1)^2 = 1/t.
  llama3   Llama 3.1's wavelength bands (Meta 2024; HF `_compute_llama3_parameters`): pairs with
           lambda < L_orig / high_freq_factor keep theta, pairs with lambda > L_orig / low_freq_factor get
           theta / s, and in between theta is blended with smooth = (L_orig / lambda - low) / (high - low):
           (1 - smooth) theta / s + smooth theta. Published: s = 8, low = 1, high = 4, L_orig = 8192
           (Llama 3.1); Llama 3.2 uses s = 32. Nothing here is hard-coded.

Every function returns float64 numpy arrays of shape (D/2,): frequencies are constants known when a model
is traced, and keeping them in float64 lets `rope.rotary_angles` turn them into exact phases. Hyperparameters
are validated by `rope.Rope`; these are the bare formulas (also what notebooks plot).
"""

from __future__ import annotations

import math

import numpy as np


def default_inverse_frequencies(head_dim: int, base: float) -> np.ndarray:
  """theta_k = base^(-2k / D) for k = 0 .. D/2 - 1, float64."""
  return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def linear(head_dim: int, base: float, factor: float) -> np.ndarray:
  """Position Interpolation: dividing every frequency by s is dividing every position by s."""
  return default_inverse_frequencies(head_dim, base) / factor


def ntk_base(head_dim: int, base: float, factor: float) -> float:
  """base * s^(D / (D - 2)): theta_{D/2-1} = base'^(-(D-2)/D) becomes exactly theta_{D/2-1} / s."""
  return base * factor ** (head_dim / (head_dim - 2))


def ntk(head_dim: int, base: float, factor: float) -> np.ndarray:
  return default_inverse_frequencies(head_dim, ntk_base(head_dim, base, factor))


def dynamic_ntk_ratio(length, factor: float, original_max_position: int, maximum=np.maximum):
  """g = max(s L / L_orig - (s - 1), 1), the NTK factor at current length L (continuous at L = L_orig).

  `maximum` lets `rope` evaluate the same formula on a traced length (jnp.maximum).
  """
  return maximum(factor * length / original_max_position - (factor - 1), 1.0)


def dynamic(head_dim: int, base: float, factor: float, original_max_position: int,
            length: int) -> np.ndarray:
  """Dynamic NTK at a known current length L (= max position + 1)."""
  g = float(dynamic_ntk_ratio(length, factor, original_max_position))
  return default_inverse_frequencies(head_dim, base * g ** (head_dim / (head_dim - 2)))


def yarn_correction_dim(num_rotations: float, head_dim: int, base: float, original_max_position: int) -> float:
  """The (fractional) pair index whose wavelength fits `num_rotations` times into L_orig."""
  return (head_dim * math.log(original_max_position / (num_rotations * 2 * math.pi))
          / (2 * math.log(base)))


def yarn_correction_range(head_dim: int, base: float, original_max_position: int, beta_fast: float,
                          beta_slow: float) -> tuple[int, int]:
  """(low, high): the pairs below `low` extrapolate, those above `high` interpolate (reference rounding)."""
  low = math.floor(yarn_correction_dim(beta_fast, head_dim, base, original_max_position))
  high = math.ceil(yarn_correction_dim(beta_slow, head_dim, base, original_max_position))
  return max(low, 0), min(high, head_dim - 1)


def yarn_ramp(head_dim: int, base: float, original_max_position: int, beta_fast: float,
              beta_slow: float) -> np.ndarray:
  """Per pair: 0 keeps theta (extrapolation), 1 takes theta / s (interpolation), linear in between."""
  low, high = yarn_correction_range(head_dim, base, original_max_position, beta_fast, beta_slow)
  if low == high:
    high += 0.001  # As the reference: avoids 0 / 0 when both bounds round to the same pair.
  return np.clip((np.arange(head_dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)


def yarn(head_dim: int, base: float, factor: float, original_max_position: int, beta_fast: float = 32.0,
         beta_slow: float = 1.0) -> np.ndarray:
  theta = default_inverse_frequencies(head_dim, base)
  ramp = yarn_ramp(head_dim, base, original_max_position, beta_fast, beta_slow)
  return (theta / factor) * ramp + theta * (1.0 - ramp)


def yarn_attention_factor(factor: float) -> float:
  """sqrt(1/t) = 0.1 ln s + 1 (YaRN eq. 22), applied to q and to k; the logits gain its square."""
  return 0.1 * math.log(factor) + 1.0


def llama3(head_dim: int, base: float, factor: float, low_freq_factor: float, high_freq_factor: float,
           original_max_position: int) -> np.ndarray:
  theta = default_inverse_frequencies(head_dim, base)
  wavelength = 2 * np.pi / theta
  smooth = (original_max_position / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
  blended = (1.0 - smooth) * theta / factor + smooth * theta
  low_freq_wavelength = original_max_position / low_freq_factor
  high_freq_wavelength = original_max_position / high_freq_factor
  return np.where(wavelength < high_freq_wavelength, theta,
                  np.where(wavelength > low_freq_wavelength, theta / factor, blended))
