"""A lecture table made to extrapolate: monotone, interpolated in log-distance, with a continuing tail.

`monotone(t5(bidirectional=False, num_buckets=16, max_distance=32))` keeps the lecture's idea (section 5a:
exact near, logarithmically coarser far; or Shaw's clipped table, the piecewise map, the multi-scale
tables) and changes the three things that make those tables degrade beyond the training length:

  1. *Untrained far entries.* A table whose far buckets are never reached in training keeps their ~0
     initialisation, above the trained far buckets (which learn ~ -2): untrained far keys are favoured.
  2. *Saturation.* With every bucket trained the farthest bucket is a constant, so as the window grows the
     ever more numerous far keys take a growing share of attention, where ALiBi's and KERPLE's biases keep
     falling.
  3. *Zero initialisation.* The table starts as "no position bias" and has to learn the decay.

The base encoder only contributes its bucket layout: the knots n_0 = 0 < n_1 < ... < n_{K-1}, the first
distance n = |j - i| of each of its buckets on one side (its last knot is where the base saturates). With
u(n) = log(1 + n), per head h and per side (keys behind, rel = j - i <= 0; keys ahead, rel > 0, only for
a bidirectional base):

    knot values   v_k = a_k                                           k < w   (free: the near window)
                  v_k = v_{w-1} - sum_{m=w}^{k} softplus(delta_m)     k >= w  (non-increasing)
    bias          b(n) = v_k + (u(n) - u(n_k)) / (u(n_{k+1}) - u(n_k)) * (v_{k+1} - v_k)
                  with k = min(the segment holding n, K - 2)

i.e. the piecewise-linear interpolation of the knot values in log(1 + n), continued beyond the last knot
n_{K-1} with the slope of the last segment (-> a KERPLE-log-like tail, b ~ -s log n, s >= 0) instead of
saturating. At integer knots (the exact buckets) b is the table value. For n >= n_{w-1} the bias is
non-increasing in n, tail included (w = `window` free knots; w = 1: monotone from distance 0). Every
parameter is trained as long as the base's last knot lies within the training length.

Initialisation (`init_slope` = r): a decay, not zero, with per-head rates r_h = r * 8^(-h / (H - 1)) (a
factor 8 from the first head to the last, like ALiBi's spread of slopes). `init_decay='log'` (default):
v_k = -r_h log(1 + n_k), KERPLE-log's -r_h log(1 + |d|) (Chi et al. 2022) sampled at the knots;
`init_decay='linear'`: v_k = -r_h n_k, the lecture's distance bias -r_h |j - i| (ALiBi's form, Press et al. 2022)
sampled at the knots, a much stronger locality prior (the tail then continues the last segment's log slope).

Bases: `shaw`, `piecewise`, `t5` (any `max_distance`) and `multiscale` (whose knots are the distances where
any of its scales changes bucket). Keys ahead of a causal base (`bidirectional=False`) share the value of
distance 0, as in the base. The design, and every variant measured, is in docs/lecture_variants.md.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.multiscale import MultiScale
from relpos_jax.encoders.registry import register

# Relative positions are clipped to this magnitude before the int32 arithmetic (far beyond any length).
_MAX_REL = 2**30


def _signature(base, rel: np.ndarray) -> np.ndarray:
  """The base's bucket(s) of each relative position, one row per position (several for multiscale)."""
  if isinstance(base, MultiScale):
    return np.asarray(base.buckets(rel)).T
  return np.asarray(base.bucket(rel))[:, None]


def _saturation_distance(base) -> int:
  if isinstance(base, MultiScale):
    return max(base.scales) * base.buckets_per_side
  return int(base.max_distance)


@functools.lru_cache(maxsize=256)
def knot_distances(base, side: int) -> np.ndarray:
  """n_0 = 0 < n_1 < ...: the first distance of each bucket of `base` behind the query (side -1, rel = -n)
  or ahead of it (side +1, rel = +n, where distance 0 still counts as its first knot)."""
  n = np.arange(0, _saturation_distance(base) + 2)
  sig = _signature(base, side * n)
  changes = np.any(sig[1:] != sig[:-1], axis=1)
  knots = np.concatenate([[0], n[1:][changes]]).astype(np.int64)
  knots.flags.writeable = False  # Cached: shared by every call.
  return knots


