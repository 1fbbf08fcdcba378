"""The statistics every study table uses: one mean, one ± (sample standard deviation), paired intervals.

    mean([1.0, 2.0, 4.0])                      # 2.333...
    std([1.0, 2.0, 4.0])                       # sample std (ddof 1): 1.528
    paired_difference([2.0, 2.1, 2.3], [2.2, 2.2, 2.6])

± in every table of relpos_jax is `std`: the sample standard deviation over seeds (n - 1 in the
denominator), so a 2-seed spread reads the same in a study and in the suite.

A clean run (no error in N independent trials) bounds the error rate below 3/N at 95% confidence: the rule of
three (Hanley & Lippman-Hand 1983, "If nothing goes wrong, is everything all right?", JAMA 249:1743), the
Poisson form of the exact one-sided bound 1 - 0.05^(1/N) = -ln(0.05)/N + O(1/N^2) = 2.996/N, so 3/N is
slightly conservative. `clean_run_bound`.

Paired differences: two encoders trained with the same seed see the same data stream (and the same
evaluation text), so the difference of their metrics per seed, d_s = a_s - b_s, removes what the seed
shares. Its 95% interval is the t interval mean(d) ± t_{0.975, n-1} · std(d) / √n over the n seeds that
both have; the difference is *resolved* iff that interval excludes zero. With fewer than two seeds there is
no interval, and nothing is resolved.
"""

from __future__ import annotations

import math
from typing import Sequence

CONFIDENCE = 0.95
PLUS_MINUS = 'mean ± sample standard deviation over seeds (ddof 1)'


def mean(values: Sequence[float] | None) -> float | None:
  """The mean of the values that are not None; None if there are none."""
  values = [float(v) for v in values or () if v is not None]
  return sum(values) / len(values) if values else None


def std(values: Sequence[float] | None) -> float | None:
  """Sample standard deviation (n - 1); None for fewer than two values (None entries are left out)."""
  values = [float(v) for v in values or () if v is not None]
  if len(values) < 2:
    return None
  center = sum(values) / len(values)
  return math.sqrt(sum((v - center) ** 2 for v in values) / (len(values) - 1))


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
  """The two-sided `confidence` quantile of Student's t with `df` degrees of freedom (12.706 at df 1)."""
  from scipy import stats as scipy_stats  # scipy comes with jax

  return float(scipy_stats.t.ppf(0.5 + confidence / 2, df))


def paired_difference(a: Sequence[float | None], b: Sequence[float | None], confidence: float = CONFIDENCE) -> dict:
  """a - b per seed (lists aligned by seed; a pair with a None is left out) and its t interval.

  Returns {'n', 'mean', 'std', 'low', 'high', 'half_width', 'resolved', 'confidence'}; with n < 2, no
  interval (low/high/half_width/std None) and resolved False.
  """
  if len(a) != len(b):
    raise ValueError(f'paired_difference needs one value per seed on each side, got {len(a)} and {len(b)}.')
  diffs = [float(x) - float(y) for x, y in zip(a, b) if x is not None and y is not None]
  n = len(diffs)
  out = {'n': n, 'mean': mean(diffs), 'std': std(diffs), 'confidence': confidence}
  if n < 2:
    return {**out, 'low': None, 'high': None, 'half_width': None, 'resolved': False}
  half_width = t_quantile(n - 1, confidence) * out['std'] / math.sqrt(n)
  low, high = out['mean'] - half_width, out['mean'] + half_width
  return {**out, 'low': low, 'high': high, 'half_width': half_width, 'resolved': low > 0 or high < 0}


def clean_run_bound(trials: float) -> float:
  """The 95% upper bound on an error rate that `trials` independent trials without an error give: the rule of
  three, 3 / trials (a flip-flop run with no glitch in N reads bounds its glitch rate below 3000 / N per
  thousand reads; 30,000 reads resolve 0.1 per thousand)."""
  if not isinstance(trials, (int, float)) or isinstance(trials, bool) or not trials > 0:
    raise ValueError(f'clean_run_bound: trials={trials!r} is invalid; allowed: a number > 0.')
  return 3.0 / float(trials)
