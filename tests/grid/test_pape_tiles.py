"""PaPE and PaPE-RI per tile (relpos_jax.nn.terms.grid.GridFeatureScores): the layer's grid path computes each
token's appended features once and each tile adds its queries' . keys' features (the reference's q' . k',
DTU-PAS/parabolic-position-encoding `encode_query_key`), so the blockwise path holds no (L, L) array. Checked
against the whole term (`contextual_scores`, what attention_weights adds) in outputs and in the gradients of x and
every param, with odd tiles, padding and a class token; and the compiled memory at a 48 x 48 grid."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import grid
from relpos_jax.nn import RelativeMultiHeadAttention, functional, terms
from relpos_jax.nn import call
from relpos_jax.nn.attention import merge_heads

HEADS, DIM = 2, 16
SHAPE = (3, 5)  # 15 patches + a class token: 16 tokens, tiles of (3, 5) leave padded query and key tiles
SPECS = ['pape(parabolas=3)', 'pape_ri']


def _layer(spec, implementation, **kw):
  layer = RelativeMultiHeadAttention(
      HEADS, DIM, grid.from_spec(spec), implementation=implementation, rngs=nnx.Rngs(0), **kw
  )
  for i, p in enumerate(layer.position_params):  # larger than the init: a term that dominates the logits
    for j, var in enumerate(jax.tree.leaves(p, is_leaf=lambda v: isinstance(v, nnx.Variable))):
      var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(10 * i + j), var[...].shape)
  return layer


def _inputs():
  n = int(np.prod(SHAPE)) + 1
  x = jax.random.normal(jax.random.key(0), (2, n, DIM))
  mask = jnp.ones((2, n), bool).at[1, -4:].set(False)  # the second sequence: its last 4 patches are padding
  return x, mask


def _whole(layer, x, mask):
  """The layer's output from the whole term: softmax(q . k / sqrt(D) + contextual_scores) (attention_weights,
  which never takes the per-tile form), times v, through the output projection."""
  w = layer.attention_weights(x, grid_shape=SHAPE, class_token=True, padding_mask=mask)
  _, _, v = layer._project(x)
  return layer.out(merge_heads(jnp.einsum('bhij,bjhd->bihd', w, v)))


@pytest.mark.parametrize('spec', SPECS)
def test_tiles_equal_the_whole_term_in_outputs_and_gradients(spec):
  x, mask = _inputs()
  tiled = _layer(spec, 'blockwise', block_size=(3, 5))
  explicit = _layer(spec, 'einsum')
  runs = {
      'blockwise': lambda m, x: m(x, grid_shape=SHAPE, class_token=True, padding_mask=mask),
      'explicit': lambda m, x: m(x, grid_shape=SHAPE, class_token=True, padding_mask=mask),
      'whole': lambda m, x: _whole(m, x, mask),
  }
  layers = {'blockwise': tiled, 'explicit': explicit, 'whole': explicit}
  real = mask[:, :, None]  # the padded queries' outputs are no one's
  outs, grads = {}, {}
  for name, run in runs.items():
    outs[name] = jnp.where(real, run(layers[name], x), 0)
    loss = lambda m, x, run=run: jnp.sum(jnp.where(real, jnp.sin(run(m, x)), 0))
    g_layer, g_x = nnx.grad(loss, argnums=(0, 1))(layers[name], x)
    grads[name] = (g_x, nnx.state(g_layer))
  for name in ('blockwise', 'explicit'):
    np.testing.assert_allclose(outs[name], outs['whole'], rtol=1e-4, atol=1e-5, err_msg=name)
    g_x, g_state = grads[name]
    np.testing.assert_allclose(g_x, grads['whole'][0], rtol=1e-4, atol=1e-5, err_msg=name)
    leaves, whole = jax.tree.leaves_with_path(g_state), jax.tree.leaves(grads['whole'][1])
    assert len(leaves) == len(whole)
    for (path, a), b in zip(leaves, whole):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f'{name} {jax.tree_util.keystr(path)}')
  position = {k: np.asarray(v[...]) for k, v in grads['blockwise'][1]['position_params'][0].items()}
  names = ['a'] if spec == 'pape_ri' else ['position', 'ab']
  for key in names:  # the features' cotangents reach the encoder's params through attend's backward
    assert np.abs(position[key]).max() > 1e-3, key


def test_attend_refuses_raw_params_by_name():
  enc = grid.from_spec('pape_ri')
  params = enc.init(jax.random.key(0), HEADS, model_dim=DIM)
  q = jnp.zeros((1, 4, HEADS, 8))
  with pytest.raises(ValueError, match=r"grid part 'pape_ri' reads per-token features.*with_features"):
    functional.attend(
        call.AttentionInputs.checked(q, q, q),
        (enc,),
        [params],
        call.AttentionSettings.checked(implementation='blockwise'),
    )


def test_with_features_is_what_the_tiles_add():
  """attend with the features of a token set equals softmax((q . k + qf . kf) * scale) v, by hand."""
  enc = grid.from_spec('pape(parabolas=2)')
  params = enc.init(jax.random.key(1), HEADS, model_dim=DIM)
  coords = jnp.broadcast_to(grid.grid_positions((2, 3)), (1, 6, 2))
  x = jax.random.normal(jax.random.key(2), (1, 6, DIM))
  qf, kf = enc.features(params, x, coords, coords)
  q, k, v = (jax.random.normal(jax.random.key(s), (1, 6, HEADS, 8)) for s in (3, 4, 5))
  scale = 8**-0.5
  logits = (jnp.einsum('bihd,bjhd->bhij', q, k) + jnp.einsum('bhif,bhjf->bhij', qf, kf)) * scale
  expected = jnp.einsum('bhij,bjhd->bihd', jax.nn.softmax(logits, -1), v)
  out = functional.attend(
      call.AttentionInputs.checked(q, k, v),
      (enc,),
      [terms.grid.with_features(qf, kf)],
      call.AttentionSettings.checked(implementation='blockwise', block_size=(4, 4)),
  )
  np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def _temp_bytes(fn, *args):
  return jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize('spec', ['pape', 'pape_ri'])  # pape: the reference's 50 parabolas, F = 152
def test_blockwise_fwd_bwd_memory_holds_no_length_squared_buffer(spec):
  """At 48 x 48 + a class token (compiled, not run): the blockwise layer's fwd+bwd, tiles of 128, holds tile-sized
  buffers and the (B, H, L, F) features, under one (H, L, L) float32 array (40.5 MiB at 2 heads). Measured (2
  heads, model_dim 16, CPU): pape 19.6 MiB, pape_ri 1.9 MiB (explicit: 172 and 163 MiB); at 64 x 64 34.3 and 3.3
  MiB (explicit 530 and 513); at 128 x 128 135 and 13 MiB against 8,266 and 8,198 MiB explicit (1.6% and 0.16%).
  Before the per-tile form the blockwise layer held the whole (B, H, L, L) term: 142 and 132 MiB at 48 x 48."""
  side = 48
  n = side * side + 1
  layer = _layer(spec, 'blockwise', block_size=128)
  graphdef, state = nnx.split(layer)

  def loss(state, x):
    return jnp.sum(nnx.merge(graphdef, state)(x, grid_shape=(side, side), class_token=True) ** 2)

  tiled = _temp_bytes(jax.grad(loss, argnums=(0, 1)), state, jnp.zeros((1, n, DIM)))
  one_square = HEADS * n * n * 4
  assert tiled < one_square, (tiled, one_square)
