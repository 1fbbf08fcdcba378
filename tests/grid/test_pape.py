"""PaPE and PaPE-RI against a numpy transcription of DTU-PAS/parabolic-position-encoding (commit 21cb390):
pape/nn/positions/pape.py and pape_ri.py `encode_query_key` (the features appended to q and k), the logits of
pape/nn/encoder.py `Attention.forward` ((q' . k') * head_size^-0.5), and the positions of image_classifier.py /
video_classifier.py (patches 1 .. n per axis, the class token at 0). Then the properties: translation (and for
PaPE-RI rotation) invariance, finite gradients, the blockwise path, the layer and a tiny ViT."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders, grid
from relpos_jax.nn import RelativeMultiHeadAttention, ViT
from relpos_jax.nn.attention import variable_values

H, D, MODEL = 4, 8, 16


def _randomize(params, seed=1, std=0.7):
  """Every learned array replaced by random normals (so curvatures, tilts and directions all vary)."""
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  return jax.tree.unflatten(tree, [std * jax.random.normal(k, jnp.shape(x)) for k, x in zip(keys, leaves)])


def _softplus(x):
  return np.logaddexp(0.0, x)


# ---------------------------------------------------------------------------------------------------------
# The reference, transcribed (torch -> numpy): shapes (B, H, L, D) as its attention holds q and k.


def ref_pape_encode_query_key(w_position, w_ab, hidden_state, query, key, positions, num_heads, num_parabolas):
  """pape.py ParabolicPositionEncoder.encode_query_key; w_position (H M, P) and w_ab (2 H M, hidden) are the
  nn.Linear weights (y = x W^T). positions (1, L, P) as prepare_positions gives them."""
  batch_size, seq_length, _ = positions.shape
  pos = positions.astype(np.float64) @ w_position.T
  pos = pos.reshape(batch_size, seq_length, num_heads, num_parabolas).transpose(0, 2, 1, 3)
  squared = pos**2
  batch_size, seq_length = key.shape[0], key.shape[2]
  pos = np.broadcast_to(pos, (batch_size,) + pos.shape[1:])
  squared = np.broadcast_to(squared, (batch_size,) + squared.shape[1:])
  ab = hidden_state @ w_ab.T
  ab = ab.reshape(batch_size, seq_length, 2, num_heads, num_parabolas).transpose(2, 0, 3, 1, 4)
  a, b = _softplus(ab[0]), ab[1]
  neg_squared = -squared
  ones = np.ones((batch_size, num_heads, seq_length, 1))
  dot = lambda x, y: (x * y).sum(-1, keepdims=True)
  query = np.concatenate([query, dot(a, neg_squared), a, a * 2 * pos, dot(b, pos), b], -1)
  key = np.concatenate([key, ones, neg_squared, pos, ones, -pos], -1)
  return query, key


def ref_pape_ri_encode_query_key(position_scales, w_a, hidden_state, query, key, positions, num_heads):
  """pape_ri.py ParabolicRotationInvariantPositionEncoder.encode_query_key; position_scales (H,) the buffer,
  w_a (H, hidden) the nn.Linear weight."""
  num_positions = positions.shape[-1]
  pos = positions.astype(np.float64)[:, None] * position_scales.reshape(1, num_heads, 1, 1)
  squared = pos**2
  batch_size, seq_length = key.shape[0], key.shape[2]
  pos = np.broadcast_to(pos, (batch_size,) + pos.shape[1:])
  squared = np.broadcast_to(squared, (batch_size,) + squared.shape[1:])
  a = (hidden_state @ w_a.T).reshape(batch_size, seq_length, num_heads).transpose(0, 2, 1)
  a = np.broadcast_to(_softplus(a)[..., None], (batch_size, num_heads, seq_length, num_positions))
  ones = np.ones((batch_size, num_heads, seq_length, 1))
  dot = lambda x, y: (x * y).sum(-1, keepdims=True)
  query = np.concatenate([query, dot(a, -squared), a, a * 2 * pos], -1)
  key = np.concatenate([key, ones, -squared, pos], -1)
  return query, key


def ref_image_positions(num_rows, num_cols, class_token=True):
  """image_classifier.py: (col, row), each from 1; the class token at (0, 0)."""
  rows, cols = np.arange(1, num_rows + 1), np.arange(1, num_cols + 1)
  positions = np.stack([np.tile(cols, num_rows), np.repeat(rows, num_cols)], -1)[None]
  return np.concatenate([np.zeros((1, 1, 2)), positions], 1) if class_token else positions


def ref_video_positions(num_times, num_rows, num_cols):
  """video_classifier.py: (time, row, col), each from 1; the class token at (0, 0, 0)."""
  mesh = np.stack(np.meshgrid(*[np.arange(1, n + 1) for n in (num_times, num_rows, num_cols)], indexing='ij'), -1)
  return np.concatenate([np.zeros((1, 1, 3)), mesh.reshape(1, -1, 3)], 1)


def _content(length, batch=2, seed=3):
  k = jax.random.split(jax.random.key(seed), 3)
  x = jax.random.normal(k[0], (batch, length, MODEL))
  q = jax.random.normal(k[1], (batch, length, H, D))
  kk = jax.random.normal(k[2], (batch, length, H, D))
  return x, q, kk


def _ours_logits(enc, params, x, q, k, coords):
  """The reference's logits from ours: (q . k) / sqrt(D) plus the score term (B, H, L, L)."""
  scale = D**-0.5
  content = jnp.einsum('bihd,bjhd->bhij', q, k) * scale
  return np.asarray(content + enc.contextual_scores(params, q, k, coords, coords, scale, inputs=x), np.float64)


