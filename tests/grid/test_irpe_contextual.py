"""iRPE's contextual mode in attention: on queries, keys and values (rpe_on with 'q', 'k', 'v'), per tile.

Pinned: the whole attention (scores on q and k, softmax, the value term) against a numpy transcription of the
reference's Attention.forward with rpe_q, rpe_k and rpe_v (microsoft/Cream iRPE/DeiT-with-iRPE/
rpe_vision_transformer.py; irpe.py's get_bucket_ids_2d, forward_rpe_transpose and forward_rpe_no_transpose, written
here, not imported), for every method, on the explicit and the blockwise paths; the layer's blockwise path equals
its explicit one in outputs and gradients (odd tiles, a class token, padding, explicit coordinates); the spec
round-trips; bad values are refused by name; and the compiled blockwise fwd+bwd holds no (L, L)-sized buffer.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import grid
from relpos_jax.nn import RelativeMultiHeadAttention, functional, terms
from relpos_jax.nn import call

HEADS, HEAD_DIM = 2, 8
SHAPE = (3, 4)

# ---------------------------------------------------------------------------------------------------------
# The reference, in numpy (irpe.py: piecewise_index, _rp_2d_*, get_bucket_ids_2d; rpe_vision_transformer.py:
# Attention.forward).


def ref_piecewise_index(rp, alpha, beta, gamma):
  rp = np.asarray(rp)
  rp_abs = np.abs(rp)
  not_mask = rp_abs > alpha
  y_out = np.sign(rp[not_mask]) * np.minimum(
      np.round(alpha + np.log(rp_abs[not_mask].astype(np.float32) / alpha) / math.log(gamma / alpha) * (beta - alpha)),
      beta,
  )
  idx = np.round(rp) if rp.dtype.kind == 'f' else rp.copy()
  idx = idx.astype(np.int64)
  idx[not_mask] = y_out.astype(np.int64)
  return idx


def ref_bucket_ids(method, height, width, skip, alpha, beta, gamma):
  """get_bucket_ids_2d: (skip + L, skip + L) ids of diff = pos_i - pos_j; the skip token's pairs read the extra
  bucket num_buckets."""
  pos = np.stack(np.meshgrid(np.arange(height), np.arange(width), indexing='ij'), -1).reshape(-1, 2)
  diff = pos[:, None, :] - pos[None, :, :]
  kw = dict(alpha=alpha, beta=beta, gamma=gamma)
  b = int(beta)
  if method == 'euclidean':
    ids = ref_piecewise_index(np.round(np.sqrt((diff.astype(np.float32) ** 2).sum(2))), **kw) + b
  elif method == 'quant':
    ids = ref_piecewise_index((diff**2).sum(2), **kw) + b
  elif method == 'product':
    ids = (ref_piecewise_index(diff[..., 0], **kw) + b) * (2 * b + 1) + ref_piecewise_index(diff[..., 1], **kw) + b
  elif method == 'cross_rows':
    ids = ref_piecewise_index(diff[..., 0], **kw) + b
  else:  # cross_cols
    ids = ref_piecewise_index(diff[..., 1], **kw) + b
  num_buckets = (2 * b + 1) ** 2 if method == 'product' else 2 * b + 1
  if skip:
    ids = np.pad(ids, ((skip, 0), (skip, 0)), constant_values=num_buckets)
  return ids


def ref_attention(enc, params, q, k, v, class_token):
  """Attention.forward: attn = (s q) k^T + rpe_k(s q) + rpe_q(s k)^T, softmax, out = attn v + rpe_v(attn).
  q, k, v (B, L, H, D) -> (B, L, H, D); params[side][t] the table of place `side`, table t (iRPE_Cross: rows, cols)."""
  q, k, v = (np.asarray(x, np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))  # (B, H, L, D)
  scale = q.shape[-1] ** -0.5
  kw = dict(alpha=enc.alpha, beta=enc.beta, gamma=enc.gamma)
  methods = ['cross_rows', 'cross_cols'] if enc.method == 'cross' else [enc.method]
  ids = [ref_bucket_ids(m, *SHAPE, int(class_token), **kw) for m in methods]
  heads = lambda w: np.broadcast_to(w, (q.shape[1],) + w.shape[1:])  # shared_head: one row for every head

  def transposed(x, side):  # forward_rpe_transpose: lookup = x @ W (H, L, NB), read at rp_bucket[i, j]
    total = 0.0
    for t, rp in enumerate(ids):
      lookup = np.einsum('bhld,hdn->bhln', x, heads(np.asarray(params[side][t], np.float64)))
      total = total + np.take_along_axis(lookup, np.broadcast_to(rp, lookup.shape[:2] + rp.shape), axis=-1)
    return total

  attn = (q * scale) @ k.transpose(0, 1, 3, 2)
  if 'k' in enc.rpe_on:
    attn = attn + transposed(q * scale, 'k')
  if 'q' in enc.rpe_on:
    attn = attn + transposed(k * scale, 'q').transpose(0, 1, 3, 2)
  attn = np.exp(attn - attn.max(-1, keepdims=True))
  attn = attn / attn.sum(-1, keepdims=True)
  out = attn @ v
  if 'v' in enc.rpe_on:  # forward_rpe_no_transpose: weight = W[:, rp_bucket] (H, Lq, Lk, D); attn @ weight
    for t, rp in enumerate(ids):
      weight = heads(np.asarray(params['v'][t], np.float64))[:, rp]  # (H, Lq, Lk, D)
      out = out + np.einsum('bhij,hijd->bhid', attn, weight)
  return out.transpose(0, 2, 1, 3)


# ---------------------------------------------------------------------------------------------------------


def _params(enc, seed=1):
  """The encoder's params with every table random (they start at zero: a wrong gather would hide)."""
  params = enc.init(jax.random.key(0), HEADS, head_dim=HEAD_DIM)
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  return jax.tree.unflatten(tree, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])


