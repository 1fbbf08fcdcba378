"""FIRE, functional interpolation for relative positions (Li, You, Guruganesh, Ainslie, Ontanon, Zaheer,
Sanghai, Yang, Kumar & Bhojanapalli 2024, "Functional Interpolation for Relative Positions Improves Long
Context Transformers", ICLR 2024).

For query position i and key position j (the paper's causal setting has i >= j):

    b(i, j) = f_theta( psi(i - j) / psi(max(i, L)) ),    psi(x) = log(c x + 1)

f_theta is an MLP from one scalar to one bias per head; c (a log-transform scale) and L (a threshold) are
learned. Dividing by psi(i) is the "progressive interpolation": every query sees its distances mapped into
[0, 1], so a longer sequence reuses the input range the MLP was trained on instead of leaving it. The
threshold L keeps short contexts (i < L) from being stretched: below L the normaliser is fixed at psi(L).

This follows the PyTorch implementation printed in the paper's appendix:
  * f_theta: Linear(1, mlp_width) -> ReLU -> Linear(mlp_width, num_heads), mlp_width = 32, PyTorch's
    default initialisation (`mlp.init_mlp(torch_default=True)`);
  * c: a parameter initialised at 0.1, used as |c|;
  * L = |L_multiplier| * init_L with init_L = 512 fixed and the learned multiplier initialised at 1 (so L's
    gradient step has the scale of an O(1) parameter);
  * psi(x) computed as log(|c x| + 1), and eps = 1e-6 added to the normaliser.
f_theta of one scalar is piecewise linear, and `mlp.apply_scalar_mlp` evaluates it as its pieces (2-D FIRE
does, 0.8x its units' time); this encoder keeps the units: in the blockwise fwd+bwd at L = 2,048 the pieces ran
1.2x slower in three runs, and no faster at 4,096 (docs/benchmarks.md, 4p).

The threshold relative to the training length. The reference code's init_L = 512 is an absolute number
of positions set for the paper's language models, which train at 2048 tokens and are tested up to 8192
(the paper's introduction and experiments; ar5iv.org/html/2310.04418, its appendix code): L starts at a
quarter of the training length, so queries before it share one normaliser and the queries beyond it, most
of a training sequence, exercise the progressive interpolation that training must shape. Kept at 512 while
training at 64, L exceeds every training position: the normaliser psi(max(i, L)) = psi(L) never moves in
training, and interpolation starts only past 512 at evaluation. A run at another training length keeps the
paper's ratio with `init_threshold = train_length / 4` (the LM studies, configs/studies/study*.py: 16 at 64, with
today's 512 as an ablation row, `fire-512`); the default stays the paper's 512 for its own setting.

Positions. FIRE depends on the query position itself, not only on j - i, so it is not Toeplitz
(`is_toeplitz = False`): `bias(params, rel)` raises and `pair_bias(params, q_pos, k_pos)` is the entry
point. Positions are assumed >= 0 (relpos_jax positions are 0-based, randomized ones included); a negative
query position is normalised like position 0, i.e. by psi(L). At i = 0 the normaliser is psi(L) + eps > 0,
so the bias is finite, and stays finite for any c, L (eps keeps the denominator positive).

Bidirectional extension: the paper is causal (i >= j). Here the distance is |i - j|, which is what the
reference code computes (log(|c (i - j)| + 1)), so keys after the query are treated like keys as far before
it. Their ratio can exceed 1 (a key far ahead of an early query), where the MLP extrapolates.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.mlp import apply_mlp, init_mlp
from relpos_jax.encoders.registry import register


def check_fields(encoder) -> None:
  """FIRE's hyperparameters (shared by the 2-D FIRE, relpos_jax.grid.encoders.fire): a table width and positive
  finite c, L and eps."""
  validation.positive_int(encoder.name, 'mlp_width', encoder.mlp_width, maximum=validation.MAX_TABLE_ROWS)
  for field in ('init_c', 'init_threshold', 'eps'):
    value = getattr(encoder, field)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    validation.require(ok, encoder.name, field, value, 'a finite number > 0')


def init_fire_params(encoder, rng, num_heads: int) -> dict:
  """f_theta = Linear(1, width) -> ReLU -> Linear(width, H) (PyTorch's default init), c, L's multiplier."""
  return {
      'mlp': init_mlp(rng, (1, encoder.mlp_width, num_heads), torch_default=True),
      'c': jnp.asarray(encoder.init_c, jnp.float32),
      'threshold_multiplier': jnp.asarray(1.0, jnp.float32),
  }


def normalize(encoder, params, distance: jax.Array, query_place: jax.Array) -> jax.Array:
  """psi(distance) / (psi(max(query_place, L)) + eps), psi(x) = log(|c| x + 1): the MLP's input."""
  c = jnp.abs(params['c'])
  psi = lambda x: jnp.log1p(c * x)  # x >= 0 here
  threshold = jnp.abs(params['threshold_multiplier']) * encoder.init_threshold
  return psi(distance) / (psi(jnp.maximum(query_place, threshold)) + encoder.eps)


@register('fire')
@dataclasses.dataclass(frozen=True)
class FIRE(contract.ScalarBiasEncoder):
  is_toeplitz = False

  mlp_width: int = 32
  init_c: float = 0.1
  init_threshold: float = 512.0
  eps: float = 1e-6

  def __post_init__(self):
    check_fields(self)

  def init_params(self, rng, dims_):
    return init_fire_params(self, rng, dims_.num_heads)

  def scale(self, params) -> jax.Array:
    """c, the log transform's scale (kept positive through |.|, as in the reference)."""
    return jnp.abs(params['c'])

  def threshold(self, params) -> jax.Array:
    """L, below which query positions share the normaliser psi(L)."""
    return jnp.abs(params['threshold_multiplier']) * self.init_threshold

  def normalized_distance(self, params, q_pos, k_pos) -> jax.Array:
    """psi(|i - j|) / (psi(max(i, L)) + eps), broadcast over q_pos and k_pos; the MLP's input."""
    q = jnp.asarray(q_pos, jnp.int32)
    # The distance in integers, then float: exact at any position, where q - k in float32 would round
    # beyond 2^24.
    distance = jnp.abs(q - jnp.asarray(k_pos, jnp.int32)).astype(jnp.float32)
    return normalize(self, params, distance, q.astype(jnp.float32))

  def pair_bias(self, params, q_pos, k_pos):
    return apply_mlp(params['mlp'], self.normalized_distance(params, q_pos, k_pos)[..., None])

  def bias(self, params, rel):
    raise ValueError(
        'fire: the FIRE bias depends on the query position i as well as on j - i (it is normalised by '
        'psi(max(i, L))), so it cannot be evaluated from relative positions alone. Use '
        'encoder.pair_bias(params, q_pos, k_pos), relpos_jax.bias_matrix or relpos_jax.bias_at_positions.'
    )