def _ref_logits(query, key):
  return np.einsum('bhid,bhjd->bhij', query, key) * D**-0.5


@pytest.mark.parametrize(
    'shape, parabolas',
    [((3, 4), 5), ((2, 2, 3), 3)],
)
def test_pape_matches_reference(shape, parabolas):
  axes = len(shape)
  enc = grid.make('pape', axes=axes, parabolas=parabolas)
  params = _randomize(enc.init(jax.random.key(0), H, model_dim=MODEL))
  coords = grid.grid_positions(shape, class_token=True)[None]
  n = coords.shape[1]
  x, q, k = _content(n)
  ours = _ours_logits(enc, params, x, q, k, jnp.broadcast_to(coords, (2, n, axes)))
  # Our (axes, H, M) direction table is the reference's Linear(axes, H M) weight transposed; the image layout
  # lists (col, row), ours (row, col), so its weight reads our axes reversed.
  w_position = np.asarray(params['position'], np.float64).reshape(axes, -1).T
  if axes == 2:
    positions, w_position = ref_image_positions(*shape), w_position[:, ::-1]
  else:
    positions = ref_video_positions(*shape)
  w_ab = np.asarray(params['ab'], np.float64).reshape(MODEL, -1).T
  qt, kt = (np.asarray(a, np.float64).transpose(0, 2, 1, 3) for a in (q, k))
  query, key = ref_pape_encode_query_key(w_position, w_ab, np.asarray(x, np.float64), qt, kt, positions, H, parabolas)
  assert query.shape[-1] == D + enc.feature_size() == D + 3 * parabolas + 2
  np.testing.assert_allclose(ours, _ref_logits(query, key), rtol=1e-5, atol=1e-4)


def test_pape_is_a_sum_of_parabolas_of_the_offset():
  """The closed form the appended features expand: sum_m -a_i (w . delta)^2 + b_i (w . delta), delta = p_i - p_j,
  a = softplus(A x_i), b = B x_i, per head; hand-built from the params (float64), without a class token."""
  enc = grid.make('pape', parabolas=4)
  params = _randomize(enc.init(jax.random.key(0), H, model_dim=MODEL))
  coords = jnp.asarray(np.random.default_rng(0).uniform(-5, 5, (1, 7, 2)), jnp.float32)
  x = jax.random.normal(jax.random.key(1), (1, 7, MODEL))
  ours = np.asarray(enc.parabola_term(params, x, coords, coords))[0]  # (H, L, L)
  c, w = np.asarray(coords, np.float64)[0], np.asarray(params['position'], np.float64)
  ab = np.einsum('ld,dchm->chlm', np.asarray(x, np.float64)[0], np.asarray(params['ab'], np.float64))
  a, b = _softplus(ab[0]), ab[1]  # (H, L, M)
  du = np.einsum('ija,ahm->hijm', c[:, None] - c[None], w)
  expected = np.sum(-a[:, :, None] * du**2 + b[:, :, None] * du, -1)
  np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-4)
  # Distance decay: a > 0, so every head's term is concave along each direction (it falls far from the query).
  assert (a > 0).all()


