"""PaTH attention, position encoding via accumulating Householder transformations (Yang, Shen, Wen, Tan,
Mishra, Ren, Panda & Kim 2025, "PaTH Attention: Position Encoding via Accumulating Householder
Transformations").

Every token s carries a data-dependent Householder-like matrix H_s = I - beta_s w_s w_s^T, and the content
logit of query i and key j <= i is

    a_ij = q_i^T (H_i H_{i-1} ... H_{j+1}) k_j           (a_ii = q_i . k_i),

a product along the path between them: RoPE's fixed rotation per step becomes a learned reflection-like map
per token. w_s = l2norm(silu(short_conv(W_up W_down x_s))), a low-rank projection (rank 32) followed by a
causal depthwise convolution of width 3 along the tokens; beta_s = 2 sigmoid(w_beta . x_s + b_beta) in
(0, 2), so H_s may have the negative eigenvalue 1 - beta_s.

Reference: fla-org/flash-linear-attention, `fla/layers/path_attn.py` (`PaTHAttention`: `use_low_rank_w=True`
(Linear(hidden, 32) -> Linear(32, kv_dim), no bias), `use_w_shortconv=True` (`ShortConvolution(kernel_size=3,
bias=False, activation='silu')`), `l2_norm(w)`, `beta = bt_proj(x).sigmoid() * 2` with bias, decoding by the
rank-one update `k <- k - beta (k . w) w` of every cached key) and `fla/ops/path_attn/naive.py` (the chunked
reference, logits scaled by `scale` and softmax). The optional forget gate of the reference (PaTH-FoX) is
`path + fox` here. Initialisation: linear layers normal(0.02) (fla's initializer_range), the convolution
PyTorch's Conv1d default U(-1/sqrt(3), 1/sqrt(3)), beta's bias 0.

Algorithm and memory: never (L, L, d, d) nor (L, L, d). Calls with several queries (training, a prompt, a
chunk of a prompt at a cache offset) take the chunked form of the paper (the UT transform of a chunk's factors) and
of fla's `naive_path_attn`: per chunk of C = `block_size` keys, the compact WY form of its C Householder factors
(one C x C triangular solve) gives its whole product P (d x d), its keys carried to the chunk's end
kh_j = H_{e-1} ... H_{j+1} k_j, its queries carried to the chunk's start, and its diagonal block of logits, all
chunks at once; then one scan over the key chunks, last to first, carries each query's vector through one P per
step and emits a column block of C keys (`_householder_logits_chunked`). Time O(L^2 d (1 + d / C)), L / C
sequential steps; training stores the carry once per chunk, O(L^2 d / C + L^2) floats, at the scale of the
attention matrix. A decoding step (one query) scans the keys one at a time instead (`_householder_logits_scan`:
O(L d) work, L sequential steps, no d x d products to build); that scan serves any q_index and is the chunked
form's test reference.

Tiled form (`implementation='blockwise'`, O(L) memory): `nn/terms/content.py`'s `ReplacedContent` with
`carries` (the explicit path keeps the chunked form above, built whole on its one tile). Before the tile loops,
each key tile of C = bk keys gets its w, T, kh and P once (`householder_key_tiles`), shared by every query
tile. The blockwise kernel visits a query tile's key tiles nearest first (the online softmax does not care
about the order) and threads per query row the carry x of the chunked scan: on a key tile holding the row's
own token, its diagonal logits and x <- v_i (its query carried to the tile's start); on an earlier tile,
a_ij = x_i . kh_j and x <- P x; on a later one (masked), nothing (`householder_tile_logits`; rows anywhere in
a tile, so query and key tiles of any sizes and a cache offset tile too). Gradients: the kernel's custom VJP
(FlashAttention-2's recomputing backward, `nn/blockwise.py`) visits key tiles farthest first and runs the
carry's adjoint with them: for one query tile at a time it first recomputes the carries entering each of its
key tiles (a nearest-first sweep of the carry steps alone: num_k_tiles x bq rows, freed after the query tile),
then each tile's `jax.vjp` takes the cotangent of the carry leaving it and returns that of the carry entering
it. No (L, L) array, forward or backward; the per-key-tile data (T: L x C floats per head) dominates.
Measured (XLA CPU, `benchmarks.measure.compiled_memory` of jax.grad of a causal layer, model_dim 64, 2 heads
of 32, batch 1; temp bytes of the compiled fwd+bwd): L = 4,096: explicit 539 MiB, blockwise 90 MiB (default
CPU tiles 256); L = 8,192: explicit 2,077 MiB, blockwise 174 MiB (tiles 256) or 79 MiB (tiles 64); FoX alone
blockwise at 8,192: 23 MiB. Beside stick-breaking the normalizer's fold (nearest first already) threads the
same carry. Not tiled: PaTH beside a score transform reading neighbouring keys (DAPE version 2), refused by
name (`terms/select.py`); document masks (segment ids) on every path (`functional.attend`).

Causal only (`requires_causal`): the product runs along the causal path. Padded tokens are transparent
(beta = 0, H = I; their convolution input is zero, the convolution's own padding).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register

INIT_STDDEV = 0.02


def short_conv(x: jax.Array, kernel: jax.Array) -> jax.Array:
  """Causal depthwise convolution along axis 1: x (B, L, C), kernel (k, C); out_t = sum_m kernel[m] x_{t-k+1+m}."""
  size = kernel.shape[0]
  padded = jnp.pad(x, [(0, 0), (size - 1, 0), (0, 0)])
  length = x.shape[1]
  return sum(padded[:, m : m + length] * kernel[m] for m in range(size))


def householder_logits(
    query: jax.Array,
    key: jax.Array,
    w: jax.Array,
    beta: jax.Array,
    q_index: jax.Array,
    block_size: int = 64,
    method: str | None = None,
) -> jax.Array:
  """a_ij = q_i^T H_{q_index[i]} ... H_{j+1} k_j for j <= q_index[i] (0 above), H_s = I - beta_s w_s w_s^T.

  query (B, Lq, H, D), key and w (B, Lk, H, D), beta (B, Lk, H), q_index (Lq,) -> (B, H, Lq, Lk) float32.
  method 'chunked' (`_householder_logits_chunked`, chunks of `block_size` keys) needs the queries contiguous
  among the keys, q_index = q_index[0] + arange(Lq) inside [0, Lk) (otherwise a ValueError naming q_index when
  it is concrete, NaN logits when it is traced, never wrong ones);
  'scan' (`_householder_logits_scan`) takes any q_index. None: 'scan' for one query (a decoding step: Lk cheap
  steps, no chunk products to build), else 'chunked'.
  """
  if method is None:
    method = 'scan' if query.shape[1] == 1 else 'chunked'
  if method == 'chunked':
    if not isinstance(q_index, jax.core.Tracer):
      _check_contiguous(np.asarray(q_index), query.shape[1], key.shape[1])
    return _householder_logits_chunked(query, key, w, beta, q_index, block_size)
  if method == 'scan':
    return _householder_logits_scan(query, key, w, beta, q_index, block_size)
  raise ValueError(f"householder_logits: method must be 'chunked', 'scan' or None, got {method!r}.")


def _check_contiguous(q_index: np.ndarray, q_len: int, k_len: int) -> None:
  """A concrete q_index outside the chunked form's contract is a ValueError (a traced one gives NaN logits)."""
  offset = int(q_index[0]) if q_index.size else 0
  expected = offset + np.arange(q_len)
  if q_index.shape != (q_len,) or not np.array_equal(q_index, expected) or offset < 0 or offset + q_len > k_len:
    raise ValueError(
        f"householder_logits(method='chunked'): q_index={q_index.tolist()} is not contiguous inside the "
        f'{k_len} keys; allowed: q_index = offset + arange({q_len}) with 0 <= offset <= {k_len - q_len} '
        f"(so offset 0 when Lq == Lk), or method='scan', which takes any q_index."
    )


