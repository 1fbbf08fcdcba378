"""The per-tile grid bias of the blockwise path: each (query tile x key tile) block gathered from the (H, P) table of
a grid's distinct offsets (relpos_jax.nn.terms.grid.GridTableBias, the Term a grid bias part gets on a `call.Grid`:
the table is its `prepare`), never the (H, L, L) matrix.

Pinned: the tile index equals the grid package's block-Toeplitz index; blockwise with the table equals the
explicit path (the (H, L, L) bias) in outputs and gradients w.r.t. q, k, v and the encoder's params, for odd
tiles, padding and a class token; the layer routes its grid biases through the table; and the compiled memory of
the blockwise fwd+bwd holds no (L, L)-sized buffer.

(Ported when the grid went through the Terms, issue 51: `terms.GridTable` handed to `functional.attend` as a
`position_bias` is gone; the same checks now hand attend the parts themselves with `positions=call.Grid(...)`.)
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import grid
from relpos_jax.nn import RelativeMultiHeadAttention, functional, terms
from relpos_jax.nn import call

HEADS, HEAD_DIM = 2, 8
SPECS = ['alibi2d', 'irpe', 'swin_v2_cpb']


@pytest.mark.parametrize('shape', [(3, 4), (1, 5), (4, 1), (2, 3, 2)])
@pytest.mark.parametrize('class_token', [False, True])
def test_tile_index_is_the_block_toeplitz_index(shape, class_token):
  n = int(np.prod(shape)) + int(class_token)
  full = grid.block_toeplitz_index(shape, class_token=class_token)
  got = terms.grid_offset_index(jnp.arange(n), jnp.arange(n), shape, class_token)
  np.testing.assert_array_equal(got, full)
  # A tile's sub-block: the same entries as the full index's.
  q, k = jnp.arange(1, min(n, 4)), jnp.arange(n // 2, n)
  np.testing.assert_array_equal(terms.grid_offset_index(q, k, shape, class_token), full[1 : min(n, 4), n // 2 :])


def _term(enc, shape, class_token=False):
  return terms.select.term_for(enc, where=call.Grid(shape, class_token))


def test_table_dense_is_the_grid_bias_matrix():
  enc = grid.make('irpe')
  params = _params(enc)
  term = _term(enc, (3, 4), True)
  assert isinstance(term, terms.grid.GridTableBias)
  np.testing.assert_array_equal(
      term.whole_bias(enc, params, 13, 13, call.Grid((3, 4), True)),
      grid.grid_bias_matrix(enc, params, (3, 4), class_token=True),
  )


def _params(enc, seed=1):
  params = enc.init(jax.random.key(seed), num_heads=HEADS, head_dim=HEAD_DIM, model_dim=HEADS * HEAD_DIM)
  # Learned tables start at zero: randomise every leaf so a wrong gather cannot hide.
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed + 7), len(leaves))
  noisy = [
      x + 0.5 * jax.random.normal(key, x.shape, x.dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x
      for x, key in zip(leaves, keys)
  ]
  return jax.tree.unflatten(tree, noisy)


def _qkv(n, seed=0):
  keys = jax.random.split(jax.random.key(seed), 3)
  return [jax.random.normal(key, (2, n, HEADS, HEAD_DIM), jnp.float32) for key in keys]


@pytest.mark.parametrize('spec', SPECS)
@pytest.mark.parametrize(
    'shape, class_token, block_size, padded',
    [((3, 4), False, 4, False), ((3, 5), True, (4, 7), True), ((5, 3), True, 3, False)],
)
def test_blockwise_table_equals_explicit_in_outputs_and_gradients(spec, shape, class_token, block_size, padded):
  """16 tokens (a grid of 3 x 5 + class) in tiles of 4 x 7: padded query and key tiles; `padded` adds a key mask."""
  enc = grid.make(spec)
  params = _params(enc)
  n = int(np.prod(shape)) + int(class_token)
  q, k, v = _qkv(n)
  key_mask = None
  if padded:
    key_mask = jnp.arange(n)[None, :] < jnp.asarray([[n], [n - 3]])

  def loss(q, k, v, params, implementation):
    if implementation == 'blockwise':  # the part itself, on the grid: its Term gathers each tile from its table
      inputs = call.AttentionInputs.checked(q, k, v, call.Grid(shape, class_token), key_mask=key_mask)
      parts, part_params = (enc,), [params]
    else:
      bias = grid.grid_bias_matrix(enc, params, shape, class_token=class_token)
      inputs = call.AttentionInputs.checked(q, k, v, key_mask=key_mask, bias=bias)
      parts, part_params = (), []
    out = functional.attend(
        inputs,
        parts,
        part_params,
        call.AttentionSettings.checked(
            implementation=implementation, block_size=block_size if implementation == 'blockwise' else None
        ),
    )
    return jnp.sum(jnp.sin(out) * jnp.arange(out.size).reshape(out.shape) / out.size), out

  grad = jax.grad(loss, argnums=(0, 1, 2, 3), has_aux=True)
  (g_explicit, out_explicit), (g_tiled, out_tiled) = grad(q, k, v, params, 'einsum'), grad(q, k, v, params, 'blockwise')
  np.testing.assert_allclose(out_tiled, out_explicit, rtol=1e-5, atol=1e-5)
  for a, b in zip(jax.tree.leaves(g_tiled), jax.tree.leaves(g_explicit)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  # The encoder's gradient is not vacuous (alibi2d's slopes are fixed: no params).
  assert spec == 'alibi2d' or max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(g_tiled[3])) > 1e-6


def test_a_grid_of_other_tokens_is_refused_by_name():
  q, k, v = _qkv(13)
  with pytest.raises(ValueError, match='positions.*12 tokens of the grid'):
    call.AttentionInputs.checked(q, k, v, call.Grid((3, 4)))


def test_grid_bias_table_refuses_a_query_dependent_encoder():
  enc = grid.make('fire2d')
  with pytest.raises(ValueError, match='fire2d.*no table'):
    grid.grid_bias_table(enc, _params(enc), (3, 4))


@pytest.mark.parametrize('spec', SPECS)
def test_layer_blockwise_equals_explicit_with_padding_and_odd_tiles(spec):
  """The layer's grid branch (grid_shape, class token, a padding mask) in tiles of 5 x 3 against implementation
  einsum: outputs and gradients w.r.t. x and every parameter (projections and the encoder's)."""
  layers = {}
  for impl, kw in [('einsum', {}), ('blockwise', {'block_size': (5, 3)})]:
    layers[impl] = RelativeMultiHeadAttention(
        HEADS, HEADS * HEAD_DIM, grid.make(spec), rngs=nnx.Rngs(0), implementation=impl, **kw
    )
    for p in layers[impl].position_params:  # randomised alike in both layers
      for j, var in enumerate(jax.tree.leaves(p, is_leaf=lambda x: isinstance(x, nnx.Variable))):
        var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(j), var[...].shape)
  x = jax.random.normal(jax.random.key(3), (2, 13, HEADS * HEAD_DIM))
  mask = jnp.arange(13)[None, :] < jnp.asarray([[13], [10]])

  def loss(layer, x):
    return jnp.sum(jnp.sin(layer(x, grid_shape=(3, 4), class_token=True, padding_mask=mask)))

  np.testing.assert_allclose(
      layers['blockwise'](x, grid_shape=(3, 4), class_token=True, padding_mask=mask),
      layers['einsum'](x, grid_shape=(3, 4), class_token=True, padding_mask=mask),
      rtol=1e-5,
      atol=1e-5,
  )
  (g1, gx1), (g2, gx2) = [nnx.grad(loss, argnums=(0, 1))(layers[i], x) for i in ('einsum', 'blockwise')]
  np.testing.assert_allclose(gx2, gx1, rtol=1e-4, atol=1e-5)
  for a, b in zip(jax.tree.leaves(nnx.state(g2)), jax.tree.leaves(nnx.state(g1))):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _spy_attend(monkeypatch):
  seen = []
  attend = functional.attend

  def spy(*args, **kwargs):
    seen.append(args)
    return attend(*args, **kwargs)

  monkeypatch.setattr(functional, 'attend', spy)
  return seen


