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

Text-sample variance: the seed interval holds the scored text fixed, so it says nothing of how the difference
would move on other text of the same kind. `document_bootstrap` resamples the test *documents* with
replacement (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13, the percentile interval) and
recomputes the paired difference in bits per character, total bits over total characters of the resample, for
each; its interval is the (1 - c)/2 and (1 + c)/2 quantiles of those replicates, from a fixed seed.

Both sources at once: the seed interval holds the text fixed and the document bootstrap holds the trained models
fixed, so each omits the other's variance. `two_level_bootstrap` resamples both: the seeds with replacement, and
the documents with replacement within the drawn seeds, then recomputes the pooled difference in bits per
character, A and B read at the same draws (paired); its interval is the percentile interval of those replicates,
from a fixed seed. The seeds and documents are crossed, not nested: every seed scores the same test documents,
so one document draw serves every drawn seed of a replicate (the pigeonhole bootstrap of a crossed design, Owen
2007, "The pigeonhole bootstrap", Ann. Appl. Statist. 1:386-411, which resamples rows and columns independently
and errs wide). Independent document draws per seed would treat one text as several and shrink its variance by
about the square root of the number of seeds; that is why `document_bootstrap` pools the seeds too.

A family of comparisons: `holm` (Holm 1979, "A simple sequentially rejective multiple test procedure",
Scand. J. Statist. 6:65-70) adjusts the p-values of m comparisons: sorted p_(1) <= ... <= p_(m), the adjusted
p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). A comparison is *resolved after Holm* iff its adjusted p-value
is < 1 - confidence (0.05), which controls the chance of any false "resolved" in the family at 5%. The p-value
of a seed interval is the paired t test's (`paired_p_value`), that of a bootstrap interval the two-sided
bootstrap p-value (`document_bootstrap`'s 'p_value'); each is below 1 - c exactly when (up to ties and the
bootstrap's quantile interpolation) its uncorrected interval at confidence c excludes zero. So, read from the
intervals: the comparison ranked i (by p-value, smallest first) is resolved after Holm iff its interval at the
stricter confidence 1 - alpha / (m - i + 1) (returned as 'levels') excludes zero and so does that of every
comparison ranked before it. Tables report the adjusted p-value and say "resolved (Holm)" from it.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

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


def paired_p_value(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
  """Two-sided p-value of the paired t test of a - b per seed (the test `paired_difference`'s interval inverts):
  2 P(T_{n-1} >= |mean| / (std / sqrt n)); None with fewer than two pairs, 1.0 when every difference is 0."""
  from scipy import stats as scipy_stats

  difference = paired_difference(a, b)
  n, spread = difference['n'], difference['std']
  if n < 2:
    return None
  if spread == 0:
    return 1.0 if difference['mean'] == 0 else 0.0
  t = abs(difference['mean']) / (spread / math.sqrt(n))
  return float(2 * scipy_stats.t.sf(t, n - 1))


BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def document_bootstrap(
    a_bits: Sequence[float],
    a_chars: Sequence[float],
    b_bits: Sequence[float],
    b_chars: Sequence[float],
    *,
    num_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> dict:
  """Document-bootstrap interval of the difference in bits per character, A - B, over test documents.

  Inputs are aligned by document: each encoder's total bits and characters on each test document (from
  `relpos_jax.data.bpe.document_totals`; for one corpus and tokenizer the characters agree, for two tokenizers
  they are the same text counted once each). Resample r draws n document indices with replacement from
  `np.random.default_rng(seed)` (`integers(0, n, size=(num_resamples, n))`, row r) and computes
  sum(a_bits[idx]) / sum(a_chars[idx]) - sum(b_bits[idx]) / sum(b_chars[idx]); the interval is the
  percentile interval of those replicates (numpy's default linear quantiles).

  Documents with no scored characters on either side (no evaluation window reached them) are left out first.
  Returns {'n_documents' (the scored ones), 'mean' (the difference on all documents), 'low', 'high', 'half_width' (half the
  interval's width), 'resolved' (the interval excludes 0), 'p_value' (two-sided: 2 min(P*(d <= 0),
  P*(d >= 0)), capped at 1), 'num_resamples', 'seed', 'confidence', 'method'}.
  """
  arrays = [np.asarray(x, np.float64).reshape(-1) for x in (a_bits, a_chars, b_bits, b_chars)]
  n = arrays[0].size
  if any(x.size != n for x in arrays):
    raise ValueError(
        'document_bootstrap needs one value per document in each input, got sizes '
        f'a_bits={arrays[0].size}, a_chars={arrays[1].size}, b_bits={arrays[2].size}, b_chars={arrays[3].size}'
    )
  if n < 2:
    raise ValueError(f'document_bootstrap needs at least 2 documents, got {n}')
  if any(np.any(x < 0) or not np.all(np.isfinite(x)) for x in arrays):
    raise ValueError('document_bootstrap needs finite, non-negative bits and characters')
  if arrays[1].sum() <= 0 or arrays[3].sum() <= 0:
    raise ValueError('document_bootstrap needs scored characters on each side (a_chars and b_chars sum to > 0)')
  _check_resampling(num_resamples, confidence)
  scored = (arrays[1] > 0) | (arrays[3] > 0)  # a document no window reached is not in the sample
  a_bits, a_chars, b_bits, b_chars = (x[scored] for x in arrays)
  n = int(scored.sum())
  if n < 2:
    raise ValueError(f'document_bootstrap needs at least 2 scored documents (characters > 0), got {n}')
  index = np.random.default_rng(seed).integers(0, n, size=(num_resamples, n))
  with np.errstate(invalid='ignore', divide='ignore'):  # a resample of unscored documents only: left out
    replicates = a_bits[index].sum(1) / a_chars[index].sum(1) - b_bits[index].sum(1) / b_chars[index].sum(1)
  return {
      'n_documents': n,
      'mean': float(a_bits.sum() / a_chars.sum() - b_bits.sum() / b_chars.sum()),
      **_percentile_summary(replicates, confidence),
      'num_resamples': num_resamples,
      'seed': seed,
      'confidence': confidence,
      'method': 'document bootstrap, percentile interval of the difference in total bits / total characters',
  }


def _percentile_summary(replicates: np.ndarray, confidence: float) -> dict:
  """{'low', 'high', 'half_width', 'resolved', 'p_value'} of a bootstrap's replicates (non-finite ones left out):
  the percentile interval and the two-sided bootstrap p-value 2 min(P*(d <= 0), P*(d >= 0)), capped at 1."""
  replicates = replicates[np.isfinite(replicates)]
  low, high = (float(q) for q in np.quantile(replicates, [(1 - confidence) / 2, (1 + confidence) / 2]))
  p_value = min(1.0, 2 * min(float(np.mean(replicates <= 0)), float(np.mean(replicates >= 0))))
  return {'low': low, 'high': high, 'half_width': (high - low) / 2, 'resolved': low > 0 or high < 0, 'p_value': p_value}


def _check_resampling(num_resamples, confidence) -> None:
  if isinstance(num_resamples, bool) or not isinstance(num_resamples, int) or num_resamples < 1:
    raise ValueError(f'num_resamples must be a positive int, got num_resamples={num_resamples!r}')
  if not 0 < confidence < 1:
    raise ValueError(f'confidence must be in (0, 1), got confidence={confidence!r}')


def two_level_bootstrap(
    a_bits: Sequence[Sequence[float]],
    a_chars: Sequence[Sequence[float]],
    b_bits: Sequence[Sequence[float]],
    b_chars: Sequence[Sequence[float]],
    *,
    num_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> dict:
  """Seed x document bootstrap interval of the difference in bits per character, A - B (module docstring).

  Inputs have shape (S seeds, D documents), rows aligned by seed (the seeds both sides have) and columns by
  document: each seed's total bits and characters on each test document. With `rng = np.random.default_rng(seed)`,
  replicate r draws D documents with replacement (`rng.integers(0, D, size=(num_resamples, D))`, row r: the
  draws `document_bootstrap` makes from the same seed), then S seeds (`rng.integers(0, S, size=(num_resamples,
  S))`), and computes sum(a_bits) / sum(a_chars) - sum(b_bits) / sum(b_chars) over the drawn (seed, document)
  cells, every drawn seed reading the same drawn documents. So with S identical seeds it is `document_bootstrap`,
  and with documents that all read alike it is a bootstrap of the seeds. A document with no scored characters in any seed on either side is left
  out first, as in `document_bootstrap`. The point estimate ('mean') is the pooled difference on every seed and
  document: the mean over seeds of the seed table's difference when every seed scores the same characters.

  Returns {'n_seeds', 'n_documents', 'mean', 'low', 'high', 'half_width', 'resolved', 'p_value',
  'num_resamples', 'seed', 'confidence', 'method'}. Needs at least 2 seeds (with one it is the document
  bootstrap) and 2 scored documents.
  """
  arrays = [np.asarray(x, np.float64) for x in (a_bits, a_chars, b_bits, b_chars)]
  shapes = {x.shape for x in arrays}
  if len(shapes) != 1 or arrays[0].ndim != 2:
    raise ValueError(
        'two_level_bootstrap needs four arrays of one shape (seeds, documents), got shapes '
        f'a_bits={arrays[0].shape}, a_chars={arrays[1].shape}, b_bits={arrays[2].shape}, b_chars={arrays[3].shape}'
    )
  if any(np.any(x < 0) or not np.all(np.isfinite(x)) for x in arrays):
    raise ValueError('two_level_bootstrap needs finite, non-negative bits and characters')
  _check_resampling(num_resamples, confidence)
  scored = ((arrays[1] > 0) | (arrays[3] > 0)).any(axis=0)  # a document no window reached in any seed: left out
  a_bits, a_chars, b_bits, b_chars = (x[:, scored] for x in arrays)
  n_seeds, n_documents = a_bits.shape
  if n_seeds < 2:
    raise ValueError(f'two_level_bootstrap needs at least 2 seeds, got {n_seeds} (with one, use document_bootstrap)')
  if n_documents < 2:
    raise ValueError(f'two_level_bootstrap needs at least 2 scored documents (characters > 0), got {n_documents}')
  if a_chars.sum() <= 0 or b_chars.sum() <= 0:
    raise ValueError('two_level_bootstrap needs scored characters on each side (a_chars and b_chars sum to > 0)')
  rng = np.random.default_rng(seed)
  documents = rng.integers(0, n_documents, size=(num_resamples, n_documents))[:, None, :]
  seeds = rng.integers(0, n_seeds, size=(num_resamples, n_seeds))[:, :, None]

  def pooled(bits, characters):  # total bits over total characters of each replicate's (seed, document) cells
    return bits[seeds, documents].sum((1, 2)) / characters[seeds, documents].sum((1, 2))

  with np.errstate(invalid='ignore', divide='ignore'):  # a draw of unscored documents only: left out
    replicates = pooled(a_bits, a_chars) - pooled(b_bits, b_chars)
  return {
      'n_seeds': n_seeds,
      'n_documents': n_documents,
      'mean': float(a_bits.sum() / a_chars.sum() - b_bits.sum() / b_chars.sum()),
      **_percentile_summary(replicates, confidence),
      'num_resamples': num_resamples,
      'seed': seed,
      'confidence': confidence,
      'method': 'seed x document bootstrap (seeds and documents resampled, crossed), percentile interval of the '
      'difference in total bits / total characters',
  }


def holm(p_values: Sequence[float | None], confidence: float = CONFIDENCE) -> dict:
  """Holm-Bonferroni over a family of comparisons (module docstring): adjusted p-values, in the input order.

  None entries (a comparison without an interval) are left out of the family (m counts the others) and stay
  None. Returns {'adjusted' (list), 'resolved' (adjusted < 1 - confidence), 'levels' (the confidence at which
  each comparison's own interval is read under Holm's step-down: 1 - alpha / (m - rank + 1), rank 1 the
  smallest p-value), 'm', 'alpha'}.
  """
  alpha = 1 - confidence
  present = [(float(p), k) for k, p in enumerate(p_values) if p is not None]
  for p, k in present:
    if not 0 <= p <= 1 or math.isnan(p):
      raise ValueError(f'holm needs p-values in [0, 1], got p_values[{k}]={p!r}')
  m = len(present)
  adjusted: list[float | None] = [None] * len(p_values)
  levels: list[float | None] = [None] * len(p_values)
  running = 0.0
  for rank, (p, k) in enumerate(sorted(present), start=1):
    running = max(running, min(1.0, (m - rank + 1) * p))
    adjusted[k] = running
    levels[k] = 1 - alpha / (m - rank + 1)
  return {
      'adjusted': adjusted,
      'resolved': [a is not None and a < alpha for a in adjusted],
      'levels': levels,
      'm': m,
      'alpha': alpha,
  }


def clean_run_bound(trials: float) -> float:
  """The 95% upper bound on an error rate that `trials` independent trials without an error give: the rule of
  three, 3 / trials (a flip-flop run with no glitch in N reads bounds its glitch rate below 3000 / N per
  thousand reads; 30,000 reads resolve 0.1 per thousand)."""
  if not isinstance(trials, (int, float)) or isinstance(trials, bool) or not trials > 0:
    raise ValueError(f'clean_run_bound: trials={trials!r} is invalid; allowed: a number > 0.')
  return 3.0 / float(trials)
