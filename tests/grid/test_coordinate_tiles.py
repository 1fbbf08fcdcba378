"""Scalar grid biases per tile at explicit coordinates (relpos_jax.nn.terms.grid.GridCoordinateBias): given
positions (batch, length, axes) instead of a grid shape there is no table of distinct offsets, so each tile of the
blockwise path evaluates the encoder's own `pair_bias` on its queries' and keys' coordinates, and no (L, L) array
exists. Checked against the whole bias (`grid_bias_at_positions`, what the explicit path adds) in outputs and in the
gradients of x and every param, at coordinates that differ per batch row (int and float, shifted), with odd tiles,
padding and a class token; and the compiled memory at a 48 x 48 grid of explicit coordinates."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import grid
from relpos_jax.nn import RelativeMultiHeadAttention, functional, terms
from relpos_jax.nn import call

HEADS, DIM = 2, 16
SHAPE = (3, 5)  # 15 patches + a class token: 16 tokens, tiles of (3, 5) leave padded query and key tiles
SLOW = pytest.mark.slow
# Every scalar grid bias takes the same Term; four and a sum in the default run, the others with `pytest -m slow`.
SPECS = ['alibi2d', 'fire2d', 'swin_v2_cpb', 'kerple2d', 'alibi2d + rope_axial'] + [
    pytest.param(s, marks=SLOW) for s in ['distance2d', 'shaw2d', 'irpe', 'lookhere', 'swin', 'kerple2d + rope_mixed']
]


def _layer(spec, implementation, **kw):
  heads = 4 if spec == 'lookhere' else HEADS  # LookHere's reference assigns directions to multiples of 4 heads
  layer = RelativeMultiHeadAttention(
      heads, DIM, grid.from_spec(spec), implementation=implementation, rngs=nnx.Rngs(0), **kw
  )
  for i, p in enumerate(layer.position_params):  # off the init (zero tables, equal slopes): the tests can fail
    for j, var in enumerate(jax.tree.leaves(p, is_leaf=lambda v: isinstance(v, nnx.Variable))):
      var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(10 * i + j), var[...].shape)
  return layer


def _coordinates(dtype):
  """(2, 16, 2): a class token first in both rows; row 0 the raster grid, row 1 the grid shifted by (7, -4) with
  its patches in reverse order (int), or the grid scaled by 0.75 and shifted by (1.5, -2.25) (float)."""
  c = grid.grid_positions(SHAPE, class_token=True)
  if dtype == 'int':
    other = c.at[1:].set(c[1:][::-1] + jnp.asarray([7, -4], c.dtype))
  else:
    c = c.astype(jnp.float32)
    other = c.at[1:].set(c[1:] * 0.75 + jnp.asarray([1.5, -2.25], jnp.float32))
  return jnp.stack([c, other])


@pytest.mark.parametrize('dtype', ['int', 'float'])
@pytest.mark.parametrize('spec', SPECS)
def test_tiles_equal_the_whole_bias_in_outputs_and_gradients(spec, dtype):
  positions = _coordinates(dtype)
  n = positions.shape[1]
  x = jax.random.normal(jax.random.key(0), (2, n, DIM))
  mask = jnp.ones((2, n), bool).at[1, -4:].set(False)  # the second sequence: its last 4 patches are padding
  real = mask[:, :, None]  # the padded queries' outputs are no one's
  run = lambda m, x: m(x, positions=positions, padding_mask=mask)
  outs, grads = {}, {}
  for name, layer in (
      ('blockwise', _layer(spec, 'blockwise', block_size=(3, 5))),
      ('explicit', _layer(spec, 'einsum')),
  ):
    outs[name] = jnp.where(real, run(layer, x), 0)
    loss = lambda m, x: jnp.sum(jnp.where(real, jnp.sin(run(m, x)), 0))
    g_layer, g_x = nnx.grad(loss, argnums=(0, 1))(layer, x)
    grads[name] = (g_x, nnx.state(g_layer))
  np.testing.assert_allclose(outs['blockwise'], outs['explicit'], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(grads['blockwise'][0], grads['explicit'][0], rtol=1e-4, atol=1e-5)
  leaves, whole = jax.tree.leaves_with_path(grads['blockwise'][1]), jax.tree.leaves(grads['explicit'][1])
  assert len(leaves) == len(whole)
  for (path, a), b in zip(leaves, whole):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=jax.tree_util.keystr(path))
  if jax.tree.leaves(grads['blockwise'][1].get('position_params', {})):  # alibi2d's slopes are fixed: no params
    position = jax.tree.leaves(grads['blockwise'][1]['position_params'])
    assert max(np.abs(np.asarray(g)).max() for g in position) > 1e-4


def test_the_tiles_evaluate_the_encoders_pair_bias():
  """attend with `with_coordinates` equals softmax(q . k * scale + grid_bias_at_positions) v, by hand, and the
  class token's pairs take the encoder's class bias."""
  enc = grid.from_spec('kerple2d')
  params = enc.init(jax.random.key(1), HEADS)
  coords = _coordinates('float')
  q, k, v = (jax.random.normal(jax.random.key(s), (2, 16, HEADS, 8)) for s in (3, 4, 5))
  bias = grid.grid_bias_at_positions(enc, params, coords, coords)
  np.testing.assert_allclose(bias[:, :, 0, 1:], jnp.broadcast_to(enc.class_bias(params)[:, None], (2, HEADS, 15)))
  logits = jnp.einsum('bihd,bjhd->bhij', q, k) * 8**-0.5 + bias
  expected = jnp.einsum('bhij,bjhd->bihd', jax.nn.softmax(logits, -1), v)
  out = functional.attend(
      call.AttentionInputs.checked(q, k, v),
      (enc,),
      [terms.grid.with_coordinates(params, coords, coords)],
      call.AttentionSettings.checked(implementation='blockwise', block_size=(3, 5)),
  )
  np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_attend_refuses_raw_params_by_name():
  enc = grid.from_spec('alibi2d')
  params = enc.init(jax.random.key(0), HEADS)
  q = jnp.zeros((1, 4, HEADS, 8))
  with pytest.raises(ValueError, match=r"grid part 'alibi2d' reads the coordinates.*with_coordinates"):
    functional.attend(
        call.AttentionInputs.checked(q, q, q),
        (enc,),
        [params],
        call.AttentionSettings.checked(implementation='blockwise'),
    )


def _temp_mib(spec, implementation, side):
  """Compiled (not run) fwd+bwd temp memory of the layer at a side x side grid of explicit coordinates + a class
  token, in MiB."""
  n = side * side + 1
  layer = _layer(spec, implementation, **({'block_size': 128} if implementation == 'blockwise' else {}))
  graphdef, state = nnx.split(layer)
  positions = grid.grid_positions((side, side), class_token=True)[None]

  def loss(state, x):
    return jnp.sum(nnx.merge(graphdef, state)(x, positions=positions) ** 2)

  compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(state, jnp.zeros((1, n, DIM))).compile()
  return compiled.memory_analysis().temp_size_in_bytes / 2**20


@pytest.mark.parametrize('spec', ['alibi2d', 'fire2d'])
def test_blockwise_fwd_bwd_memory_holds_no_length_squared_buffer(spec):
  """At 48 x 48 explicit coordinates + a class token (compiled, not run): the blockwise layer's fwd+bwd, tiles of
  128, holds tile-sized buffers only, under one (H, L, L) float32 array (40.5 MiB at 2 heads). Measured (2 heads,
  model_dim 16, CPU): alibi2d 1.5 MiB, fire2d 5.4 MiB (explicit: 163 and 1,622 MiB); at 64 x 64 2.6 and 6.2 MiB
  (explicit 513 and 5,124 MiB). Before the per-tile form the blockwise layer held the whole (B, H, L, L) bias:
  87 and 1,541 MiB at 48 x 48, 266 and 4,868 MiB at 64 x 64."""
  side = 48
  one_square = HEADS * (side * side + 1) ** 2 * 4 / 2**20
  tiled = _temp_mib(spec, 'blockwise', side)
  assert tiled < one_square, (tiled, one_square)