@pytest.mark.parametrize('shape', [(3, 4), (2, 2, 3)])
def test_pape_ri_matches_reference(shape):
  axes = len(shape)
  enc = grid.make('pape_ri', axes=axes)
  params = enc.init(jax.random.key(0), H, model_dim=MODEL)
  params = {**params, 'a': _randomize({'a': params['a']})['a']}
  coords = grid.grid_positions(shape, class_token=True)[None]
  n = coords.shape[1]
  x, q, k = _content(n)
  ours = _ours_logits(enc, params, x, q, k, jnp.broadcast_to(coords, (2, n, axes)))
  positions = ref_image_positions(*shape) if axes == 2 else ref_video_positions(*shape)
  qt, kt = (np.asarray(a, np.float64).transpose(0, 2, 1, 3) for a in (q, k))
  scales = np.asarray(params['position_scales'], np.float64)
  w_a = np.asarray(params['a'], np.float64).T
  query, key = ref_pape_ri_encode_query_key(scales, w_a, np.asarray(x, np.float64), qt, kt, positions, H)
  assert query.shape[-1] == D + enc.feature_size() == D + 2 * axes + 1
  np.testing.assert_allclose(ours, _ref_logits(query, key), rtol=1e-5, atol=1e-4)
  # Closed form: -a_i s_h^2 |p_i - p_j|^2 (the class token at the reference's 0, one step before the patches).
  a = _softplus(np.einsum('bld,dh->bhl', np.asarray(x, np.float64), np.asarray(params['a'], np.float64)))
  dist2 = ((positions[0][:, None] - positions[0][None]) ** 2).sum(-1)
  expected = -a[..., None] * (scales**2)[None, :, None, None] * dist2
  np.testing.assert_allclose(np.asarray(enc.parabola_term(params, x, coords, coords)), expected, rtol=1e-5, atol=1e-4)


def test_init_is_pytorch_linear_and_the_ri_scales_are_fixed():
  enc = grid.make('pape', parabolas=50)
  p = enc.init(jax.random.key(0), H, model_dim=64)
  assert p['position'].shape == (2, H, 50) and p['ab'].shape == (64, 2, H, 50)
  assert np.abs(p['position']).max() <= 2**-0.5 and np.abs(p['ab']).max() <= 64**-0.5
  assert np.abs(p['position']).max() > 0.6 * 2**-0.5  # uniform over the whole bound, not a narrow normal
  ri = grid.make('pape_ri', axes=3).init(jax.random.key(0), H, model_dim=64)
  assert ri['position_scales'].shape == (H,) and np.abs(ri['position_scales']).max() <= 3**-0.5
  assert ri['a'].shape == (64, H)


# ---------------------------------------------------------------------------------------------------------
# Properties, through the attention layer's grid path.

DIM = 32
SHAPE = (3, 4)


def _layer(spec, **kw):
  layer = RelativeMultiHeadAttention(H, DIM, grid.from_spec(spec), rngs=nnx.Rngs(0), **kw)
  for i, p in enumerate(layer.position_params):  # larger parameters than the init: terms that dominate
    for j, var in enumerate(jax.tree.leaves(p, is_leaf=lambda v: isinstance(v, nnx.Variable))):
      var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(10 * i + j), var[...].shape)
  return layer


def _x(length, batch=2, seed=0):
  return jax.random.normal(jax.random.key(seed), (batch, length, DIM))


def _coords(shape=SHAPE, batch=2, class_token=False):
  c = grid.grid_positions(shape, class_token=class_token)
  return jnp.broadcast_to(c, (batch,) + c.shape)