def test_layer_hands_attend_the_table_not_the_matrix(monkeypatch):
  """Given a static grid_shape the layer hands attend the grid (no precomputed bias): each bias part's Term is
  the table of its distinct offsets (H, 5 x 7), which the blockwise kernel gathers tiles from."""
  seen = _spy_attend(monkeypatch)
  layer = RelativeMultiHeadAttention(
      HEADS, HEADS * HEAD_DIM, grid.from_spec('alibi2d + irpe'), rngs=nnx.Rngs(0), implementation='blockwise'
  )
  layer(jax.random.normal(jax.random.key(0), (1, 12, HEADS * HEAD_DIM)), grid_shape=(3, 4))
  inputs, parts, params, _ = seen[-1]
  assert inputs.bias is None and inputs.positions == call.Grid((3, 4))
  chosen = [terms.select.term_for(part, where=inputs.positions) for part in parts]
  assert [type(t) for t in chosen] == [terms.grid.GridTableBias] * 2
  ctx = terms.base.Context(12, 12, 0, query=inputs.query)
  assert [t.prepare(part, p, ctx).shape for t, part, p in zip(chosen, parts, params)] == [(HEADS, 5 * 7)] * 2


def _temp_bytes(fn, *args):
  return jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_blockwise_fwd_bwd_memory_holds_no_length_squared_buffer():
  """At 32 x 32 = 1,024 tokens (compiled, not run): the explicit fwd+bwd holds (H, L, L) float32 arrays (8 MiB
  each); the blockwise one with the table holds tiles of 128 x 128 and the (H, 63 x 63) table: its temp memory
  stays under one (H, L, L) array and far below the explicit path's."""
  shape, n = (32, 32), 1024
  enc = grid.make('alibi2d')
  params = _params(enc)
  q, k, v = _qkv(n)
  q, k, v = q[:1], k[:1], v[:1]

  def fwd_bwd(implementation):
    def loss(q, k, v, params):
      if implementation == 'blockwise':
        inputs, parts, part_params = call.AttentionInputs.checked(q, k, v, call.Grid(shape)), (enc,), [params]
      else:
        bias = grid.grid_bias_matrix(enc, params, shape)
        inputs, parts, part_params = call.AttentionInputs.checked(q, k, v, bias=bias), (), []
      out = functional.attend(
          inputs,
          parts,
          part_params,
          call.AttentionSettings.checked(
              implementation=implementation, block_size=128 if implementation == 'blockwise' else None
          ),
      )
      return jnp.sum(out**2)

    return jax.grad(loss, argnums=(0, 1, 2, 3))

  explicit = _temp_bytes(fwd_bwd('einsum'), q, k, v, params)
  tiled = _temp_bytes(fwd_bwd('blockwise'), q, k, v, params)
  one_square = HEADS * n * n * 4
  assert explicit >= one_square
  assert tiled < one_square / 4, (tiled, one_square)
  assert tiled < 0.05 * explicit, (tiled, explicit)


