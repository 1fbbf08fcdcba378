"""Tables resized to a new grid by bicubic interpolation (relpos_jax.grid.resize) and the encoders that use it
(learned2d / sincos2d / swin with `resize`), and randomized coordinates per axis (randomize_coords)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import grid
from relpos_jax.grid import resize
from relpos_jax.grid.encoders import randomize
from relpos_jax.nn.vit import ViT


def test_a_table_resized_to_its_own_grid_is_itself():
  table = jax.random.normal(jax.random.key(0), (7 * 7, 5))
  out = resize.resize_table(table, (7, 7), (7, 7))
  assert out.shape == (49, 5) and np.array_equal(np.asarray(out), np.asarray(table))
  # and jax.image.resize itself agrees (every axis of scale 1 is skipped)
  same = jax.image.resize(table.reshape(7, 7, 5), (7, 7, 5), method='cubic').reshape(49, 5)
  assert np.array_equal(np.asarray(same), np.asarray(table))


def test_known_values_keys_cubic_half_pixel_centres():
  """A 4-cell ramp to 8 cells: the output centre (i + 0.5) / 2 - 0.5 = 0.75 reads 0.75 in the interior (a cubic
  kernel reproduces a line), and the borders renormalise the weights (not a line there)."""
  out = np.asarray(resize.resize_table(jnp.arange(4.0)[:, None], (4,), (8,))).ravel()
  # interior outputs (sample points 0.75 .. 2.25) reproduce the ramp exactly where all 4 taps are inside
  np.testing.assert_allclose(out[3:5], [1.25, 1.75], atol=1e-6)
  # Keys' kernel at a = -0.5: the point 0.25 reads taps -1 .. 2 with weights (-0.0703125, 0.8671875, 0.2265625,
  # -0.0234375); the tap at -1 is outside, so the others are renormalised by their sum 1.0703125.
  w = np.array([0.8671875, 0.2265625, -0.0234375])
  np.testing.assert_allclose(out[1], (w @ [0.0, 1.0, 2.0]) / w.sum(), atol=1e-6)
  # a constant table stays constant at any size
  const = resize.resize_table(jnp.full((9, 3), 2.5), (3, 3), (11, 5))
  np.testing.assert_allclose(np.asarray(const), 2.5, atol=1e-6)


def test_a_size_that_is_not_a_grid_is_refused_naming_the_key():
  table = jnp.zeros((49, 2))
  for bad in ((14,), (0, 14), (14.0, 14), 14, (14, 14, 14), (resize.MAX_RESIZED_SIDE + 1, 2)):
    with pytest.raises(ValueError, match=r'to_shape=.* is invalid; allowed: a grid: a tuple of 2 ints'):
      resize.resize_table(table, (7, 7), bad)
  with pytest.raises(ValueError, match=r'table=.*allowed: \(prod\(from_shape\) = 36, D\)'):
    resize.resize_table(table, (6, 6), (7, 7))
  with pytest.raises(ValueError, match=r"resize='bilinear' is invalid; allowed: one of \('bicubic', 'cubic_pytorch'\)"):
    resize.resize_table(table, (7, 7), (8, 8), 'bilinear')
  for spec in ('learned2d(max_size=7, resize=nearest)', 'swin(resize=linear)', 'sincos2d(resize=area, size=7)'):
    with pytest.raises(ValueError, match=r'resize=.* is invalid; allowed: one of'):
      grid.from_spec(spec)
  with pytest.raises(ValueError, match=r'size=None is invalid; allowed: the training grid side'):
    grid.from_spec('sincos2d(resize=bicubic)')
  with pytest.raises(ValueError, match=r'size=7 is invalid; allowed: None without resize'):
    grid.from_spec('sincos2d(size=7)')


def _init(enc, model_dim=8, num_heads=2):
  return enc.init(jax.random.key(1), num_heads, head_dim=model_dim // num_heads, model_dim=model_dim)


def test_learned2d_with_resize_is_its_table_at_its_grid_and_the_resized_table_elsewhere():
  enc = grid.make('learned2d', max_size=7, resize='bicubic')
  params = _init(enc)
  table = params['table']
  at7 = enc.embed_grid(params, (7, 7), class_token=True)
  assert np.array_equal(np.asarray(at7[1:]), np.asarray(table)) and not np.asarray(at7[0]).any()
  at14 = enc.embed_grid(params, (14, 10))
  want = jax.image.resize(table.reshape(7, 7, -1), (14, 10, table.shape[1]), method='cubic').reshape(140, -1)
  np.testing.assert_allclose(np.asarray(at14), np.asarray(want), atol=1e-6)
  # the plain table refuses the larger grid; the resized one takes it
  with pytest.raises(ValueError, match='cannot extrapolate'):
    grid.make('learned2d', max_size=7).check_grid((14, 14))
  enc.check_grid((14, 14))


def test_sincos2d_with_resize_resizes_its_training_grids_table():
  plain, resized = grid.make('sincos2d'), grid.make('sincos2d', resize='bicubic', size=7)
  params = _init(plain)
  np.testing.assert_array_equal(
      np.asarray(resized.embed_grid(params, (7, 7))), np.asarray(plain.embed_grid(params, (7, 7)))
  )
  table = plain.embed_grid(params, (7, 7))
  want = jax.image.resize(table.reshape(7, 7, -1), (21, 21, 8), method='cubic').reshape(441, 8)
  np.testing.assert_allclose(np.asarray(resized.embed_grid(params, (21, 21))), np.asarray(want), atol=1e-6)
  assert not np.allclose(
      np.asarray(resized.embed_grid(params, (21, 21))), np.asarray(plain.embed_grid(params, (21, 21)))
  )


def test_swin_with_resize_is_the_window_table_at_its_grid_and_the_resized_table_beyond():
  plain, resized = grid.make('swin', window=4), grid.make('swin', window=4, resize='bicubic')
  params = _init(plain)
  np.testing.assert_array_equal(
      np.asarray(grid.grid_bias_matrix(resized, params, (4, 4))),
      np.asarray(grid.grid_bias_matrix(plain, params, (4, 4))),
  )
  with pytest.raises(ValueError, match='beyond the learned table'):
    grid.grid_bias_matrix(plain, params, (6, 6))
  table = grid.grid_bias_table(resized, params, (6, 6))  # (H, 11 * 11)
  want = jax.image.resize(params['table'].reshape(7, 7, 2), (11, 11, 2), method='cubic').reshape(121, 2).T
  np.testing.assert_allclose(np.asarray(table), np.asarray(want), atol=1e-6)
  # offset 0 sits at the centre of both tables: the resized centre is not the old one (the grid was stretched)
  bias = grid.grid_bias_matrix(resized, params, (6, 6))
  assert bias.shape == (2, 36, 36)
  grid.assert_block_toeplitz(bias, (6, 6))


@pytest.mark.parametrize(
    'spec', ['learned2d(max_size=7, resize=bicubic)', 'sincos2d(resize=bicubic, size=7)', 'swin(resize=bicubic)']
)
def test_a_vit_with_a_resized_table_runs_at_a_larger_grid_and_is_unchanged_at_its_own(spec):
  plain_spec = (
      spec.replace(', resize=bicubic, size=7', '').replace(', resize=bicubic', '').replace('(resize=bicubic)', '')
  )
  kw = dict(num_classes=3, model_dim=16, num_heads=2, pool='cls', rngs=nnx.Rngs(0))
  model, plain = ViT(encoder=spec, **kw), ViT(encoder=plain_spec, **dict(kw, rngs=nnx.Rngs(0)))
  x7 = jax.random.normal(jax.random.key(0), (2, 7, 7, 1))
  np.testing.assert_array_equal(np.asarray(model(x7)), np.asarray(plain(x7)))
  out = model(jax.random.normal(jax.random.key(0), (2, 14, 14, 1)))
  assert out.shape == (2, 3) and np.isfinite(np.asarray(out)).all()


def test_randomized_coordinates_are_a_sorted_subset_of_the_range_per_axis():
  enc = grid.from_spec('randomize_coords(rope_axial, max_side=28)')
  assert grid.augments(enc)
  coords = grid.grid_positions((7, 5), class_token=True)
  for seed in range(5):
    drawn = np.asarray(grid.train_coordinates(enc, jax.random.key(seed), coords))
    assert (drawn[0] == grid.CLASS_TOKEN).all()
    cells = drawn[1:].reshape(7, 5, 2)
    rows, cols = cells[:, 0, 0], cells[0, :, 1]
    assert (cells[:, :, 0] == rows[:, None]).all() and (cells[:, :, 1] == cols[None, :]).all()  # per axis
    for axis in (rows, cols):
      assert (np.diff(axis) > 0).all() and axis.min() >= 0 and axis.max() < 28
  # the draw is jittable and covers the whole range over draws
  draw = jax.jit(lambda k: grid.train_coordinates(enc, k, coords))
  seen = set()
  for seed in range(40):
    seen |= set(np.asarray(draw(jax.random.key(seed)))[1:, 0].tolist())
  assert seen == set(range(28))
  # a draw of n from n is the grid itself
  same = np.asarray(
      grid.train_coordinates(grid.from_spec('randomize_coords(rope_axial, max_side=7)'), jax.random.key(0), coords)
  )
  assert np.array_equal(same[1:, 0], np.asarray(coords)[1:, 0])


def test_draw_axis_is_uniform_over_subsets():
  counts = np.zeros(6)
  for seed in range(600):
    picked = np.asarray(randomize.draw_axis(jax.random.key(seed), 2, 6))[:2]
    assert picked[0] < picked[1]
    counts[picked] += 1
  np.testing.assert_allclose(counts / 1200, 1 / 6, atol=0.05)


def test_a_draw_range_smaller_than_the_training_grid_is_refused_naming_max_side():
  enc = grid.from_spec('randomize_coords(rope_axial, max_side=5)')
  with pytest.raises(
      ValueError, match=r'max_side=5 is invalid; allowed: a coordinate range covering the training grid'
  ):
    grid.check_train_grid(enc, (7, 7))
  with pytest.raises(ValueError, match=r'max_side=5 is invalid; allowed: a coordinate range covering the grid given'):
    grid.train_coordinates(enc, jax.random.key(0), grid.grid_positions((7, 7)))
  model = ViT(encoder=enc, num_classes=2, model_dim=16, num_heads=2, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r'max_side=5 is invalid'):
    model(jnp.zeros((1, 7, 7, 1)), train=True, rng=jax.random.key(0))
  for bad in (
      'randomize_coords(rope_axial, max_side=1)',
      'randomize_coords(swin)',
      'randomize_coords(augment_coords(rope_axial))',
  ):
    with pytest.raises(ValueError, match=r'randomize_coords: (max_side|base)=.* is invalid'):
      grid.from_spec(bad)


def test_randomize_coords_evaluates_as_its_base_and_trains_elsewhere():
  kw = dict(num_classes=3, model_dim=16, num_heads=2, rngs=nnx.Rngs(0))
  model = ViT(encoder='randomize_coords(rope_axial, max_side=28)', **kw)
  base = ViT(encoder='rope_axial', **dict(kw, rngs=nnx.Rngs(0)))
  x = jax.random.normal(jax.random.key(0), (2, 7, 7, 1))
  np.testing.assert_array_equal(np.asarray(model(x)), np.asarray(base(x)))
  trained = model(x, train=True, rng=jax.random.key(2))
  assert not np.allclose(np.asarray(trained), np.asarray(base(x)))