def _qkv(n, batch=2, seed=0):
  keys = jax.random.split(jax.random.key(seed), 3)
  return [jax.random.normal(key, (batch, n, HEADS, HEAD_DIM), jnp.float32) for key in keys]


def _attend(enc, params, q, k, v, coords, implementation, block_size=None, offset_buckets=None):
  return functional.attend(
      call.AttentionInputs.checked(q, k, v),
      (enc,),
      [terms.grid.with_coordinates(params, coords, coords, offset_buckets=offset_buckets)],
      call.AttentionSettings.checked(implementation, block_size),
  )


@pytest.mark.parametrize('method', ['product', 'euclidean', 'quant', 'cross'])
@pytest.mark.parametrize('rpe_on, class_token, shared_head', [('v', False, True), ('qkv', True, False)])
def test_attention_matches_the_reference(method, rpe_on, class_token, shared_head):
  """The value term alone ('v') and with both score terms ('qkv'), explicit and in tiles of 5 x 3."""
  enc = grid.make('irpe', method=method, mode='contextual', rpe_on=rpe_on, shared_head=shared_head)
  params = _params(enc)
  n = 12 + int(class_token)
  q, k, v = _qkv(n)
  coords = jnp.broadcast_to(grid.grid_positions(SHAPE, class_token=class_token), (2, n, 2))
  expected = ref_attention(enc, params, q, k, v, class_token)
  for implementation, block_size in [('einsum', None), ('blockwise', (5, 3))]:
    for table in (None, enc.offset_buckets(SHAPE)):  # buckets per pair, or read from the grid's offsets
      got = _attend(enc, params, q, k, v, coords, implementation, block_size, offset_buckets=table)
      np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5, err_msg=f'{implementation} {table is None}')


@pytest.mark.parametrize('method', ['product', 'euclidean', 'quant', 'cross'])
@pytest.mark.parametrize('shape', [(4, 6), (3, 2, 5)])
def test_buckets_read_from_the_grid_offsets_equal_the_index_function_per_pair(method, shape):
  enc = grid.make('irpe', method=method, mode='contextual', axes=len(shape), ratio=1.5)
  coords = grid.grid_positions(shape, class_token=True)  # a class token first: its own bucket
  table = enc.offset_buckets(shape)
  assert table.shape == tuple(2 * n - 1 for n in shape) + (enc.num_tables,)
  per_pair = enc.pair_buckets(coords, coords)
  np.testing.assert_array_equal(enc.pair_buckets(coords, coords, offset_buckets=table), per_pair)
  np.testing.assert_array_equal(enc.pair_buckets(coords[5:], coords[:9], offset_buckets=table), per_pair[5:, :9])
  assert int(per_pair[0, 0, 0]) == enc.num_buckets and len(np.unique(per_pair)) > 3


def test_the_layer_on_a_grid_equals_the_layer_at_the_grid_coordinates():
  """grid_shape (buckets read from the offsets) and the same coordinates given explicitly (buckets per pair)."""
  layer = _layer("irpe(mode='contextual', rpe_on='qkv')", 'blockwise', block_size=(5, 3))
  x = jax.random.normal(jax.random.key(3), (2, 13, HEADS * HEAD_DIM))
  coords = jnp.broadcast_to(grid.grid_positions(SHAPE, class_token=True), (2, 13, 2))
  np.testing.assert_allclose(
      layer(x, grid_shape=SHAPE, class_token=True), layer(x, positions=coords), rtol=1e-5, atol=1e-6
  )


