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
the others. The reference is 2-D; axes = 3 extends each method the same way (the sums run over 3 axes).

Contextual mode (`mode='contextual'`, the paper's eq. 13-14; the reference's `lookup_table_weight` of shape
(H or 1, head_dim, num_buckets), zeros at initialisation, and `forward_rpe_transpose`): a vector r_b per bucket,
dotted with the content. On keys (`rpe_on='k'`, the reference's default and its best DeiT setting) the score gains
(s q_i) . r_{b(p_i - p_j)}; on queries (`rpe_on='q'`) it gains (s k_j) . r'_{b(p_j - p_i)} (the reference's
`rpe_q(k * scale).transpose(2, 3)`), s = 1 / sqrt(head_dim) (the reference's attention adds them to
(s q) . k). On values (`rpe_on='v'`, the reference's `rpe_v`: `forward_rpe_no_transpose` with a table of shape
(H or 1, num_buckets, head_dim)) the output gains sum_j a_ij r^V_{b(p_i - p_j)}, a_ij the attention weights after
the softmax (the reference's `out += self.rpe_v(attn)`). `rpe_on` names the places as the reference's
`get_rpe_config` does ('q', 'k', 'v' in it build rpe_q, rpe_k, rpe_v: 'qk', 'qkv', ...), each with its own
table. The contextual mode is of kind VECTOR_RELATIVE: its tables are rows of a relative table read at each pair's
bucket (`key_embeddings`, `query_embeddings`, `value_embeddings` of flat bucket ids, `table_rows`), which the
attention layer's Term for grid vectors (relpos_jax.nn.terms.grid.GridScores) gathers per tile of queries and
keys from their coordinates: the same row projection and weight aggregation as Shaw's a^K / a^V
(relpos_jax.nn.terms.vector), no (L, L) array on the blockwise path. `contextual_scores` builds the q and k terms
whole (the layer's `attention_weights`).
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid import positions as positions_lib
from relpos_jax.grid.registry import register

METHODS = ('euclidean', 'quant', 'cross', 'product')
MODES = ('bias', 'contextual')
# Where the contextual tables attach, named as the reference's get_rpe_config reads `rpe_on` ('q', 'k', 'v' in it).
RPE_ON = ('k', 'q', 'v', 'qk', 'kv', 'qv', 'qkv')


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
  rpe_on: str = 'k'

  def __post_init__(self):
    super().__post_init__()
    validation.choice(self.name, 'method', self.method, METHODS)
    validation.choice(self.name, 'mode', self.mode, MODES)
    validation.choice(self.name, 'rpe_on', self.rpe_on, RPE_ON)
    validation.require(
        self.mode == 'contextual' or self.rpe_on == 'k',
        self.name,
        'rpe_on',
        self.rpe_on,
        "'k' with mode='bias' (a bias has no content to sit on)",
    )
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

  @property
  def kind(self):
    return contract.Kind.SCALAR_BIAS if self.mode == 'bias' else contract.Kind.VECTOR_RELATIVE

  @property
  def needs_head_dim(self):
    return self.mode == 'contextual'

  @property
  def uses_head_vectors(self):
    return self.mode == 'contextual'

  def init_params(self, rng, dims_):
    del rng
    rows = 1 if self.shared_head else dims_.num_heads
    tables = self.axes if self.method == 'cross' else 1
    if self.mode == 'bias':
      return {'table': jnp.zeros((tables, rows, self.num_buckets + 1), jnp.float32)}  # + the class token's bucket
    # q and k: the reference's transposed table (H or 1, head_dim, num_buckets); v: (H or 1, num_buckets, head_dim).
    shapes = {
        'q': (tables, rows, dims_.head_dim, self.num_buckets + 1),
        'k': (tables, rows, dims_.head_dim, self.num_buckets + 1),
        'v': (tables, rows, self.num_buckets + 1, dims_.head_dim),
    }
    return {side: jnp.zeros(shapes[side], jnp.float32) for side in self.rpe_on}

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
    return jnp.broadcast_to(values, values.shape[:-1] + (contract.dims(params).num_heads,))

  def bias(self, params, delta):
    buckets = self.buckets(delta)
    total = sum(self._read(params, buckets[..., t], t) for t in range(buckets.shape[-1]))
    return self._heads(params, total)

  def pair_buckets(self, q_pos, k_pos, offset_buckets=None):
    """Int32 (..., Lq, Lk, tables): each pair's buckets from coordinates (..., Lq, axes), (..., Lk, axes); pairs
    with a class token read the extra bucket num_buckets. Given `offset_buckets` (this encoder's
    `offset_buckets(shape)` for a grid holding every coordinate), each pair reads its offset's entry there: one
    integer index and a gather instead of the index function per pair."""
    q = self.coordinates(q_pos, 'q_pos')[..., :, None, :]
    k = self.coordinates(k_pos, 'k_pos')[..., None, :, :]
    cls = positions_lib.is_class_token(q) | positions_lib.is_class_token(k)
    if offset_buckets is None:
      buckets = self.buckets(jnp.where(cls[..., None], 0, q - k))
    else:
      sides = offset_buckets.shape[:-1]  # 2n - 1 per axis
      index = 0
      for a, side in enumerate(sides):  # one axis at a time: no (..., Lq, Lk, axes) offsets
        index = index * side + (q[..., a] - k[..., a] + (side - 1) // 2)
      index = jnp.where(cls, 0, index).astype(jnp.int32)
      buckets = jnp.take(jnp.reshape(offset_buckets, (-1, offset_buckets.shape[-1])), index, axis=0)
    return jnp.where(cls[..., None], self.num_buckets, buckets)

  def offset_buckets(self, shape):
    """Int32 (2 n_0 - 1, ..., 2 n_{A-1} - 1, tables): the buckets of every offset p_i - p_j of two tokens of the
    grid `shape`, entry [d_0 + n_0 - 1, ...] for offset d. Pairs of a static grid read their buckets here
    (`relpos_jax.nn.terms.grid.GridScores`) instead of evaluating the index function on every pair."""
    shape = positions_lib.check_shape(self.name, shape)
    self.check_grid(shape)
    table = self.buckets(positions_lib.distinct_offsets(shape))  # (P, tables), raster order of the offsets
    return table.reshape(tuple(2 * n - 1 for n in shape) + table.shape[-1:])

  def contextual_scores(self, params, query, key, q_pos, k_pos, scale, inputs=None):
    """(B, H, Lq, Lk) float32: the contextual terms of query (B, Lq, H, D) and key (B, Lk, H, D) at coordinates
    (B, Lq, axes), (B, Lk, axes), as the reference adds them to the scaled scores. `inputs`, the layer input
    passed to every grid score term (PaPE reads it), is not read: iRPE's term is of q and k."""
    del inputs
    validation.require(self.mode == 'contextual', self.name, 'mode', self.mode, "'contextual' for contextual scores")
    total = 0.0
    for side in self.rpe_on.replace('v', ''):  # the value term acts on the outputs, not the scores
      x = (query if side == 'k' else key).astype(jnp.float32) * scale
      # On keys the bucket of p_i - p_j is read along the query's row; on queries that of p_j - p_i, transposed.
      buckets = self.pair_buckets(q_pos, k_pos) if side == 'k' else self.pair_buckets(k_pos, q_pos)
      for t in range(buckets.shape[-1]):
        table = params[side][t]  # (H or 1, D, num_buckets + 1)
        lookup = jnp.einsum('bihd,hdn->bhin', x, jnp.broadcast_to(table, (x.shape[2],) + table.shape[1:]))
        index = jnp.broadcast_to(buckets[..., t][:, None], lookup.shape[:3] + buckets.shape[-2:-1])
        term = jnp.take_along_axis(lookup, index, axis=-1)  # (B, H, rows, cols)
        total = total + (term if side == 'k' else jnp.swapaxes(term, -1, -2))
    return total

  # ---- the contextual tables as rows of a relative table (the vector-relative kind's Term reads them)

  @property
  def num_tables(self) -> int:
    """Tables per place: one per axis for 'cross' (iRPE_Cross's rows and columns), else one."""
    return self.axes if self.method == 'cross' else 1

  def table_rows(self, t: int):
    """Int32 (num_buckets + 1,): the flat bucket ids of table t, the rows its pairs read (`pair_buckets[..., t]`
    indexes them)."""
    return t * (self.num_buckets + 1) + jnp.arange(self.num_buckets + 1, dtype=jnp.int32)

  def _rows(self, params, side, rows):
    """(R, H, D) float32: the vectors of flat bucket ids rows (R,) of the table on `side`, or None without one."""
    if side not in self.rpe_on or self.mode != 'contextual':
      return None
    table = jnp.asarray(params[side], jnp.float32)
    if side != 'v':
      table = jnp.swapaxes(table, -1, -2)  # (tables, H or 1, num_buckets + 1, D)
    flat = jnp.moveaxis(table, 2, 1).reshape((-1,) + table.shape[1:2] + table.shape[3:])  # (tables * NB, H|1, D)
    picked = jnp.take(flat, jnp.asarray(rows, jnp.int32), axis=0)
    return jnp.broadcast_to(picked, picked.shape[:1] + (contract.dims(params).num_heads,) + picked.shape[2:])

  def key_embeddings(self, params, rows):
    """r^K of flat bucket ids rows: (R, H, D), dotted with the queries (rpe_k), or None without it."""
    return self._rows(params, 'k', rows)

  def query_embeddings(self, params, rows):
    """r^Q of flat bucket ids rows: (R, H, D), dotted with the keys (rpe_q), or None without it."""
    return self._rows(params, 'q', rows)

  def value_embeddings(self, params, rows):
    """r^V of flat bucket ids rows: (R, H, D), added to the outputs by the attention weights (rpe_v), or None."""
    return self._rows(params, 'v', rows)

  def query_biases(self, params):
    """No content biases (Transformer-XL's u, v): the vector-relative contract's (None, None)."""
    del params
    return None, None

  def class_bias(self, params):
    total = params['table'][:, :, self.num_buckets].sum(axis=0)  # (H or 1,)
    return self._heads(params, total[None])[0]