# ---- fire2d: a query-dependent grid bias (no table of offsets), evaluated per tile on the tile's own pairs


def test_pair_part_dense_is_the_grid_bias_matrix():
  """fire2d's per-pair form over every pair (what a tile evaluates on its block) equals grid_bias_matrix, whose
  pair_bias reads the class token's sentinel coordinates; and alone it is not block-Toeplitz (the reason it
  has no table)."""
  enc = grid.make('fire2d')
  for shape, class_token in [((3, 4), True), ((2, 3, 2), False)]:
    enc_s = grid.make('fire2d', axes=len(shape))
    p = _params(enc_s)
    term = _term(enc_s, shape, class_token)
    assert isinstance(term, terms.grid.GridPairBias)
    n = int(np.prod(shape)) + int(class_token)
    np.testing.assert_allclose(
        term.whole_bias(enc_s, p, n, n, call.Grid(shape, class_token)),
        grid.grid_bias_matrix(enc_s, p, shape, class_token=class_token),
        rtol=1e-6,
        atol=1e-6,
    )
  # L = 2 at init: pairs (1, 0) and (11, 10) share the offset (0, 1), not the normaliser psi(max(|p_i|, L)):
  # |(0, 1)| = 1 < L, |(2, 3)| = 3.6 > L.
  fresh = enc.init(jax.random.key(0), num_heads=HEADS, head_dim=HEAD_DIM, model_dim=HEADS * HEAD_DIM)
  dense = _term(enc, (3, 4)).whole_bias(enc, fresh, 12, 12, call.Grid((3, 4)))
  assert not np.allclose(dense[:, 1, 0], dense[:, 11, 10], atol=1e-4)


