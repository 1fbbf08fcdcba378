"""relpos_jax.nn.ViT: the interface the resolution study codes against (shapes, pools, any grid size, entropy)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from relpos_jax.nn import ViT


def _images(b=2, h=6, w=6, c=1, seed=0):
  return jax.random.normal(jax.random.key(seed), (b, h, w, c))


@pytest.mark.parametrize(
    'encoder, pool',
    [('irpe', 'cls'), ('rope_axial', 'mean'), ('mrope', 'none'), ('nope', 'mean'), ('sincos2d + alibi2d', 'cls')],
)
def test_shapes_at_two_grid_sizes(encoder, pool):
  model = ViT(encoder=encoder, num_classes=5, patch_size=2, model_dim=32, num_heads=2, rngs=nnx.Rngs(0), pool=pool)
  for side in (4, 8):
    logits, entropy = model(_images(h=side, w=side), return_entropy=True)
    expected = (2, side // 2, side // 2, 5) if pool == 'none' else (2, 5)
    assert logits.shape == expected and entropy.shape == (2,)
    assert np.isfinite(np.asarray(logits)).all()
    assert model(_images(h=side, w=side)).shape == expected


def test_entropy_is_log_n_for_uniform_attention():
  """NoPE on a constant image: every token looks the same, so attention is uniform over the N tokens."""
  model = ViT(encoder='nope', num_classes=2, rngs=nnx.Rngs(0), pool='mean')
  _, entropy = model(jnp.ones((1, 3, 4, 1)), return_entropy=True)
  np.testing.assert_allclose(entropy, np.log(12.0) * np.ones(2), rtol=1e-5)
  # ALiBi-2D on a constant image: tokens stay identical, so each head attends by softmax(-m_h |p_i - p_j|) alone.
  _, sharp = ViT(encoder='alibi2d', num_classes=2, rngs=nnx.Rngs(0))(jnp.ones((1, 3, 4, 1)), return_entropy=True)
  p = np.stack(np.meshgrid(np.arange(3), np.arange(4), indexing='ij'), -1).reshape(-1, 2)
  dist = np.sqrt(((p[:, None] - p[None]) ** 2).sum(-1))
  expected = []
  for m in [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]:
    w = np.exp(-m * dist) / np.exp(-m * dist).sum(-1, keepdims=True)
    expected.append(-(w * np.log(w)).sum(-1).mean())
  np.testing.assert_allclose(sharp, np.mean(expected) * np.ones(2), rtol=1e-5)


def test_per_layer_encoders_and_one_d_encoders():
  model = ViT(encoder='(rope_mixed, swin_v2_cpb, rope)', num_classes=3, num_layers=3, rngs=nnx.Rngs(0))
  assert [e.name for e in model.layer_encoders] == ['rope_mixed', 'swin_v2_cpb', 'rope']
  assert model(_images()).shape == (2, 3)
  # rope_mixed's frequencies are per layer: two layers, two independent draws.
  two = ViT(encoder='rope_mixed', num_classes=3, rngs=nnx.Rngs(0))
  f0 = two.blocks[0].attention.position_params[0]['freqs'][...]
  f1 = two.blocks[1].attention.position_params[0]['freqs'][...]
  assert not np.allclose(f0, f1)


def test_pooling_is_permutation_aware_only_through_positions():
  """With a relative encoder, flipping the image changes the logits (positions are read)."""
  model = ViT(encoder='irpe(method=cross)', num_classes=3, rngs=nnx.Rngs(1))
  model.blocks[0].attention.position_params[0]['table'][...] = jax.random.normal(jax.random.key(3), (2, 1, 8))
  x = _images(h=4, w=5)
  assert not np.allclose(model(x), model(x[:, ::-1]), atol=1e-5)


def test_refusals():
  with pytest.raises(ValueError, match='pool'):
    ViT(encoder='irpe', num_classes=3, pool='max', rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match='encoder.*grid encoder spec'):
    ViT(encoder='no_such_encoder', num_classes=3, rngs=nnx.Rngs(0))
  model = ViT(encoder='swin(window=3)', num_classes=3, patch_size=2, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match='multiples of patch_size=2'):
    model(_images(h=5, w=6))
  with pytest.raises(ValueError, match='in_channels=1'):
    model(_images(c=3))
  model(_images(h=6, w=6))
  with pytest.raises(ValueError, match='swin.*beyond the learned table'):
    model(_images(h=8, w=8))
  with pytest.raises(ValueError, match='max_length'):
    ViT(encoder='learned(max_length=10)', num_classes=3, rngs=nnx.Rngs(0))(_images(h=4, w=4))


def test_trains_under_jit():
  model = ViT(encoder='irpe + rope_axial', num_classes=2, model_dim=32, num_heads=2, rngs=nnx.Rngs(0))
  optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
  x = _images(b=8, h=4, w=4)
  y = (x[:, 0, 0, 0] > 0).astype(jnp.int32)

  @nnx.jit
  def step(model, optimizer):
    def loss(model):
      return optax.softmax_cross_entropy_with_integer_labels(model(x, train=True), y).mean()

    value, grads = nnx.value_and_grad(loss)(model)
    optimizer.update(model, grads)
    return value

  losses = [float(step(model, optimizer)) for _ in range(15)]
  assert losses[-1] < losses[0]


def test_weight_decay_mask_excludes_position_parameters():
  from relpos_jax.nn.vit import weight_decay_mask

  model = ViT(encoder='rope_mixed + irpe', num_classes=2, pool='cls', rngs=nnx.Rngs(0))
  mask = weight_decay_mask(nnx.state(model, nnx.Param))
  flat = {tuple(k): v.get_value() if isinstance(v, nnx.Variable) else v for k, v in nnx.to_flat_state(mask)}
  assert flat[('blocks', 0, 'attention', 'position_params', 0, 'freqs')] is False
  assert flat[('blocks', 1, 'attention', 'position_params', 1, 'table')] is False
  assert flat[('cls_token',)] is False and flat[('head', 'bias')] is False
  assert flat[('blocks', 0, 'attention', 'query', 'kernel')] is True
  optimizer = nnx.Optimizer(model, optax.adamw(1e-3, weight_decay=0.5, mask=weight_decay_mask), wrt=nnx.Param)
  freqs = model.blocks[0].attention.position_params[0]['freqs'][...]
  grads = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
  optimizer.update(model, grads)  # zero gradients: only weight decay moves a parameter
  np.testing.assert_array_equal(model.blocks[0].attention.position_params[0]['freqs'][...], freqs)


def test_learned_absolute_table_refuses_larger_grids():
  model = ViT(encoder='learned2d(max_size=4) + alibi2d', num_classes=2, pool='cls', rngs=nnx.Rngs(0))
  assert model(_images(h=4, w=3)).shape == (2, 2)
  with pytest.raises(ValueError, match='learned2d.*max_size=4.*cannot extrapolate'):
    model(_images(h=5, w=3))
  from relpos_jax import grid

  enc = grid.make('learned2d', max_size=4)
  p = enc.init(jax.random.key(0), 2, model_dim=8)
  e = np.asarray(enc.embed(p, grid.grid_positions((2, 3), class_token=True)))
  np.testing.assert_array_equal(e[0], 0.0)
  np.testing.assert_allclose(e[1 + 3 + 2], np.asarray(p['table'])[1 * 4 + 2])  # row 1, column 2
  with pytest.raises(ValueError, match='outside the learned table'):
    enc.embed(p, jnp.array([[0, 4]]))
  out = jax.jit(lambda c: enc.embed(p, c))(jnp.array([[0, 4], [1, 1]]))
  assert np.isnan(np.asarray(out)[0]).all() and np.isfinite(np.asarray(out)[1]).all()