@register('monotone')
@dataclasses.dataclass(frozen=True)
class Monotone(contract.ScalarBiasEncoder):
  """b_h(j - i): the base's buckets as knots of a monotone, log-interpolated bias (module docstring)."""

  base: contract.Encoder
  window: int = 1
  init_slope: float = 1.0
  init_decay: str = 'log'

  def __post_init__(self):
    allowed = (
        'a shaw, piecewise, t5 or multiscale encoder (a lecture table whose buckets give the knots), '
        'e.g. make("t5", bidirectional=False)'
    )
    validation.require(isinstance(self.base, contract.Encoder), self.name, 'base', self.base, allowed)
    validation.require(
        getattr(self.base, 'name', None) in ('shaw', 'piecewise', 't5', 'multiscale'),
        self.name,
        'base',
        self.base,
        allowed,
    )
    validation.positive_int(self.name, 'window', self.window)
    knots = self.num_knots
    validation.require(
        self.window <= knots - 1,
        self.name,
        'window',
        self.window,
        f'<= {knots - 1}: the base has {knots} knots and at least the last segment must be '
        'monotone (it sets the tail)',
    )
    validation.number(self.name, 'init_slope', self.init_slope, above=0)
    validation.choice(self.name, 'init_decay', self.init_decay, ('log', 'linear'))

  @property
  def bidirectional(self) -> bool:
    return bool(getattr(self.base, 'bidirectional', True))

  @property
  def sides(self) -> tuple[int, ...]:
    """-1: keys behind (rel <= 0); +1: keys ahead (rel > 0), only for a bidirectional base."""
    return (-1, 1) if self.bidirectional else (-1,)

  def knots(self) -> np.ndarray:
    """(num_sides, K) int: the knot distances of each side (equal counts for every supported base)."""
    per_side = [knot_distances(self.base, side) for side in self.sides]
    if len({len(k) for k in per_side}) != 1:
      raise ValueError(
          f'{self.name}: base {self.base!r} has {[len(k) for k in per_side]} knots on its two '
          'sides; allowed: a base with as many buckets behind as ahead.'
      )
    return np.stack(per_side)

  @property
  def num_knots(self) -> int:
    return int(self.knots().shape[1])

  def head_rates(self, num_heads: int) -> np.ndarray:
    """r_h = init_slope * 8^(-h / (H - 1)): the initial decay rates, a factor 8 apart across heads."""
    spread = np.arange(num_heads) / max(num_heads - 1, 1)
    return float(self.init_slope) * 8.0 ** (-spread)

  def init_params(self, rng, dims_):
    del rng  # Deterministic: the bias starts as -r_h log(1 + n) (or -r_h n) at the knots.
    knots = self.knots().astype(np.float64)
    u = np.log1p(knots) if self.init_decay == 'log' else knots  # (S, K)
    values = -u[:, :, None] * self.head_rates(dims_.num_heads)[None, None, :]  # (S, K, H)
    decrements = values[:, self.window - 1 : -1] - values[:, self.window :]  # > 0: knots strictly grow
    return {
        'near': jnp.asarray(values[:, : self.window], jnp.float32),
        # softplus^-1(d) = log(expm1(d)) = d + log(1 - exp(-d)): the second form stays finite for large d
        # (init_slope=1e30 made expm1 overflow, so the parameters were inf from the start).
        'decrements_raw': jnp.asarray(decrements + np.log(-np.expm1(-decrements)), jnp.float32),
    }

  def knot_values(self, params) -> jax.Array:
    """(num_sides, K, num_heads): v_k of the module docstring."""
    near = params['near']
    steps = jnp.cumsum(jax.nn.softplus(params['decrements_raw']), axis=1)
    return jnp.concatenate([near, near[:, -1:] - steps], axis=1)

  def _side_bias(self, values, knots, n):
    """values (K, H), knots (K,) int, n int distances >= 0 -> n.shape + (H,)."""
    u_knots = jnp.log1p(jnp.asarray(knots, jnp.float32))
    segment = jnp.clip(jnp.searchsorted(jnp.asarray(knots, jnp.int32), n, side='right') - 1, 0, len(knots) - 2)
    u0, u1 = u_knots[segment], u_knots[segment + 1]
    t = ((jnp.log1p(n.astype(jnp.float32)) - u0) / (u1 - u0))[..., None]
    v0, v1 = jnp.take(values, segment, axis=0), jnp.take(values, segment + 1, axis=0)
    return v0 + t * (v1 - v0)

  def bias(self, params, rel):
    rel = jnp.clip(jnp.asarray(rel, jnp.int32), -_MAX_REL, _MAX_REL)
    values, knots = self.knot_values(params), self.knots()
    behind = self._side_bias(values[0], knots[0], jnp.maximum(-rel, 0))
    if not self.bidirectional:
      return behind
    ahead = self._side_bias(values[1], knots[1], jnp.maximum(rel, 0))
    return jnp.where((rel > 0)[..., None], ahead, behind)
