"""KERPLE (Chi, Fan, Ramadge & Rudnicky 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
Extrapolation", NeurIPS 2022): biases from conditionally positive definite kernels of the distance.

With d = j - i and learnable per-head parameters r1_h, r2_h:

    kerple_power:  b_h(d) = -r1_h * |d|^r2_h            r1 > 0, 0 < r2 <= 2
    kerple_log:    b_h(d) = -r1_h * log(1 + r2_h * |d|)  r1 > 0, r2 > 0

Both are <= 0 and 0 at d = 0. kerple_power with r2 = 1 is ALiBi with learned slopes; kerple_log, which
decays logarithmically like T5's buckets, does best in the paper's language-modelling experiments.

The paper's models are causal; its code applies the kernel to tril(i - j), i.e. gives 0 to future keys.
We use |d| on both sides, the kernel's natural symmetric form (and the bidirectional extension); under a
causal mask the two agree on every key that is attended.

Constraints by parametrisation, not by clipping: the reference code clamps the parameters in place on every
forward pass (min 1e-2, and max 2 for the exponent), which pins a parameter at the bound for as long as its
gradient pushes past it. Here

    r1 = eps + softplus(theta_1)                         in (eps, inf)
    r2 = 2 - (2 - eps) * sigmoid(-theta_2)   (power)     in [eps, 2]
    r2 = eps + softplus(theta_2)             (log)       in (eps, inf)

with eps = 0.01, the reference's clamp floor, so the effective parameters keep the reference's range for any
raw theta (up to float32 rounding at the floor; r2 <= 2 holds exactly).

Initialisation as in the reference code (chijames/KERPLE, ParallelKerplePower / ParallelKerpleLog), uniform
per head: power r1 ~ U(0, 1), r2 ~ U(0, 2); log r1 ~ U(0, 2), r2 ~ U(0, 1), drawn here from U(eps, upper)
(the reference draws from U(0, upper) and clamps values below eps up to eps).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register

# The reference code's clamp floor for every kernel parameter.
EPS = 0.01
MAX_EXPONENT = 2.0


def positive(raw: jax.Array) -> jax.Array:
  """eps + softplus(raw): > eps for every finite raw, without clipping."""
  return EPS + jax.nn.softplus(raw)


def _softplus_inverse(y: jax.Array) -> jax.Array:
  return y + jnp.log(-jnp.expm1(-y))  # log(expm1(y)), without overflow for large y.


def positive_inverse(value) -> jax.Array:
  """The raw parameter giving `positive(raw) = value`, for value > eps."""
  return _softplus_inverse(jnp.asarray(value, jnp.float32) - EPS)


def exponent(raw: jax.Array) -> jax.Array:
  """2 - (2 - eps) * sigmoid(-raw): in (0, 2] for every raw ([eps, 2] up to rounding), never above 2."""
  return MAX_EXPONENT - (MAX_EXPONENT - EPS) * jax.nn.sigmoid(-raw)


def exponent_inverse(value) -> jax.Array:
  """The raw parameter giving `exponent(raw) = value`, for eps < value < 2."""
  u = (MAX_EXPONENT - jnp.asarray(value, jnp.float32)) / (MAX_EXPONENT - EPS)  # sigmoid(-raw)
  return jnp.log1p(-u) - jnp.log(u)


def _unit_uniform(rng, shape) -> jax.Array:
  """U(0, 1) without the endpoint 0, where the raw parameters below would be -inf."""
  return jax.random.uniform(rng, shape, jnp.float32, minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)


def positive_raw_uniform(rng, shape, upper: float) -> jax.Array:
  """Raw parameters whose `positive` values are U(eps, upper).

  Built from the unit draw directly: eps + (upper - eps) * u rounds back to eps in float32 for tiny u,
  and inverting that would give -inf.
  """
  return _softplus_inverse((upper - EPS) * _unit_uniform(rng, shape))


def exponent_raw_uniform(rng, shape) -> jax.Array:
  """Raw parameters whose `exponent` values are U(eps, 2): exponent(logit(u)) = eps + (2 - eps) * u."""
  u = _unit_uniform(rng, shape)
  return jnp.log(u) - jnp.log1p(-u)


def _abs_distance(rel) -> jax.Array:
  return jnp.abs(jnp.asarray(rel, jnp.float32))[..., None]


@dataclasses.dataclass(frozen=True)
class _Kerple(contract.ScalarBiasEncoder):
  """Shared by the two kernels: two per-head raw parameters and their constrained values."""

  # The reference's initial r1 ~ U(0, r1_init_upper).
  r1_init_upper: ClassVar[float]
  # Values of r2 that `params_for` can reach (the exponent's bound 2 itself is only a limit of its raw).
  r2_upper_open: ClassVar[float]

  def _r2(self, raw):
    raise NotImplementedError

  def _r2_inverse(self, value):
    raise NotImplementedError

  def _r2_raw_init(self, rng, shape):
    raise NotImplementedError

  def init_params(self, rng, dims_):
    rng1, rng2 = jax.random.split(rng)
    shape = (dims_.num_heads,)
    return {'r1_raw': positive_raw_uniform(rng1, shape, self.r1_init_upper), 'r2_raw': self._r2_raw_init(rng2, shape)}

  def effective_params(self, params) -> tuple[jax.Array, jax.Array]:
    """(r1, r2), each (num_heads,), the constrained kernel parameters."""
    return positive(params['r1_raw']), self._r2(params['r2_raw'])

  def params_for(self, params, r1, r2) -> dict:
    """`params` with the raw parameters set so that the effective ones are (r1, r2), each a number or
    (num_heads,) values (to probe a kernel by hand, or to start from chosen values). Host-side: the values
    must be concrete and inside the parametrisation's range, else ValueError."""
    num_heads = contract.dims(params).num_heads
    r1 = np.broadcast_to(np.asarray(r1, np.float64), (num_heads,))
    r2 = np.broadcast_to(np.asarray(r2, np.float64), (num_heads,))
    validation.require(
        bool(np.all(r1 > EPS) and np.all(np.isfinite(r1))),
        self.name,
        'r1',
        r1.tolist(),
        f'finite values > {EPS} (the reference clamp floor)',
    )
    validation.require(
        bool(np.all(r2 > EPS) and np.all(r2 < self.r2_upper_open)),
        self.name,
        'r2',
        r2.tolist(),
        f'values in ({EPS}, {self.r2_upper_open})',
    )
    return {**params, 'r1_raw': positive_inverse(r1), 'r2_raw': self._r2_inverse(r2)}