@pytest.mark.parametrize('spec', ['pape(parabolas=4)', 'pape_ri'])
def test_translation_invariant(spec):
  layer = _layer(spec)
  enc, params = layer.encoder, variable_values(layer.position_params[0])
  x = _x(12)
  coords = _coords()
  base = layer(x, positions=coords)
  for shift in [(5, -3), (-40, 17), (1000, 2000)]:
    moved = coords + jnp.asarray(shift, jnp.int32)
    np.testing.assert_allclose(layer(x, positions=moved), base, rtol=1e-5, atol=1e-5)
  moved = coords.astype(jnp.float32) + jnp.asarray([0.37, -2.5])
  np.testing.assert_allclose(
      enc.parabola_term(params, x, moved, moved), enc.parabola_term(params, x, coords, coords), rtol=1e-5, atol=1e-4
  )
  # The term reads the offsets: a grid of twice the spacing (not a translation) changes it.
  wider = 2 * coords
  assert not np.allclose(
      enc.parabola_term(params, x, wider, wider), enc.parabola_term(params, x, coords, coords), atol=1e-3
  )


def test_pape_ri_is_rotation_invariant_and_pape_is_not():
  x = _x(12)
  coords = _coords().astype(jnp.float32)
  t = 0.7
  rotation = jnp.asarray([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]], jnp.float32)
  rotated = coords @ rotation.T
  for spec, invariant in [('pape_ri', True), ('pape(parabolas=4)', False)]:
    enc = grid.from_spec(spec)
    params = _randomize(enc.init(jax.random.key(0), H, model_dim=DIM))
    a, b = (np.asarray(enc.parabola_term(params, x, c, c)) for c in (coords, rotated))
    assert np.allclose(a, b, rtol=1e-4, atol=1e-4) == invariant, spec


@pytest.mark.parametrize('spec', ['pape(parabolas=4)', 'pape_ri'])
def test_blockwise_equals_explicit_in_outputs_and_gradients(spec):
  explicit = _layer(spec, implementation='einsum')
  tiled = _layer(spec, implementation='blockwise', block_size=4)
  x = _x(13)

  def loss(layer, x):
    return jnp.sum(jnp.sin(layer(x, grid_shape=SHAPE, class_token=True)))

  np.testing.assert_allclose(
      explicit(x, grid_shape=SHAPE, class_token=True), tiled(x, grid_shape=SHAPE, class_token=True), atol=1e-5
  )
  g1, g2 = nnx.grad(loss)(explicit, x), nnx.grad(loss)(tiled, x)
  for a, b in zip(jax.tree.leaves(nnx.state(g1)), jax.tree.leaves(nnx.state(g2))):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('spec', ['pape(parabolas=4)', 'pape_ri'])
def test_gradients_are_finite_and_reach_the_parabolas(spec):
  layer = _layer(spec)
  x = _x(13)

  def loss(layer, x):
    return jnp.sum(jnp.sin(layer(x, grid_shape=SHAPE, class_token=True)))

  grads = nnx.grad(loss, argnums=(0, 1))(layer, x)
  for leaf in jax.tree.leaves(grads):
    assert np.isfinite(np.asarray(leaf)).all()
  g = {k: np.asarray(v[...]) for k, v in grads[0].position_params[0].items()}
  if spec == 'pape_ri':
    assert np.abs(g['a']).max() > 0
    assert (g['position_scales'] == 0).all()  # the reference's fixed buffer: no optimizer moves it
  else:
    assert np.abs(g['position']).max() > 0 and np.abs(g['ab']).max() > 0


