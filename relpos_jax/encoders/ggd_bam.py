"""GGD-BAM, the generalized-Gaussian positional prior of the Bayesian Attention Mechanism (Bianchessi, Aguirre,
Barros & Kupssinskü 2025, "Bayesian Attention Mechanism: A Probabilistic Framework for Positional Encoding and
Context Length Extrapolation", arXiv:2505.22842, ICLR 2026).

BAM reads an additive score q.k + g(j - i) as a likelihood times a prior over the key's position: the softmax of
the sum is p(content) p(position) / Z. ALiBi is the prior of a Laplace distribution (its log density is linear in
|j - i|); GGD-BAM makes it a generalized Gaussian, log p(d) = -|(d - mu) / alpha|^beta + const, with location
mu, scale alpha and shape beta learned per head. With d = j - i and a_h = -beta_h log alpha_h:

    b_h(d) = -e^{a_h} (|d - mu_h| + eps)^{beta_h},        mu_h = e^{l_h} - e^{-l_h} = 2 sinh(l_h)

Transcribed from the authors' reference code (github.com/ArthurSBianchessi/BAM, models/bam.py and
models/bam_ssmax.py, `AttentionPrior.forward`, read at commit 5a6579d); the paper's body text was not
available to this project beyond its abstract, so every detail below is the code's:

  - eps = 1e-5 inside the power, so d/dbeta (|z|^beta log|z|) is finite at z = 0; hence b_h(mu_h) is
    -e^{a_h} eps^{beta_h}, a hair below 0 (not exactly 0 as ALiBi's is).
  - a_h is stored as the log of the multiplier and initialised at log(ALiBi's slope of head h) (the code's
    `scale_init='slope'`), beta_h at 1 (`shape_init=1`) and l_h at 0 (`loc_init=0`): at initialisation the
    bias is ALiBi's (up to eps). Published defaults: a and beta learned, the location fixed at 0
    (`train_loc=False`).
  - The location is stored as l with mu = 2 sinh(l) (`loc.exp() - (-loc).exp()`), so steps in l move mu by
    amounts proportional to |mu|: small near 0, large far away.
  - beta is learned unconstrained, as in the code: a trained beta may leave (0, 2] (the prior stays finite for
    |z| + eps > 0 of any sign of beta; a very large beta overflows float32 at far distances, a limit of the
    reference parametrisation that the initial value `init_shape` <= 2 keeps away from at initialisation).
  - One formula for every d, both sides of the query: the code builds the full (L, L) matrix and the causal
    mask removes future keys, so under a causal mask the bias is that of the causal model; in a bidirectional
    model mu_h != 0 makes the prior asymmetric.

The "length-aware scaling" of GGD-BAM's long-context models is Scalable-Softmax (Nakanishi 2025): the logits of
query i, content plus prior, times s_h log(n_i), n_i the keys it sees (the code's `ssmax_prior=True`: the
factor multiplies after the prior is added, with s_h per layer and head initialised at 1). It is not a
function of j - i, so it is not part of this encoder: it is this package's temperature encoder `ssmax`, and
the paper's model is the sum `ggd_bam + ssmax(init_s=1.0)` (the temperature multiplies every score and bias
term, as the reference does). One difference stays: the code shares one prior across all layers
(`global_positional_encoding=True`); here each layer holds its own parameters, as every encoder here does.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.alibi import alibi_slopes
from relpos_jax.encoders.registry import register

# The reference code's `self.eps`, added to |d - mu| before the power.
EPS = 1e-5
# The largest initial shape accepted: the Gaussian. With ALiBi's slopes (<= 1/2) the prior stays finite in
# float32 at every supported distance (2^31: (2^31)^2 / 2 ~ 2e18) for shapes up to here.
MAX_INIT_SHAPE = 2.0


def location(loc_raw) -> jnp.ndarray:
  """mu = e^l - e^-l = 2 sinh(l), the reference code's location parametrisation."""
  return 2.0 * jnp.sinh(jnp.asarray(loc_raw, jnp.float32))


@register('ggd_bam')
@dataclasses.dataclass(frozen=True)
class GGDBAM(contract.ScalarBiasEncoder):
  init_shape: float = 1.0  # beta at initialisation (1: the Laplace prior, ALiBi's)
  init_loc: float = 0.0  # mu at initialisation, in positions
  learn_shape: bool = True
  learn_scale: bool = True
  learn_loc: bool = False

  def __post_init__(self):
    validation.number(self.name, 'init_shape', self.init_shape, above=0.0, at_most=MAX_INIT_SHAPE)
    validation.number(self.name, 'init_loc', self.init_loc)

  def init_params(self, rng, dims_):
    del rng
    shape = (dims_.num_heads,)
    params = {}
    if self.learn_scale:
      params['log_scale'] = jnp.asarray(np.log(alibi_slopes(dims_.num_heads)), jnp.float32)
    if self.learn_shape:
      params['shape'] = jnp.full(shape, self.init_shape, jnp.float32)
    if self.learn_loc:
      params['loc'] = jnp.full(shape, math.asinh(self.init_loc / 2.0), jnp.float32)
    return params

  def effective_params(self, params) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """(e^a, beta, mu), each (num_heads,): the learned values, or the initial ones where not learned."""
    num_heads = contract.dims(params).num_heads
    if self.learn_scale:
      multiplier = jnp.exp(params['log_scale'])
    else:
      multiplier = jnp.asarray(alibi_slopes(num_heads), jnp.float32)
    beta = params['shape'] if self.learn_shape else jnp.full((num_heads,), self.init_shape, jnp.float32)
    if self.learn_loc:
      mu = location(params['loc'])
    else:
      mu = jnp.full((num_heads,), self.init_loc, jnp.float32)
    return multiplier, beta, mu

  def bias(self, params, rel):
    multiplier, beta, mu = self.effective_params(params)
    z = jnp.abs(jnp.asarray(rel, jnp.float32)[..., None] - mu) + EPS
    return -multiplier * jnp.power(z, beta)