@register('kerple_power')
@dataclasses.dataclass(frozen=True)
class KerplePower(_Kerple):
  r1_init_upper = 1.0
  r2_upper_open = MAX_EXPONENT

  def _r2(self, raw):
    return exponent(raw)

  def _r2_inverse(self, value):
    return exponent_inverse(value)

  def _r2_raw_init(self, rng, shape):
    return exponent_raw_uniform(rng, shape)  # r2 ~ U(eps, 2), the reference's U(0, 2).

  def bias(self, params, rel):
    r1, r2 = self.effective_params(params)
    # r2 >= eps > 0, so 0^r2 = 0 (and JAX's d/dr2 of 0^r2 is 0, not 0 * log 0).
    return -r1 * jnp.power(_abs_distance(rel), r2)


@register('kerple_log')
@dataclasses.dataclass(frozen=True)
class KerpleLog(_Kerple):
  r1_init_upper = 2.0
  r2_upper_open = float('inf')

  def _r2(self, raw):
    return positive(raw)

  def _r2_inverse(self, value):
    return positive_inverse(value)

  def _r2_raw_init(self, rng, shape):
    return positive_raw_uniform(rng, shape, 1.0)  # r2 ~ U(eps, 1), the reference's U(0, 1).

  def bias(self, params, rel):
    r1, r2 = self.effective_params(params)
    return -r1 * jnp.log1p(r2 * _abs_distance(rel))