def test_the_value_term_reads_the_value_table():
  """With rpe_on='v' the scores are plain q . k: only the output moves, by sum_j a_ij r^V (zero table: none)."""
  enc = grid.make('irpe', mode='contextual', rpe_on='v')
  params = _params(enc)
  q, k, v = _qkv(12)
  coords = jnp.broadcast_to(grid.grid_positions(SHAPE), (2, 12, 2))
  plain = functional.attend(
      call.AttentionInputs.checked(q, k, v), (), [], call.AttentionSettings.checked(implementation='einsum')
  )
  zero = {**params, 'v': jnp.zeros_like(params['v'])}
  np.testing.assert_allclose(_attend(enc, zero, q, k, v, coords, 'einsum'), plain, rtol=1e-6, atol=1e-6)
  assert float(jnp.max(jnp.abs(_attend(enc, params, q, k, v, coords, 'einsum') - plain))) > 0.1
  assert params['v'].shape == (1, 1, enc.num_buckets + 1, HEAD_DIM)  # the reference's (H or 1, NB, D), + class


def _layer(spec, implementation, **kw):
  layer = RelativeMultiHeadAttention(
      HEADS, HEADS * HEAD_DIM, grid.from_spec(spec), rngs=nnx.Rngs(0), implementation=implementation, **kw
  )
  for p in layer.position_params:  # randomised alike in both layers
    for j, var in enumerate(jax.tree.leaves(p, is_leaf=lambda x: isinstance(x, nnx.Variable))):
      var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(j), var[...].shape)
  return layer


@pytest.mark.parametrize(
    'spec',
    [
        "irpe(mode='contextual', rpe_on='qkv')",
        pytest.param(
            "irpe(mode='contextual', rpe_on='qkv', method='cross', shared_head=False)", marks=pytest.mark.slow
        ),
    ],
)
@pytest.mark.parametrize('inputs', ['grid_shape', 'coordinates'])
def test_layer_blockwise_equals_explicit_in_outputs_and_gradients(spec, inputs):
  """The layer with a class token and padding, in tiles of 5 x 3 (padded query and key tiles) against
  implementation einsum: outputs, and gradients w.r.t. x and every parameter (projections and the q, k, v tables).
  With explicit coordinates the two sequences sit at different places (each batch row reads its own buckets)."""
  x = jax.random.normal(jax.random.key(3), (2, 13, HEADS * HEAD_DIM))
  mask = jnp.arange(13)[None, :] < jnp.asarray([[13], [10]])
  coords = grid.grid_positions(SHAPE, class_token=True)
  coords = jnp.stack([coords, jnp.where(coords == grid.positions.CLASS_TOKEN, coords, coords * 3 + 1)])
  kw = dict(grid_shape=SHAPE, class_token=True) if inputs == 'grid_shape' else dict(positions=coords)
  layers = {impl: _layer(spec, impl, **bs) for impl, bs in [('einsum', {}), ('blockwise', {'block_size': (5, 3)})]}

  def loss(layer, x):
    return jnp.sum(jnp.sin(layer(x, padding_mask=mask, **kw)))

  np.testing.assert_allclose(
      layers['blockwise'](x, padding_mask=mask, **kw),
      layers['einsum'](x, padding_mask=mask, **kw),
      rtol=1e-5,
      atol=1e-5,
  )
  (g1, gx1), (g2, gx2) = [nnx.grad(loss, argnums=(0, 1))(layers[i], x) for i in ('einsum', 'blockwise')]
  np.testing.assert_allclose(gx2, gx1, rtol=1e-4, atol=1e-5)
  for a, b in zip(jax.tree.leaves(nnx.state(g2)), jax.tree.leaves(nnx.state(g1))):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  tables = g2.position_params[0]
  for side in 'qkv':  # every table gets a gradient (a place left out would pass the comparison above)
    assert float(jnp.max(jnp.abs(tables[side][...]))) > 1e-4, side


def test_layer_is_translation_invariant_and_its_weights_leave_out_the_value_term():
  layer = _layer("irpe(mode='contextual', rpe_on='qkv')", 'blockwise', block_size=5)
  x = jax.random.normal(jax.random.key(4), (2, 12, HEADS * HEAD_DIM))
  c = jnp.broadcast_to(grid.grid_positions(SHAPE), (2, 12, 2))
  np.testing.assert_allclose(layer(x, positions=c), layer(x, positions=c + 7), rtol=2e-5, atol=2e-5)
  # attention_weights: softmax of the q and k terms; the output adds the value term on top of weights @ v.
  w = layer.attention_weights(x, grid_shape=SHAPE)
  _, _, v = layer._project(x)
  enc = layer.parts[0]
  params = layer._params(None)[0]
  rows = enc.value_embeddings(params, enc.table_rows(0))  # (R, H, D)
  buckets = enc.pair_buckets(grid.grid_positions(SHAPE), grid.grid_positions(SHAPE))[..., 0]  # (L, L)
  value_term = jnp.einsum('bhij,ijhd->bihd', w, rows[buckets])
  out = layer.out((jnp.einsum('bhij,bjhd->bihd', w, v) + value_term).reshape(2, 12, HEADS * HEAD_DIM))
  np.testing.assert_allclose(out, layer(x, grid_shape=SHAPE), rtol=1e-4, atol=1e-5)