def test_grid_coordinates_are_raster_order():
  shape = (2, 3, 2)
  got = terms.grid.grid_coordinates(jnp.arange(1, 13), shape, True)
  np.testing.assert_array_equal(got, grid.grid_positions(shape))


@pytest.mark.parametrize(
    'shape, class_token, block_size, padded, with_table',
    [((3, 4), False, 4, False, False), ((3, 5), True, (4, 7), True, True), ((5, 3), True, 3, False, False)],
)
def test_blockwise_fire2d_equals_explicit_in_outputs_and_gradients(shape, class_token, block_size, padded, with_table):
  """fire2d per tile (alone, or beside alibi2d's table) against the explicit path's (H, L, L) bias:
  outputs and gradients w.r.t. q, k, v and fire2d's MLP, c and threshold, for odd tiles, padding, a class token."""
  fire = grid.make('fire2d')
  alibi = grid.make('alibi2d')
  params = (_params(fire), _params(alibi))
  n = int(np.prod(shape)) + int(class_token)
  q, k, v = _qkv(n)
  key_mask = None
  if padded:
    key_mask = jnp.arange(n)[None, :] < jnp.asarray([[n], [n - 3]])

  def loss(q, k, v, params, implementation):
    if implementation == 'blockwise':  # the parts themselves, on the grid: fire2d per tile, alibi2d's table
      inputs = call.AttentionInputs.checked(q, k, v, call.Grid(shape, class_token), key_mask=key_mask)
      parts, part_params = ((fire, alibi), list(params)) if with_table else ((fire,), [params[0]])
    else:
      bias = grid.grid_bias_matrix(fire, params[0], shape, class_token=class_token)
      if with_table:
        bias = bias + grid.grid_bias_matrix(alibi, params[1], shape, class_token=class_token)
      inputs = call.AttentionInputs.checked(q, k, v, key_mask=key_mask, bias=bias)
      parts, part_params = (), []
    out = functional.attend(
        inputs,
        parts,
        part_params,
        call.AttentionSettings.checked(
            implementation=implementation, block_size=block_size if implementation == 'blockwise' else None
        ),
    )
    return jnp.sum(jnp.sin(out) * jnp.arange(out.size).reshape(out.shape) / out.size), out

  grad = jax.grad(loss, argnums=(0, 1, 2, 3), has_aux=True)
  (g_explicit, out_explicit), (g_tiled, out_tiled) = grad(q, k, v, params, 'einsum'), grad(q, k, v, params, 'blockwise')
  np.testing.assert_allclose(out_tiled, out_explicit, rtol=1e-5, atol=1e-5)
  for a, b in zip(jax.tree.leaves(g_tiled), jax.tree.leaves(g_explicit)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  # Not vacuous: every fire2d gradient but the output bias's (a constant per head and query row, which the softmax
  # cancels: 0 on both paths).
  g_fire = g_tiled[3][0]
  for g in [g_fire['c'], g_fire['threshold_multiplier'], g_fire['mlp'][0]['kernel'], g_fire['mlp'][1]['kernel']]:
    assert float(jnp.max(jnp.abs(g))) > 1e-6


def test_layer_hands_attend_fire2d_as_a_pair_part(monkeypatch):
  """On a grid, fire2d's Term evaluates its pairs per tile (no (H, L, L) matrix), beside alibi2d's table."""
  seen = _spy_attend(monkeypatch)
  for spec, chosen in [
      ('fire2d', [terms.grid.GridPairBias]),
      ('alibi2d + fire2d', [terms.grid.GridTableBias, terms.grid.GridPairBias]),
  ]:
    layer = RelativeMultiHeadAttention(
        HEADS, HEADS * HEAD_DIM, grid.from_spec(spec), rngs=nnx.Rngs(0), implementation='blockwise'
    )
    layer(jax.random.normal(jax.random.key(0), (1, 12, HEADS * HEAD_DIM)), grid_shape=(3, 4))
    inputs, parts, _, _ = seen[-1]
    assert inputs.bias is None
    assert [type(terms.select.term_for(part, where=inputs.positions)) for part in parts] == chosen


def test_a_pair_part_of_other_heads_is_refused_by_name():
  enc = grid.make('fire2d')
  params = enc.init(jax.random.key(0), num_heads=HEADS + 1, head_dim=HEAD_DIM, model_dim=HEADS * HEAD_DIM)
  q, k, v = _qkv(12)
  with pytest.raises(ValueError, match="grid part 'fire2d' of 3 heads.*2 heads"):
    functional.attend(
        call.AttentionInputs.checked(q, k, v, call.Grid((3, 4))),
        (enc,),
        [params],
        call.AttentionSettings.checked(implementation='blockwise'),
    )


def test_blockwise_fire2d_fwd_bwd_memory_holds_no_length_squared_buffer():
  """fire2d per tile at 32 x 32 = 1,024 tokens (compiled, not run): the explicit fwd+bwd holds several (H, L, L)
  arrays (the bias, the scores, their cotangents; the MLP's piece per pair); the blockwise one evaluates the MLP
  on 128 x 128 tiles: its temp memory stays under one (H, L, L) array and below 5% of the explicit path's."""
  shape, n = (32, 32), 1024
  enc = grid.make('fire2d')
  params = _params(enc)
  q, k, v = [x[:1] for x in _qkv(n)]

  def fwd_bwd(implementation):
    def loss(q, k, v, params):
      if implementation == 'blockwise':
        inputs, parts, part_params = call.AttentionInputs.checked(q, k, v, call.Grid(shape)), (enc,), [params]
      else:
        bias = grid.grid_bias_matrix(enc, params, shape)
        inputs, parts, part_params = call.AttentionInputs.checked(q, k, v, bias=bias), (), []
      out = functional.attend(
          inputs,
          parts,
          part_params,
          call.AttentionSettings.checked(
              implementation=implementation, block_size=128 if implementation == 'blockwise' else None
          ),
      )
      return jnp.sum(out**2)

    return jax.grad(loss, argnums=(0, 1, 2, 3))

  explicit = _temp_bytes(fwd_bwd('einsum'), q, k, v, params)
  tiled = _temp_bytes(fwd_bwd('blockwise'), q, k, v, params)
  one_square = HEADS * n * n * 4
  assert explicit >= 4 * one_square
  # A tile's pieces and bias are 128 x 128 (x H) values (and its backward's copies): under one (H, L, L) array.
  assert tiled < one_square, (tiled, one_square)
  assert tiled < 0.05 * explicit, (tiled, explicit)
