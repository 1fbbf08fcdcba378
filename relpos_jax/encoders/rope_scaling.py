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
  longrope LongRoPE (Ding et al. 2024) as Phi-3 ships it (HF `_compute_longrope_parameters`): theta_k / f_k
           with per-pair factors f, `short_factor` while the sequence fits L_orig and `long_factor` beyond;
           the attention factor sqrt(1 + ln s / ln L_orig) multiplies q and k (s <= 1: 1).

The YaRN extras follow HF `_compute_yarn_parameters` and DeepSeek-V2: `truncate=False` keeps the correction
range unrounded; get_mscale(s, m) = 0.1 m ln s + 1, and with both `mscale` and `mscale_all_dim` the attention
factor is get_mscale(s, mscale) / get_mscale(s, mscale_all_dim); `attn_factor` (the YaRN reference code's
name) multiplies it. Dynamic YaRN (the reference's `LlamaDynamicYaRNScaledRotaryEmbedding`) uses the factor
s = max(1, L / L_orig) of the current length L.

Frequency options applied after the rule (HF / GPT-NeoX, Barbero et al. 2024, Wang et al. 2024):
  partial  only the first int(D f) dimensions rotate; their frequencies are the rule's at that dimension
  p-RoPE   `frequency_fraction` p keeps the floor(p D/2) highest frequencies and sets the rest to zero
           (position-free pairs; the reference's infinite timescales): not the same as `partial`, which
           re-spreads the full spectrum over fewer dimensions
  resonance  theta_k -> 2 pi / round(2 pi / theta_k): every wavelength an integer number of positions

Every function returns float64 numpy arrays of shape (D/2,): frequencies are constants known when a model
is traced, and keeping them in float64 lets `rope.rotary_angles` turn them into exact phases. Hyperparameters
are validated by `rope.Rope`; these are the bare formulas (also what notebooks plot).

`RULES` is the table of the rules, one `Rule` per `scaling` name, as Hugging Face transformers'
`ROPE_INIT_FUNCTIONS` (modeling_rope_utils.py): each holds the hyperparameters the rule takes (with their
published defaults) and a pure function (hyperparameters, rotated dims D, current length) -> theta. `rope.Rope`
validates and reads the table; adding a rule is one function and one row here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

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


def dynamic(head_dim: int, base: float, factor: float, original_max_position: int, length: int) -> np.ndarray:
  """Dynamic NTK at a known current length L (= max position + 1)."""
  g = float(dynamic_ntk_ratio(length, factor, original_max_position))
  return default_inverse_frequencies(head_dim, base * g ** (head_dim / (head_dim - 2)))


def yarn_correction_dim(num_rotations: float, head_dim: int, base: float, original_max_position: int) -> float:
  """The (fractional) pair index whose wavelength fits `num_rotations` times into L_orig."""
  return head_dim * math.log(original_max_position / (num_rotations * 2 * math.pi)) / (2 * math.log(base))


def yarn_correction_range(
    head_dim: int, base: float, original_max_position: int, beta_fast: float, beta_slow: float, truncate: bool = True
) -> tuple[float, float]:
  """(low, high): the pairs below `low` extrapolate, those above `high` interpolate.

  truncate=True rounds low down and high up (the reference code); False keeps them fractional (HF's
  `truncate` option, used by gpt-oss).
  """
  low = yarn_correction_dim(beta_fast, head_dim, base, original_max_position)
  high = yarn_correction_dim(beta_slow, head_dim, base, original_max_position)
  if truncate:
    low, high = math.floor(low), math.ceil(high)
  return max(low, 0), min(high, head_dim - 1)


def yarn_ramp(
    head_dim: int, base: float, original_max_position: int, beta_fast: float, beta_slow: float, truncate: bool = True
) -> np.ndarray:
  """Per pair: 0 keeps theta (extrapolation), 1 takes theta / s (interpolation), linear in between."""
  low, high = yarn_correction_range(head_dim, base, original_max_position, beta_fast, beta_slow, truncate)
  if low == high:
    high += 0.001  # As the reference: avoids 0 / 0 when both bounds round to the same pair.
  return np.clip((np.arange(head_dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)


def yarn(
    head_dim: int,
    base: float,
    factor: float,
    original_max_position: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    truncate: bool = True,
) -> np.ndarray:
  theta = default_inverse_frequencies(head_dim, base)
  ramp = yarn_ramp(head_dim, base, original_max_position, beta_fast, beta_slow, truncate)
  return (theta / factor) * ramp + theta * (1.0 - ramp)


def yarn_get_mscale(factor, mscale: float = 1.0, log=math.log):
  """0.1 m ln s + 1 (1 for s <= 1 in the references; the formula gives 1 at s = 1 and s >= 1 here)."""
  return 0.1 * mscale * log(factor) + 1.0


def yarn_attention_factor(
    factor, mscale: float | None = None, mscale_all_dim: float | None = None, attn_factor: float = 1.0, log=math.log
):
  """sqrt(1/t) = 0.1 ln s + 1 (YaRN eq. 22), applied to q and to k; the logits gain its square.

  With mscale and mscale_all_dim (DeepSeek-V2): get_mscale(s, mscale) / get_mscale(s, mscale_all_dim).
  `attn_factor` multiplies the result (YaRN reference code). `log` lets rope evaluate it on a traced s.
  """
  if mscale is not None and mscale_all_dim is not None:
    value = yarn_get_mscale(factor, mscale, log) / yarn_get_mscale(factor, mscale_all_dim, log)
  else:
    value = yarn_get_mscale(factor, 1.0, log)
  return attn_factor * value


def longrope(head_dim: int, base: float, ext_factors) -> np.ndarray:
  """theta_k / f_k: LongRoPE's per-pair rescale factors (short or long) divide the frequencies."""
  return default_inverse_frequencies(head_dim, base) / np.asarray(ext_factors, np.float64)


def longrope_default_long_factors(head_dim: int, factor: float) -> np.ndarray:
  """s^(2k / (D - 2)): the per-pair factors NTK-aware scaling implies (1 for the highest frequency, s for the
  lowest), the non-uniform, monotone shape of LongRoPE's searched factors; the default when none are given."""
  return factor ** (np.arange(0, head_dim, 2, dtype=np.float64) / (head_dim - 2))


def longrope_attention_factor(factor: float, original_max_position: int) -> float:
  """sqrt(1 + ln s / ln L_orig) (Phi-3 / HF), 1 for s <= 1."""
  if factor <= 1.0:
    return 1.0
  return math.sqrt(1.0 + math.log(factor) / math.log(original_max_position))


def resonance(inv_freq: np.ndarray) -> np.ndarray:
  """Resonance RoPE: 2 pi / round(2 pi / theta); zero frequencies (p-RoPE's free pairs) stay zero."""
  inv_freq = np.asarray(inv_freq, np.float64)
  safe = np.where(inv_freq > 0, inv_freq, 1.0)
  return np.where(inv_freq > 0, 2 * np.pi / np.round(2 * np.pi / safe), 0.0)


def kept_frequencies(num_pairs: int, frequency_fraction: float) -> int:
  """p-RoPE: how many of the highest frequencies keep rotating, floor(p D / 2)."""
  return int(math.floor(frequency_fraction * num_pairs + 1e-9))


def p_rope(inv_freq: np.ndarray, frequency_fraction: float) -> np.ndarray:
  """p-RoPE: zero every frequency but the floor(p D/2) highest (the first pairs)."""
  inv_freq = np.array(inv_freq, np.float64)
  inv_freq[kept_frequencies(inv_freq.shape[0], frequency_fraction) :] = 0.0
  return inv_freq


def llama3(
    head_dim: int,
    base: float,
    factor: float,
    low_freq_factor: float,
    high_freq_factor: float,
    original_max_position: int,
) -> np.ndarray:
  theta = default_inverse_frequencies(head_dim, base)
  wavelength = 2 * np.pi / theta
  smooth = (original_max_position / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
  blended = (1.0 - smooth) * theta / factor + smooth * theta
  low_freq_wavelength = original_max_position / low_freq_factor
  high_freq_wavelength = original_max_position / high_freq_factor
  return np.where(
      wavelength < high_freq_wavelength, theta, np.where(wavelength > low_freq_wavelength, theta / factor, blended)
  )


# ----------------------------------------------------------------------------------------------------------
# The table of rules.

REQUIRED = object()  # A rule's hyperparameter with no published default: the spec must give it.


@dataclasses.dataclass(frozen=True)
class Rule:
  """One context-extension rule.

  fields: the scaling hyperparameters it takes, each with its published default (or REQUIRED; None where the
    default is computed from the others, e.g. YaRN's attention factor 0.1 ln s + 1).
  inverse_frequencies: (hparams, D, length) -> theta (D/2,) float64, before the options (partial rotary is in
    D already; resonance and p-RoPE are applied after). `hparams` is anything with the rule's fields and
    `base` as attributes (a validated `rope.Rope`); `length` (max position + 1) is None for fixed-frequency rules.
  length_dependent: whether theta follows the current length (then `length` is an int).
  """

  fields: Mapping[str, Any]
  inverse_frequencies: Callable[[Any, int, int | None], np.ndarray]
  length_dependent: bool = False


def longrope_factors(h, head_dim: int, long: bool) -> np.ndarray:
  """LongRoPE's per-pair factors: `long_factor` (default s^(2k/(D-2))) or `short_factor` (default ones)."""
  if long:
    given = h.long_factor
    return longrope_default_long_factors(head_dim, h.factor) if given is None else np.asarray(given, np.float64)
  return np.ones(head_dim // 2) if h.short_factor is None else np.asarray(h.short_factor, np.float64)


def _none_rule(h, d, length):
  return default_inverse_frequencies(d, h.base)


def _linear_rule(h, d, length):
  return linear(d, h.base, h.factor)


def _ntk_rule(h, d, length):
  return ntk(d, h.base, h.factor)


def _dynamic_rule(h, d, length):
  return dynamic(d, h.base, h.factor, h.original_max_position, length)


def _yarn_rule(h, d, length):
  # Dynamic YaRN (h.dynamic) takes s = max(1, L / L_orig) of the current length.
  s = max(1.0, length / h.original_max_position) if h.dynamic else h.factor
  return yarn(d, h.base, s, h.original_max_position, h.beta_fast, h.beta_slow, h.truncate)


def _llama3_rule(h, d, length):
  return llama3(d, h.base, h.factor, h.low_freq_factor, h.high_freq_factor, h.original_max_position)


def _longrope_rule(h, d, length):
  # Short factors while the sequence fits the original context, long ones beyond (Phi-3, HF).
  return longrope(d, h.base, longrope_factors(h, d, length > h.original_max_position))


RULES: dict[str, Rule] = {
    'none': Rule({}, _none_rule),
    'linear': Rule({'factor': REQUIRED}, _linear_rule),
    'ntk': Rule({'factor': REQUIRED}, _ntk_rule),
    'dynamic': Rule({'factor': REQUIRED, 'original_max_position': 2048}, _dynamic_rule, length_dependent=True),
    'yarn': Rule(
        {
            'factor': REQUIRED,
            'original_max_position': 2048,
            'beta_fast': 32.0,
            'beta_slow': 1.0,
            'attention_factor': None,
            'truncate': True,
            'mscale': None,
            'mscale_all_dim': None,
            'attn_factor': 1.0,
            'dynamic': False,
        },
        _yarn_rule,
    ),
    'llama3': Rule(
        {'factor': 8.0, 'original_max_position': 8192, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0}, _llama3_rule
    ),
    'longrope': Rule(
        {
            'factor': REQUIRED,
            'original_max_position': 4096,
            'short_factor': None,
            'long_factor': None,
            'attention_factor': None,
        },
        _longrope_rule,
        length_dependent=True,
    ),
}