def _chunk_transform(w: jax.Array, beta: jax.Array) -> jax.Array:
  """T (..., C, C), upper triangular, with H_0 H_1 ... H_{C-1} = I - W^T T W for a chunk's w (..., C, D), beta.

  The compact WY form (LAPACK's larft; the paper's UT transform): T = (I + striu(diag(beta) W W^T))^{-1}
  diag(beta). A principal block of consecutive rows and columns of T is the T of those factors alone, which is
  what the chunked logits read. beta = 0 (padding) gives a zero column: H = I.
  """
  c = w.shape[-2]
  upper = jnp.eye(c, dtype=w.dtype) + jnp.triu(beta[..., :, None] * (w @ jnp.swapaxes(w, -1, -2)), 1)
  eye = jnp.broadcast_to(jnp.eye(c, dtype=w.dtype), upper.shape)
  inverse = jax.scipy.linalg.solve_triangular(upper, eye, lower=False, unit_diagonal=True)
  return inverse * beta[..., None, :]


def _householder_logits_chunked(query, key, w, beta, q_index, chunk: int) -> jax.Array:
  """`householder_logits` by chunks of C keys: O(Lk / C) sequential steps, time O(Lq Lk D (1 + D / C)).

  Per key chunk [s, e) (W, K its rows, T its `_chunk_transform`, rows and columns indexed within the chunk):
    P     = H_s ... H_{e-1} = I - W^T T W                   (the chunk's whole product, D x D)
    kh_j  = H_{e-1} ... H_{j+1} k_j:  Kh = K - M^T T W,   M_bj = w_b . k_j [b > j]
  and per query i (Q its chunk's queries, the query chunk aligned on the key chunk of the same tokens):
    v_i   = H_s ... H_i q_i:          V = Q - R W,        R = tril(Q W^T) T^T
    a_ij  = q_i . k_j - (R M)_ij      for s <= j <= i (the diagonal block).
  For j in a key chunk n before the query's chunk t, a_ij = kh_j . (P_{n+1} ... P_{t-1} v_i): one scan over
  the key chunks, last to first, carries x_i = P_{n+1} ... P_{t-1} v_i for every query (0 until its own chunk
  is reached), emits the column block x . kh_j, then takes x <- P_n x (x <- v on the query's own chunk): the
  sequential scan with a chunk of keys per step. Queries at an offset that is not a multiple of C see the keys
  shifted right by r = -offset mod C (r transparent zero tokens in front), so that chunks still coincide.
  """
  b, k_len, h, d = key.shape
  q_len = query.shape[1]
  q_index = jnp.asarray(q_index, jnp.int32)
  queries = jnp.arange(q_len, dtype=jnp.int32)
  if q_len == k_len:  # The queries are the keys (training, a whole prompt): offset 0, no shift.
    offset, shift, num_k = jnp.int32(0), 0, -(-k_len // chunk)
    in_contract = jnp.all(q_index == queries)
  else:  # Queries at a cache index, dynamic: one chunk more leaves room for any shift.
    offset = q_index[0]
    shift, num_k = (-offset) % chunk, -(-k_len // chunk) + 1
    in_contract = jnp.all(q_index == offset + queries) & (offset >= 0) & (offset + q_len <= k_len)
  num_q = -(-q_len // chunk)
  first = (offset + shift) // chunk  # The key chunk that holds query 0.

  def to_chunks(a, num, at):  # (B, L, H, ...) -> (B, H, num, C, ...), a placed at index `at`, zeros around.
    a = jnp.moveaxis(jnp.asarray(a, jnp.float32), 2, 1)
    padded = jnp.zeros(a.shape[:2] + (num * chunk,) + a.shape[3:], jnp.float32)
    a = jax.lax.dynamic_update_slice_in_dim(padded, a, at, axis=2)
    return a.reshape(a.shape[:2] + (num, chunk) + a.shape[3:])

  key, w, beta = (to_chunks(a, num_k, shift) for a in (key, w, beta))
  query = to_chunks(query, num_q, 0)
  swap = lambda a: jnp.swapaxes(a, -1, -2)
  t_mat = _chunk_transform(w, beta)
  tw = t_mat @ w
  products = jnp.eye(d, dtype=jnp.float32) - swap(w) @ tw  # P per key chunk (B, H, Nk, D, D)
  m_mat = jnp.tril(w @ swap(key), -1)
  key_hat = key - swap(m_mat) @ tw
  own = lambda a: jax.lax.dynamic_slice_in_dim(a, first, num_q, axis=2)  # the query chunks' own key chunks
  r_mat = jnp.tril(query @ swap(own(w))) @ swap(own(t_mat))
  v = query - r_mat @ own(w)
  diagonal = jnp.tril(query @ swap(own(key)) - r_mat @ own(m_mat))
  chunk_of_query = first + jnp.arange(num_q, dtype=jnp.int32)

  def step(x, inputs):
    product, k_hat, n = inputs
    here = (chunk_of_query == n)[:, None, None]
    column = jnp.where(here, diagonal, jnp.einsum('bhtcd,bhkd->bhtck', x, k_hat))
    x = jnp.where(here, v, jnp.einsum('bhtcd,bhed->bhtce', x, product))
    return x, column

  xs = (jnp.moveaxis(products, 2, 0), jnp.moveaxis(key_hat, 2, 0), jnp.arange(num_k, dtype=jnp.int32))
  _, columns = jax.lax.scan(step, jnp.zeros_like(query), xs, reverse=True)  # (Nk, B, H, Nq, C, C)
  logits = jnp.transpose(columns, (1, 2, 3, 4, 0, 5)).reshape(b, h, num_q * chunk, num_k * chunk)
  logits = jax.lax.dynamic_slice_in_dim(logits[:, :, :q_len], shift, k_len, axis=3)
  return jnp.where(in_contract, logits, jnp.nan)


def _householder_logits_scan(
    query: jax.Array, key: jax.Array, w: jax.Array, beta: jax.Array, q_index: jax.Array, block_size: int = 64
) -> jax.Array:
  """`householder_logits` for any q_index: one scan over the keys, last to first, in checkpointed blocks of
  `block_size` keys, carrying u = H_{j+1} ... H_{q_index[i]} q_i for every query (Lk sequential steps)."""
  b, k_len, h, d = key.shape
  q_len = query.shape[1]
  blocks = -(-k_len // block_size)
  pad = blocks * block_size - k_len
  pad_keys = lambda a: jnp.pad(a, [(0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 2))
  key, w, beta = (pad_keys(jnp.asarray(a, jnp.float32)) for a in (key, w, beta))
  # Keys last to first, grouped in blocks: (blocks, block_size, B, ...).
  to_steps = lambda a: jnp.flip(jnp.moveaxis(a, 1, 0), 0).reshape((blocks, block_size) + a.shape[:1] + a.shape[2:])
  index = jnp.flip(jnp.arange(blocks * block_size, dtype=jnp.int32)).reshape(blocks, block_size)
  q_index = jnp.asarray(q_index, jnp.int32)

  def step(u, inputs):
    k_j, w_j, beta_j, j = inputs
    column = jnp.einsum('bihd,bhd->bih', u, k_j)  # a_{:, j} = u . k_j
    # Queries at or after j take H_j for the next (earlier) key: u <- u - beta_j (u . w_j) w_j.
    update = beta_j[:, None, :, None] * jnp.einsum('bihd,bhd->bih', u, w_j)[..., None] * w_j[:, None]
    u = jnp.where((q_index >= j)[None, :, None, None], u - update, u)
    return u, jnp.where((q_index >= j)[None, :, None], column, 0.0)

  @jax.checkpoint
  def block(u, inputs):
    return jax.lax.scan(step, u, inputs)

  _, columns = jax.lax.scan(block, jnp.asarray(query, jnp.float32), (to_steps(key), to_steps(w), to_steps(beta), index))
  columns = jnp.flip(columns.reshape((blocks * block_size, b, q_len, h)), 0)[:k_len]  # (Lk, B, Lq, H)
  return jnp.transpose(columns, (1, 3, 2, 0))


def householder_key_tiles(key: jax.Array, w: jax.Array, beta: jax.Array, tile: int) -> dict:
  """What every query tile reads of each key tile of `tile` keys, computed once before the tile sweep.

  key and w (B, L, H, D), beta (B, L, H), L a multiple of `tile` (padding: beta = 0, H = I) -> per key tile n
  (arrays (B, H, N, C, ...), C = `tile`): its directions `w`, its compact WY transform `t` (`_chunk_transform`),
  its keys carried to its end `key_hat` (kh_j = H_{e-1} ... H_{j+1} k_j) and its whole product `product`
  P_n = H_s ... H_{e-1} (B, H, N, D, D): the chunked form's per-chunk quantities (`_householder_logits_chunked`),
  O(L (D + C) + L D^2 / C) floats.
  """
  b, length, h, d = key.shape
  num = length // tile
  to_tiles = lambda a: jnp.moveaxis(jnp.asarray(a, jnp.float32), 2, 1).reshape((b, h, num, tile) + a.shape[3:])
  key, w, beta = to_tiles(key), to_tiles(w), to_tiles(beta)
  swap = lambda a: jnp.swapaxes(a, -1, -2)
  t_mat = _chunk_transform(w, beta)
  tw = t_mat @ w
  m_mat = jnp.tril(w @ swap(key), -1)
  return {
      'w': w,
      't': t_mat,
      'key_hat': key - swap(m_mat) @ tw,
      'product': jnp.eye(d, dtype=jnp.float32) - swap(w) @ tw,
  }


def householder_tile_logits(tiles: dict, query: jax.Array, key: jax.Array, carry: jax.Array, rows: jax.Array):
  """One (query tile, key tile) step of the tiled logits: (logits (B, H, bq, C), the carry for the key tile
  before this one).

  tiles: this key tile's share of `householder_key_tiles` (w, t, key_hat (B, H, C, ...), product (B, H, D, D));
  query (B, H, bq, D) and key (B, H, C, D) the tile's own, float32; carry x (B, H, bq, D); rows (bq,) int32, each
  query's key index minus the tile's first key. Per query row, as one step of `_householder_logits_chunked`'s
  scan with the row's own chunk position in place of its aligned one:
    rows in [0, C) (the query's own key tile):  a_ij = q_i . k_j - (R M)_ij, R = (Q W^T)[a <= row] T^T,
                                                 carry <- v_i = q_i - R W (q carried to the tile's start);
    rows >= C (a key tile before the query's):  a_ij = x_i . kh_j, carry <- P x_i;
    rows < 0 (a key tile after the query):      0 (masked causally), carry unchanged (zero).
  The diagonal block's O(bq C (C + D)) work runs only on a tile that holds some query's own keys (`lax.cond`).
  """
  w, t_mat = tiles['w'], tiles['t']
  size = w.shape[-2]
  swap = lambda a: jnp.swapaxes(a, -1, -2)
  own = ((rows >= 0) & (rows < size))[:, None]
  before = (rows >= size)[:, None]

  def diagonal(_):
    reach = jnp.arange(size, dtype=jnp.int32)[None, :] <= rows[:, None]
    r_mat = jnp.where(reach, query @ swap(w), 0.0) @ swap(t_mat)
    m_mat = jnp.tril(w @ swap(key), -1)
    return query @ swap(key) - r_mat @ m_mat, query - r_mat @ w

  def nothing(_):
    return jnp.zeros(query.shape[:-1] + (size,), jnp.float32), jnp.zeros_like(query)

  block, v = jax.lax.cond(jnp.any(own), diagonal, nothing, None)
  logits = jnp.where(own, block, jnp.where(before, carry @ swap(tiles['key_hat']), 0.0))
  carry = jnp.where(own, v, jnp.where(before, carry @ swap(tiles['product']), carry))
  return logits, carry


MAX_BLOCK_SIZE = 2**12


@register('path')
@dataclasses.dataclass(frozen=True)
class PaTH(contract.ContextualEncoder):
  """PaTH's content logit; `block_size` is the chunk of keys of the chunked logits (and the checkpointed block
  of the per-key scan that decoding steps use); the tiled form's chunk is the blockwise key tile."""

  rank: int = 32
  conv_size: int = 3
  block_size: int = 64

  replaces_content = True
  uses_head_vectors = True  # Its directions w_t have head_dim features, as the queries and keys.

  def __post_init__(self):
    validation.positive_int(self.name, 'rank', self.rank, maximum=validation.MAX_TABLE_ROWS)
    validation.positive_int(self.name, 'conv_size', self.conv_size, maximum=validation.MAX_KERNEL)
    # Keys are padded to a multiple of the block: a block far beyond any sequence only allocates padding.
    validation.positive_int(self.name, 'block_size', self.block_size, maximum=MAX_BLOCK_SIZE)

  def init_params(self, rng, dims_):
    down, up, conv, beta = jax.random.split(rng, 4)
    inner = dims_.num_heads * dims_.head_dim
    bound = 1.0 / self.conv_size**0.5
    return {
        'w_down': INIT_STDDEV * jax.random.normal(down, (dims_.model_dim, self.rank), jnp.float32),
        'w_up': INIT_STDDEV * jax.random.normal(up, (self.rank, inner), jnp.float32),
        'w_conv': jax.random.uniform(conv, (self.conv_size, inner), jnp.float32, -bound, bound),
        'beta_kernel': INIT_STDDEV * jax.random.normal(beta, (dims_.model_dim, dims_.num_heads), jnp.float32),
        'beta_bias': jnp.zeros((dims_.num_heads,), jnp.float32),
    }

  def num_features(self, dims_):
    return self.rank + dims_.num_heads

  def token_features(self, params, x):
    """[W_down x_t, beta logit_t]: (B, L, rank + H); the convolution runs over the cached sequence."""
    x = jnp.asarray(x, jnp.float32)
    return jnp.concatenate([x @ params['w_down'], x @ params['beta_kernel'] + params['beta_bias']], axis=-1)

  def directions(self, params, features, key_mask):
    """(w (B, L, H, D) unit vectors, beta (B, L, H) in (0, 2), 0 on padded tokens) from the features."""
    mask = jnp.asarray(key_mask, bool)
    features = jnp.where(mask[..., None], features, 0.0)
    num_heads = params['beta_bias'].shape[0]
    w = short_conv(features[..., : self.rank] @ params['w_up'], params['w_conv'])
    w = jax.nn.silu(w).reshape(w.shape[:2] + (num_heads, -1))
    w = w * jax.lax.rsqrt(jnp.sum(w * w, axis=-1, keepdims=True) + 1e-6)
    beta = jnp.where(mask[..., None], 2.0 * jax.nn.sigmoid(features[..., self.rank :]), 0.0)
    return w, beta

  def key_tiles(self, w, beta, key, tile: int) -> dict:
    """The tiled form's per-key-tile data (`householder_key_tiles`)."""
    return householder_key_tiles(key, w, beta, tile)

  def tile_logits(self, tiles, query, key, carry, rows):
    """One (query tile, key tile) step of the tiled form (`householder_tile_logits`)."""
    return householder_tile_logits(tiles, query, key, carry, rows)

  def score_term(self, params, ctx):
    w, beta = self.directions(params, ctx.features, ctx.key_mask)
    return householder_logits(ctx.query, ctx.key, w, beta, ctx.q_index, self.block_size)
