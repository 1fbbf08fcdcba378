"""iRPE, image relative position encoding (Wu, Peng, Chen, Fu & Chao 2021, "Rethinking and Improving Relative
Position Encoding for Vision Transformer", ICCV 2021; reference code microsoft/Cream, iRPE/DeiT-with-iRPE/irpe.py).

The offset delta = p_i - p_j (the reference's `diff = pos1 - pos2`, pos = (row, col)) is mapped to a bucket by
the piecewise index function (the paper's eq. 18, `piecewise_index`): exact near, logarithmic far, clipped:

    g(x) = round(x)                                                              |x| <= alpha
    g(x) = sign(x) * min(beta, round(alpha + ln(|x| / alpha) / ln(gamma / alpha) * (beta - alpha)))   otherwise

with alpha = ratio, beta = 2 ratio, gamma = 8 ratio (`get_single_rpe_config`, ratio = 1.9 by default): the
lecture's range extension in 2-D. Methods (the reference's `_rp_2d_*`), with B = int(beta):

    euclidean   bucket = g(round(sqrt(sum_a delta_a^2))) + B                  2B + 1 buckets
    quant       bucket = g(sum_a delta_a^2) + B                               2B + 1 buckets
    cross       one table per axis read at g(delta_a) + B, the encodings summed (iRPE_Cross: rows + cols)
    product     bucket = sum_a (g(delta_a) + B) (2B + 1)^(axes - 1 - a)       (2B + 1)^axes buckets

Bias mode (`mode='bias'`, the reference's `lookup_table_bias` of shape (H or 1, num_buckets), zeros at
initialisation; `shared_head` shares one row across heads, the reference's default): b_h(delta) = table[h,
bucket]. A class token (the reference's `skip` token) reads its own extra bucket, `num_buckets`, learned like
the others. The reference is 2-D; axes = 3 extends each method the same way (the sums run over 3 axes). The
contextual mode (on queries, keys or values) is not built here.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.registry import register

METHODS = ('euclidean', 'quant', 'cross', 'product')
MODES = ('bias',)


def piecewise_index(x, alpha: float, beta: float, gamma: float):
  """The reference's `piecewise_index` of int or float x (any shape) -> int32 in [-int(beta), int(beta)]."""
  x = jnp.asarray(x, jnp.float32)
  ax = jnp.abs(x)
  far = jnp.log(jnp.maximum(ax, alpha) / alpha) / math.log(gamma / alpha) * (beta - alpha)
  far = jnp.sign(x) * jnp.minimum(jnp.round(alpha + far), beta)
  return jnp.where(ax <= alpha, jnp.round(x), far).astype(jnp.int32)


@register('irpe')
@dataclasses.dataclass(frozen=True)
class IRPE(GridBiasEncoder):
  method: str = 'product'
  mode: str = 'bias'
  ratio: float = 1.9
  shared_head: bool = True

  def __post_init__(self):
    super().__post_init__()
    validation.choice(self.name, 'method', self.method, METHODS)
    validation.choice(self.name, 'mode', self.mode, MODES)
    validation.number(self.name, 'ratio', self.ratio, at_least=0.5, at_most=64)

  @property
  def alpha(self):
    return 1.0 * self.ratio

  @property
  def beta(self):
    return 2.0 * self.ratio

  @property
  def gamma(self):
    return 8.0 * self.ratio

  @property
  def num_buckets(self) -> int:
    """Buckets of one table, without the class token's (the reference's `get_num_buckets`)."""
    side = 2 * int(self.beta) + 1
    return side**self.axes if self.method == 'product' else side

  def init_params(self, rng, dims_):
    del rng
    rows = 1 if self.shared_head else dims_.num_heads
    tables = self.axes if self.method == 'cross' else 1
    return {'table': jnp.zeros((tables, rows, self.num_buckets + 1), jnp.float32)}  # + the class token's bucket

  def buckets(self, delta):
    """Int32 (..., tables): the bucket each table reads for offsets delta (..., axes)."""
    d = jnp.asarray(delta)
    b = int(self.beta)
    g = lambda x: piecewise_index(x, self.alpha, self.beta, self.gamma)
    squares = jnp.sum(jnp.asarray(d, jnp.float32) ** 2, axis=-1)
    if self.method == 'euclidean':
      return (g(jnp.round(jnp.sqrt(squares))) + b)[..., None]
    if self.method == 'quant':
      return (g(squares) + b)[..., None]
    per_axis = [g(d[..., a]) + b for a in range(self.axes)]
    if self.method == 'cross':
      return jnp.stack(per_axis, axis=-1)
    pid = per_axis[0]
    for a in range(1, self.axes):
      pid = pid * (2 * b + 1) + per_axis[a]
    return pid[..., None]

  def _read(self, params, bucket, t):
    table = params['table'][t]  # (H or 1, num_buckets + 1)
    return jnp.take(table.T, bucket, axis=0)  # (..., H or 1)

  def _heads(self, params, values):
    from relpos_jax.encoders import contract

    return jnp.broadcast_to(values, values.shape[:-1] + (contract.dims(params).num_heads,))

  def bias(self, params, delta):
    buckets = self.buckets(delta)
    total = sum(self._read(params, buckets[..., t], t) for t in range(buckets.shape[-1]))
    return self._heads(params, total)

  def class_bias(self, params):
    total = params['table'][:, :, self.num_buckets].sum(axis=0)  # (H or 1,)
    return self._heads(params, total[None])[0]
