"""Each grid bias encoder against a numpy transcription of its reference code (written here, not imported).

References: microsoft/Cream iRPE/DeiT-with-iRPE/irpe.py (iRPE), microsoft/Swin-Transformer models/
swin_transformer.py and swin_transformer_v2.py (Swin v1 table, Swin v2 CPB), antofuller/CROMA `get_2dalibi`
(2-D ALiBi), chijames/KERPLE (log kernel), FIRE's appendix code, Shaw et al.'s clipped index.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import grid

H = 4


def _init(enc, seed=0, **sizes):
  return enc.init(jax.random.key(seed), H, head_dim=sizes.get('head_dim', 8), model_dim=sizes.get('model_dim', 32))


def _randomize(params, seed=1):
  """Every learned array of params replaced by random values (a zero-initialised table tests nothing)."""
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed), max(len(leaves), 1))
  return jax.tree.unflatten(tree, [jax.random.normal(k, jnp.shape(x), jnp.float32) for k, x in zip(keys, leaves)])


# ---------------------------------------------------------------------------------------------------------
# iRPE: a transcription of irpe.py (piecewise_index, _rp_2d_*, get_bucket_ids_2d, forward_rpe_transpose bias).


def ref_piecewise_index(relative_position, alpha, beta, gamma):
  rp = np.asarray(relative_position)
  rp_abs = np.abs(rp)
  mask = rp_abs <= alpha
  not_mask = ~mask
  rp_out = rp[not_mask]
  rp_abs_out = rp_abs[not_mask].astype(np.float32)
  y_out = np.sign(rp_out) * np.minimum(
      np.round(alpha + np.log(rp_abs_out / alpha) / math.log(gamma / alpha) * (beta - alpha)), beta
  )
  idx = rp.copy()
  if idx.dtype.kind == 'f':
    idx = np.round(idx)
  idx = idx.astype(np.int64)
  idx[not_mask] = y_out.astype(np.int64)
  return idx


def ref_irpe_bucket_ids(method, height, width, skip, alpha, beta, gamma):
  rows = np.repeat(np.arange(height)[:, None], width, 1)
  cols = np.repeat(np.arange(width)[None, :], height, 0)
  pos = np.stack([rows, cols], 2)
  L = height * width
  diff = pos.reshape(L, 1, 2) - pos.reshape(1, L, 2)
  kw = dict(alpha=alpha, beta=beta, gamma=gamma)
  beta_int = int(beta)
  if method == 'euclidean':
    dis = np.round(np.sqrt((diff.astype(np.float32) ** 2).sum(2)))
    ids = ref_piecewise_index(dis, **kw)
  elif method == 'quant':
    ids = ref_piecewise_index((diff**2).sum(2), **kw)
  elif method == 'product':
    S = 2 * beta_int + 1
    r = ref_piecewise_index(diff[:, :, 0], **kw) + beta_int
    c = ref_piecewise_index(diff[:, :, 1], **kw) + beta_int
    ids = r * S + c
  elif method == 'cross_rows':
    ids = ref_piecewise_index(diff[:, :, 0], **kw)
  elif method == 'cross_cols':
    ids = ref_piecewise_index(diff[:, :, 1], **kw)
  if method != 'product':
    ids = ids + beta_int
  num_buckets = (2 * beta_int + 1) ** 2 if method == 'product' else 2 * beta_int + 1
  if skip > 0:
    new = np.empty((skip + L, skip + L), np.int64)
    new[:skip] = num_buckets
    new[:, :skip] = num_buckets
    new[skip:, skip:] = ids
    ids = new
    num_buckets += 1
  return ids, num_buckets


def test_piecewise_index_matches_reference():
  x = np.arange(-40, 41)
  alpha, beta, gamma = 1.9, 3.8, 15.2
  np.testing.assert_array_equal(
      np.asarray(grid.encoders.irpe.piecewise_index(x, alpha, beta, gamma)), ref_piecewise_index(x, alpha, beta, gamma)
  )
  # Hand-computed: exact within alpha, saturating at int(beta) = 3 far away.
  np.testing.assert_array_equal(
      ref_piecewise_index(np.array([0, 1, 2, 5, 40, -40]), alpha, beta, gamma), [0, 1, 2, 3, 3, -3]
  )


@pytest.mark.parametrize('method', ['euclidean', 'quant', 'cross', 'product'])
@pytest.mark.parametrize('class_token, shared_head', [(False, True), (True, False)])
def test_irpe_bias_matches_reference(method, class_token, shared_head):
  enc = grid.make('irpe', method=method, shared_head=shared_head)
  params = _randomize(_init(enc))
  shape = (4, 5)
  ours = np.asarray(grid.grid_bias_matrix(enc, params, shape, class_token=class_token))
  table = np.asarray(params['table'])  # (tables, H or 1, num_buckets + 1)
  skip = int(class_token)
  kw = dict(alpha=enc.alpha, beta=enc.beta, gamma=enc.gamma)
  methods = ['cross_rows', 'cross_cols'] if method == 'cross' else [method]
  expected = 0.0
  for t, m in enumerate(methods):
    ids, num_buckets = ref_irpe_bucket_ids(m, *shape, skip, **kw)
    lookup = table[t, :, :num_buckets]
    if skip:  # the reference's extra bucket is id num_buckets - 1 after `num_buckets += 1`; ours is the last column
      lookup = np.concatenate([table[t, :, : num_buckets - 1], table[t, :, -1:]], axis=1)
    expected = expected + lookup[:, ids.reshape(-1)].reshape(-1, *ids.shape)
  np.testing.assert_allclose(ours, np.broadcast_to(expected, ours.shape), rtol=1e-6)


def test_irpe_spec_and_buckets():
  enc = grid.from_spec('irpe(method=quant, mode=bias)')
  assert enc == grid.make('irpe', method='quant')
  assert grid.to_spec(enc) == "irpe(method='quant')"
  assert grid.make('irpe').num_buckets == 49  # product, (2 * int(3.8) + 1)^2
  with pytest.raises(ValueError, match='method'):
    grid.make('irpe', method='diagonal')


# ---------------------------------------------------------------------------------------------------------
# Swin v1 and v2: transcriptions of WindowAttention's index and CPB table.


def ref_swin_index(window):
  coords = np.stack(np.meshgrid(np.arange(window[0]), np.arange(window[1]), indexing='ij'))
  flat = coords.reshape(2, -1)
  rel = (flat[:, :, None] - flat[:, None, :]).transpose(1, 2, 0).copy()
  rel[:, :, 0] += window[0] - 1
  rel[:, :, 1] += window[1] - 1
  rel[:, :, 0] *= 2 * window[1] - 1
  return rel.sum(-1)


def test_swin_v1_matches_reference():
  enc = grid.make('swin', window=5)
  params = _init(enc)
  for shape in [(5, 5), (3, 4)]:
    ours = np.asarray(grid.grid_bias_matrix(enc, params, shape))
    # The reference's window is shape; its table (2M-1)^2 for M = 5 read at the offsets of the smaller grid.
    table = np.asarray(params['table'])
    coords = np.asarray(grid.grid_positions(shape))
    d = coords[:, None] - coords[None]
    index = (d[..., 0] + 4) * 9 + (d[..., 1] + 4)
    if shape == (5, 5):
      np.testing.assert_array_equal(index, ref_swin_index((5, 5)))
    np.testing.assert_allclose(ours, table[index].transpose(2, 0, 1), rtol=1e-6)


def test_swin_v1_refuses_grids_beyond_its_table():
  enc = grid.make('swin', window=5)
  params = _init(enc)
  with pytest.raises(ValueError, match='swin.*beyond the learned table.*cannot extrapolate'):
    grid.grid_bias_matrix(enc, params, (6, 5))
  far = jnp.array([[0, 0], [0, 5]])
  with pytest.raises(ValueError, match='swin.*beyond the learned table'):
    grid.grid_bias_at_positions(enc, params, far[None], far[None])
  # Traced coordinates beyond the table: NaN, never a clipped row.
  out = jax.jit(lambda p: grid.grid_bias_at_positions(enc, params, p, p))(far[None])
  assert np.isnan(np.asarray(out)[0, :, 0, 1]).all() and np.isfinite(np.asarray(out)[0, :, 0, 0]).all()


def ref_swin_v2_bias(params, window, pretrained_window, num_heads):
  h = np.arange(-(window[0] - 1), window[0], dtype=np.float32)
  w = np.arange(-(window[1] - 1), window[1], dtype=np.float32)
  table = np.stack(np.meshgrid(h, w, indexing='ij')).transpose(1, 2, 0)[None].copy()  # 1, 2Wh-1, 2Ww-1, 2
  table[:, :, :, 0] /= pretrained_window[0] - 1
  table[:, :, :, 1] /= pretrained_window[1] - 1
  table *= 8
  table = np.sign(table) * np.log2(np.abs(table) + 1.0) / np.log2(8)
  hidden = np.maximum(table @ np.asarray(params['hidden_kernel']) + np.asarray(params['hidden_bias']), 0)
  bias_table = (hidden @ np.asarray(params['out_kernel'])).reshape(-1, num_heads)
  index = ref_swin_index(window)
  bias = bias_table[index.reshape(-1)].reshape(index.shape + (num_heads,)).transpose(2, 0, 1)
  return 16 / (1 + np.exp(-bias))


@pytest.mark.parametrize('shape', [(7, 7), (10, 9)])
def test_swin_v2_cpb_matches_reference(shape):
  enc = grid.from_spec('swin_v2_cpb(pretrained_window=7)')
  params = _init(enc)
  ours = np.asarray(grid.grid_bias_matrix(enc, params, shape))
  np.testing.assert_allclose(ours, ref_swin_v2_bias(params, shape, (7, 7), H), rtol=2e-5, atol=2e-5)
  assert (ours > 0).all() and (ours < 16).all()


# ---------------------------------------------------------------------------------------------------------
# 2-D ALiBi (CROMA's get_2dalibi), 2-D KERPLE, relative distance, Shaw per axis, FIRE-2D.


def ref_croma_2dalibi(num_heads, num_patches):
  side = int(math.sqrt(num_patches))
  points = list(itertools.product(range(side), range(side)))

  def get_slopes(n):
    def power_of_2(n):
      start = 2 ** (-(2 ** -(math.log2(n) - 3)))
      return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
      return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]

  slopes = np.asarray(get_slopes(num_heads), np.float32)[:, None]
  idxs = [math.sqrt((p1[0] - p2[0]) ** 2 + (p1[1] - p2[1]) ** 2) for p1 in points for p2 in points]
  return (slopes * np.asarray(idxs, np.float32)[None] * -1).reshape(1, num_heads, num_patches, num_patches)


@pytest.mark.parametrize('num_heads', [4, 6])
def test_alibi2d_matches_croma(num_heads):
  enc = grid.make('alibi2d')
  params = enc.init(jax.random.key(0), num_heads)
  ours = np.asarray(grid.grid_bias_matrix(enc, params, (5, 5)))
  np.testing.assert_allclose(ours[None], ref_croma_2dalibi(num_heads, 25), rtol=1e-6, atol=1e-6)


def _pair_offsets(shape):
  p = np.asarray(grid.grid_positions(shape))
  return p[:, None] - p[None]


def test_kerple2d_is_the_log_kernel_of_the_distance():
  enc = grid.make('kerple2d')
  params = _init(enc)
  r1, r2 = (np.asarray(v) for v in enc.coefficients(params))
  dist = np.sqrt((_pair_offsets((3, 4)) ** 2).sum(-1))
  expected = -r1[:, None, None] * np.log(1 + r2[:, None, None] * dist[None])
  np.testing.assert_allclose(grid.grid_bias_matrix(enc, params, (3, 4)), expected, rtol=1e-5, atol=1e-6)
  assert r1.min() > 0.01 and r2.min() > 0.01


@pytest.mark.parametrize('metric', ['l1', 'euclidean'])
def test_distance2d(metric):
  enc = grid.make('distance2d', metric=metric)
  params = {**_init(enc), 'slopes': jnp.array([0.5, 1.0, 2.0, 3.0])}
  d = _pair_offsets((3, 3))
  dist = np.abs(d).sum(-1) if metric == 'l1' else np.sqrt((d**2).sum(-1))
  expected = -np.array([0.5, 1.0, 2.0, 3.0])[:, None, None] * dist[None]
  np.testing.assert_allclose(grid.grid_bias_matrix(enc, params, (3, 3)), expected, rtol=1e-6)
  # Hand value: offset (1, 2) is 3 (L1) or sqrt(5) (Euclidean) away.
  b = np.asarray(enc.bias(params, jnp.array([1, 2])))
  np.testing.assert_allclose(b[0], -0.5 * (3.0 if metric == 'l1' else math.sqrt(5)), rtol=1e-6)


def test_shaw2d_clips_per_axis():
  enc = grid.make('shaw2d', max_distance=2)
  params = _randomize(_init(enc))
  t = np.asarray(params['tables'])
  d = _pair_offsets((4, 5))
  expected = t[0][np.clip(d[..., 0], -2, 2) + 2] + t[1][np.clip(d[..., 1], -2, 2) + 2]
  np.testing.assert_allclose(grid.grid_bias_matrix(enc, params, (4, 5)), expected.transpose(2, 0, 1), rtol=1e-6)


def test_fire2d_follows_its_formula_and_is_query_dependent():
  enc = grid.make('fire2d')
  params = _init(enc)
  p = np.asarray(grid.grid_positions((3, 3)), np.float64)
  dist = np.sqrt(((p[:, None] - p[None]) ** 2).sum(-1))
  origin = np.sqrt((p**2).sum(-1))[:, None]
  c, threshold = 0.1, 2.0
  x = np.log1p(c * dist) / (np.log1p(c * np.maximum(origin, threshold)) + 1e-6)
  l1, l2 = params['mlp']
  expected = np.maximum(x[..., None] @ np.asarray(l1['kernel']) + np.asarray(l1['bias']), 0) @ np.asarray(l2['kernel'])
  expected = expected + np.asarray(l2['bias'])
  ours = np.asarray(grid.grid_bias_matrix(enc, params, (3, 3)))
  np.testing.assert_allclose(ours, expected.transpose(2, 0, 1), rtol=1e-5, atol=1e-6)
  with pytest.raises(AssertionError):
    grid.assert_block_toeplitz(ours, (3, 3))


# ---------------------------------------------------------------------------------------------------------
# Every relative bias encoder: the block-Toeplitz construction equals direct evaluation on all pairs.

RELATIVE_BIAS = [
    'distance2d',
    'shaw2d',
    'irpe',
    "irpe(method='euclidean')",
    "irpe(method='cross')",
    'swin',
    'swin_v2_cpb',
    'alibi2d',
    'kerple2d',
]


@pytest.mark.parametrize('spec', RELATIVE_BIAS)
def test_block_toeplitz_construction_equals_direct_evaluation(spec, class_token=True):
  enc = grid.from_spec(spec)
  params = _randomize(_init(enc))
  shape = (4, 3)
  built = np.asarray(grid.grid_bias_matrix(enc, params, shape, class_token=class_token))
  coords = grid.grid_positions(shape, class_token=class_token)
  direct = np.asarray(grid.grid_bias_at_positions(enc, params, coords[None], coords[None]))[0]
  # The table of distinct offsets and the L^2 pairs are different batch shapes, so XLA may reduce an MLP's
  # matmuls (swin_v2_cpb's 512 hidden units) in another order: float32 rounding of 1e-5 relative at a bias of ~9
  # was measured on a loaded CPU (CI, 2026-12-05). A wrong offset or axis moves an entry by O(1).
  tolerance = 1e-4 if spec == 'swin_v2_cpb' else 1e-6
  np.testing.assert_allclose(built, direct, rtol=tolerance, atol=tolerance)
  grid.assert_block_toeplitz(built, shape, class_token=class_token)


def test_three_axes():
  for spec in ['alibi2d(axes=3)', 'irpe(axes=3)', 'swin(axes=3, window=3)', 'shaw2d(axes=3)']:
    enc = grid.from_spec(spec)
    params = _randomize(_init(enc))
    built = np.asarray(grid.grid_bias_matrix(enc, params, (2, 3, 3)))
    coords = grid.grid_positions((2, 3, 3))
    direct = np.asarray(grid.grid_bias_at_positions(enc, params, coords[None], coords[None]))[0]
    np.testing.assert_allclose(built, direct, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    'name',
    [
        'alibi2d',
        'distance2d',
        'fire2d',
        'irpe',
        'kerple2d',
        'mrope',
        'rope_axial',
        'rope_mixed',
        'shaw2d',
        'sincos2d',
        'swin',
        'swin_v2_cpb',
        'learned2d',
    ],
)
def test_every_grid_encoder_spec_round_trips(name):
  enc = grid.make(name)
  assert grid.from_spec(grid.to_spec(enc)) == enc
  assert repr(enc) == grid.to_spec(enc)
  assert name in grid.names()


def test_spec_round_trips_with_hyperparameters_and_sums():
  for spec in [
      'swin_v2_cpb(pretrained_window=14)',
      "irpe(method='cross', ratio=2.5)",
      'mrope(interleaved=True)',
      'alibi2d + rope_axial',
      "distance2d(metric='l1', learnable=False)",
  ]:
    enc = grid.from_spec(spec)
    assert grid.from_spec(grid.to_spec(enc)) == enc


def test_one_d_and_grid_registries_are_apart():
  from relpos_jax import encoders

  assert not set(grid.names()) & set(encoders.names())
  with pytest.raises(ValueError, match='unknown grid encoder'):
    grid.make('alibi')
  with pytest.raises(ValueError, match='unknown encoder'):
    encoders.make('alibi2d')


def test_grid_encoders_refuse_one_d_positions_by_name():
  enc = grid.make('alibi2d')
  params = enc.init(jax.random.key(0), 4)
  with pytest.raises(ValueError, match=r'alibi2d.*trailing axis of 2.*got shape \(1, 9\)'):
    grid.grid_bias_at_positions(enc, params, jnp.arange(9)[None], jnp.arange(9)[None])
  with pytest.raises(ValueError, match='grid bias encoder'):
    from relpos_jax import encoders

    one_d = encoders.make('alibi')
    grid.grid_bias_matrix(one_d, one_d.init(jax.random.key(0), 4), (3, 3))


@pytest.mark.parametrize(
    'method, rpe_on, class_token', [('product', 'k', True), ('cross', 'qk', False), ('euclidean', 'q', True)]
)
def test_irpe_contextual_matches_reference(method, rpe_on, class_token):
  """The reference's forward_rpe_transpose in contextual mode: lookup = x @ W (per head), read at the pair's
  bucket; on keys x = q * scale, on queries x = k * scale and the result transposed."""
  enc = grid.make('irpe', method=method, mode='contextual', rpe_on=rpe_on, shared_head=False)
  params = _randomize(_init(enc, head_dim=8))
  shape = (3, 4)
  n = 12 + int(class_token)
  coords = grid.grid_positions(shape, class_token=class_token)[None]
  q = jax.random.normal(jax.random.key(5), (1, n, H, 8))
  k = jax.random.normal(jax.random.key(6), (1, n, H, 8))
  scale = 8**-0.5
  ours = np.asarray(enc.contextual_scores(params, q, k, coords, coords, scale))
  kw = dict(alpha=enc.alpha, beta=enc.beta, gamma=enc.gamma)
  methods = ['cross_rows', 'cross_cols'] if method == 'cross' else [method]
  expected = 0.0
  for side in rpe_on:
    x = (np.asarray(q) if side == 'k' else np.asarray(k)).transpose(0, 2, 1, 3) * scale  # (B, H, L, D)
    for t, m in enumerate(methods):
      ids, _ = ref_irpe_bucket_ids(m, *shape, int(class_token), **kw)
      weight = np.asarray(params[side][t])  # (H, D, num_buckets + 1)
      lookup = np.einsum('bhld,hdn->bhln', x, weight)
      term = np.take_along_axis(lookup, np.broadcast_to(ids, lookup.shape[:2] + ids.shape), axis=-1)
      expected = expected + (term if side == 'k' else term.transpose(0, 1, 3, 2))
  np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match='grid bias encoder'):
    grid.grid_bias_matrix(enc, params, shape)