def test_layer_adds_the_scaled_term_of_its_input():
  """attention_weights = softmax(q . k / sqrt(D) + the term of the layer input x): the layer passes x (not q) to
  the encoder, and the grid shape, explicit coordinates and attention_weights agree."""
  layer = _layer('pape(parabolas=4) + rope_axial')
  x = _x(13)
  w = layer.attention_weights(x, grid_shape=SHAPE, class_token=True)
  coords = _coords(class_token=True)
  q, k, _ = layer._project(x)
  pape, rope = layer.encoder.parts
  params = [variable_values(p) for p in layer.position_params]
  q, k = (rope.rotate(params[1], a, coords) for a in (q, k))
  scale = (DIM // H) ** -0.5
  logits = jnp.einsum('bihd,bjhd->bhij', q, k) * scale + pape.parabola_term(params[0], x, coords, coords) * scale
  np.testing.assert_allclose(w, jax.nn.softmax(logits, -1), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(
      layer(x, grid_shape=SHAPE, class_token=True), layer(x, positions=coords), rtol=2e-5, atol=2e-5
  )


@pytest.mark.parametrize(
    'spec',
    ['pape(parabolas=4)']
    + [pytest.param(s, marks=pytest.mark.slow) for s in ['pape_ri', 'pape(parabolas=2) + rope_axial', 'pape(axes=3)']],
)
def test_tiny_vit_forward(spec):
  model = ViT(encoder=spec, num_classes=3, patch_size=2, model_dim=32, num_heads=2, num_layers=1, rngs=nnx.Rngs(0))
  for side in (6, 10):  # the grid it would train at and a larger one (any grid: it extrapolates)
    logits, entropy = model(jax.random.normal(jax.random.key(side), (2, side, side, 1)), return_entropy=True)
    assert logits.shape == (2, 3) and entropy.shape == (1,)  # one mean entropy per layer
    assert np.isfinite(np.asarray(logits)).all() and np.isfinite(np.asarray(entropy)).all()


# ---------------------------------------------------------------------------------------------------------
# Specs and refusals.


def test_specs_round_trip():
  for spec in [
      'pape',
      'pape(parabolas=8)',
      'pape(axes=3, parabolas=1)',
      'pape_ri',
      'pape_ri(axes=3)',
      'pape + rope_axial',
  ]:
    enc = grid.from_spec(spec)
    assert grid.from_spec(grid.to_spec(enc)) == enc and repr(enc) == grid.to_spec(enc)
  assert grid.to_spec(grid.make('pape', parabolas=50)) == 'pape'
  assert {'pape', 'pape_ri'} <= set(grid.names()) and not {'pape', 'pape_ri'} & set(encoders.names())


def test_refusals_name_the_key():
  with pytest.raises(ValueError, match=r'pape.*parabolas.*0.*an int >= 1 and <= 4096'):
    grid.make('pape', parabolas=0)
  with pytest.raises(ValueError, match=r'pape.*parabolas'):
    grid.make('pape', parabolas=10**5)
  with pytest.raises(ValueError, match=r'pape: parabolas=2.5 is invalid; allowed: an int'):
    grid.make('pape', parabolas=2.5)
  with pytest.raises(ValueError, match=r'pape_ri.*axes.*one of \(2, 3\)'):
    grid.make('pape_ri', axes=1)
  with pytest.raises(ValueError, match=r"pape_ri: unknown hyperparameter\(s\) \['parabolas'\]; allowed: \['axes'\]"):
    grid.make('pape_ri', parabolas=3)
  enc = grid.make('pape', parabolas=2)
  params = enc.init(jax.random.key(0), H, model_dim=MODEL)
  x = jnp.zeros((1, 9, MODEL))
  # 1-D positions, to the encoder and to the layer: refused by name.
  with pytest.raises(
      ValueError, match=r'pape: q_pos must be coordinates with a trailing axis of 2.*got shape \(1, 9\)'
  ):
    enc.parabola_term(params, x, jnp.arange(9)[None], jnp.arange(9)[None])
  layer = RelativeMultiHeadAttention(H, DIM, enc, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r"\['pape'\] read coordinates"):
    layer(_x(9, batch=1), positions=jnp.arange(9)[None])
  # The content the parabolas read: the layer input, of model_dim features.
  with pytest.raises(ValueError, match=r'pape.*inputs.*model_dim=16'):
    enc.parabola_term(params, None, _coords(batch=1), _coords(batch=1))
  with pytest.raises(ValueError, match=r'pape.*inputs.*model_dim=16'):
    enc.parabola_term(params, jnp.zeros((1, 12, 5)), _coords(batch=1), _coords(batch=1))
  with pytest.raises(ValueError, match=r'pape: model_dim=None is invalid; allowed: an int >= 1'):
    enc.init(jax.random.key(0), H)