def test_spec_round_trip_and_tables():
  enc = grid.from_spec('irpe(mode=contextual, rpe_on=qkv)')
  assert enc == grid.make('irpe', mode='contextual', rpe_on='qkv')
  assert grid.to_spec(enc) == "irpe(mode='contextual', rpe_on='qkv')"
  assert grid.from_spec(grid.to_spec(enc)) == enc
  params = enc.init(jax.random.key(0), HEADS, head_dim=HEAD_DIM)
  nb = enc.num_buckets + 1  # + the class token's bucket
  assert params['q'].shape == params['k'].shape == (1, 1, HEAD_DIM, nb)  # the reference's (H or 1, D, NB)
  assert params['v'].shape == (1, 1, nb, HEAD_DIM)  # rpe_v's (H or 1, NB, D)
  cross = grid.make('irpe', method='cross', mode='contextual', rpe_on='kv', shared_head=False)
  params = cross.init(jax.random.key(0), HEADS, head_dim=HEAD_DIM)
  assert set(params) == {'dims', 'k', 'v'} and params['v'].shape == (2, HEADS, cross.num_buckets + 1, HEAD_DIM)
  for rpe_on in ('q', 'k', 'v', 'qk', 'qv', 'kv', 'qkv'):
    assert grid.make('irpe', mode='contextual', rpe_on=rpe_on).rpe_on == rpe_on


def test_bad_values_are_refused_by_name():
  with pytest.raises(ValueError, match=r"irpe: rpe_on='x' is invalid; allowed: one of .*'qkv'"):
    grid.make('irpe', mode='contextual', rpe_on='x')
  with pytest.raises(ValueError, match=r"rpe_on='kq' is invalid"):  # the reference's order: q, k, v
    grid.make('irpe', mode='contextual', rpe_on='kq')
  with pytest.raises(ValueError, match=r"rpe_on='v' is invalid; allowed: 'k' with mode='bias'"):
    grid.make('irpe', rpe_on='v')  # the reference: "Bias non-transposed RPE does not exist"
  with pytest.raises(ValueError, match='rpe_on'):
    grid.from_spec("irpe(mode='contextual', rpe_on='vq')")
  enc = grid.make('irpe', mode='contextual', rpe_on='v')
  q, k, v = _qkv(12)
  with pytest.raises(ValueError, match=r"grid part 'irpe' reads the coordinates.*with_coordinates"):
    functional.attend(
        call.AttentionInputs.checked(q, k, v),
        (enc,),
        [_params(enc)],
        call.AttentionSettings.checked(implementation='blockwise'),
    )


def _temp_bytes(fn, *args):
  return jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_blockwise_fwd_bwd_memory_holds_no_length_squared_buffer():
  """At 48 x 48 + a class token (compiled, not run): the explicit layer fwd+bwd holds (H, L, L) float32 arrays
  (40.5 MiB each; 328 MiB in all, measured); the blockwise one, tiles of 128, holds tile-sized buffers (2.7 MiB;
  2.2 MiB at 32 x 32 and 3.5 MiB at 64 x 64, where one (H, L, L) array grows from 8 to 128 MiB), under an eighth
  of one (H, L, L) array."""
  side = 48
  n = side * side + 1

  def fwd_bwd(implementation):
    tiles = {'block_size': 128} if implementation == 'blockwise' else {}
    layer = _layer("irpe(mode='contextual', rpe_on='qkv')", implementation, **tiles)
    graphdef, state = nnx.split(layer)

    def loss(state, x):
      return jnp.sum(nnx.merge(graphdef, state)(x, grid_shape=(side, side), class_token=True) ** 2)

    return _temp_bytes(jax.grad(loss, argnums=(0, 1)), state, jnp.zeros((1, n, HEADS * HEAD_DIM)))

  one_square = HEADS * n * n * 4
  explicit, tiled = fwd_bwd('einsum'), fwd_bwd('blockwise')
  assert explicit >= one_square
  assert tiled < one_square / 8, (tiled, one_square)
