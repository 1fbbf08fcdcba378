"""LookHere against a numpy transcription of GreenCUBIC/lookhere lookhere.py (`create_lh_bias_tensor`,
`create_lh_layer_tensor`, commit 641deab8), and through the attention layer's grid path."""

from itertools import groupby

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy.spatial.distance import cdist, pdist, squareform

from relpos_jax import encoders, grid
from relpos_jax.grid.encoders.lookhere import MASK
from relpos_jax.nn import RelativeMultiHeadAttention

BF16_MAX = 3.3895313892515355e38


def ref_get_none_slopes(n):
  slopes = [0.25, 0.0625, 0.015625, 0.00390625]
  if n == 2:
    return slopes[:2]
  elif n == 4:
    return slopes
  else:
    return np.repeat(slopes, n // 4)


def ref_get_slopes(n):
  return np.repeat(np.exp2(-np.arange(1, n / 4 + 1)), 4)


def ref_create_lh_bias_tensor(lh_config, grid_size, depth, num_heads):
  """As the reference, without its final bfloat16 cast (float64 here)."""
  global_slope = lh_config['global_slope']
  layer_slopes = np.linspace(lh_config['layer_slopes'][0], lh_config['layer_slopes'][1], depth)
  lh = ref_create_lh_layer_tensor(
      grid_size,
      lh_config['head_directions'],
      num_heads,
      lh_config.get('distance', 'linear'),
      lh_config.get('fill_with', 'inf'),
  )
  layer_slopes = np.expand_dims(layer_slopes, (1, 2, 3))
  with np.errstate(invalid='ignore'):
    lh = global_slope * layer_slopes * lh
  lh = np.nan_to_num(lh, posinf=BF16_MAX)
  return lh * -1.0


def ref_create_lh_layer_tensor(grid_size, direction, num_heads, distance, fill_with):
  dir_short_hand = {
      'none': [[]] * 4,
      'zero': [['zero']] * 4,
      'none1zero3': [[]] + [['zero']] * 3,
      'none2zero2': [[]] * 2 + [['zero']] * 2,
      'none3zero1': [[]] * 3 + [['zero']],
      'center': [['center']] * 4,
      'halves': [['up'], ['down'], ['left'], ['right']],
      'corners': [['up', 'left'], ['up', 'right'], ['down', 'left'], ['down', 'right']],
      'triangles': [['tri_up'], ['tri_down'], ['tri_left'], ['tri_right']],
      'diagonals': [['diag_up_right'], ['diag_up_left'], ['diag_down_right'], ['diag_down_left']],
      'eighths1': [['tri_up', 'left'], ['tri_down', 'left'], ['tri_left', 'up'], ['tri_right', 'up']],
      'eighths2': [['tri_up', 'right'], ['tri_down', 'right'], ['tri_left', 'down'], ['tri_right', 'down']],
      'zerohalves': [['zero', 'up'], ['zero', 'down'], ['zero', 'left'], ['zero', 'right']],
      'zerocorners': [
          ['zero', 'up', 'left'],
          ['zero', 'up', 'right'],
          ['zero', 'down', 'left'],
          ['zero', 'down', 'right'],
      ],
      'zerotriangles': [['zero', 'tri_up'], ['zero', 'tri_down'], ['zero', 'tri_left'], ['zero', 'tri_right']],
  }
  sh = direction.split('-')
  dirs = [dir_short_hand[s] for s in sh]
  if num_heads == 6:
    head_names = [sh[0]] * 4 + [sh[1]] * 2
    head_directions = dirs[0] + dirs[1][:2]
  elif len(sh) == 1:
    head_names = [sh[0]] * num_heads
    head_directions = dirs[0] * (num_heads // 4)
  elif len(sh) == 2 and num_heads == 12:
    head_names = [sh[0]] * 8 + [sh[1]] * 4
    head_directions = dirs[0] * 2 + dirs[1]
  elif len(sh) == 2 and num_heads == 16:
    head_names = [sh[0]] * 8 + [sh[1]] * 8
    head_directions = dirs[0] * 2 + dirs[1] * 2
  elif len(sh) == 3 and num_heads == 12:
    head_names = [sh[0]] * 4 + [sh[1]] * 4 + [sh[2]] * 4
    head_directions = dirs[0] + dirs[1] + dirs[2]
  elif len(sh) == 3 and num_heads == 16:
    head_names = [sh[0]] * 8 + [sh[1]] * 4 + [sh[2]] * 4
    head_directions = dirs[0] * 2 + dirs[1] + dirs[2]
  elif len(sh) == 4 and num_heads == 16:
    head_names = [sh[0]] * 4 + [sh[1]] * 4 + [sh[2]] * 4 + [sh[3]] * 4
    head_directions = dirs[0] + dirs[1] + dirs[2] + dirs[3]
  head_slopes = []
  for k, v in groupby(head_names):
    if ('zero' in k) or ('center' in k) or ('none' in k):
      head_slopes.append(ref_get_none_slopes(len(list(v))))
    elif any(s in k for s in ('halves', 'corners', 'triangles', 'eighths1', 'eighths2', 'diagonals')):
      head_slopes.append(ref_get_slopes(len(list(v))))
  head_slopes = np.concatenate(head_slopes)
  grid_y, grid_x = grid_size
  num_patch = grid_x * grid_y
  grid_locs = np.meshgrid(range(grid_x), range(grid_y))
  coords = np.stack(grid_locs, axis=-1).reshape((-1, 2))
  center_location = np.array([(grid_x - 1) / 2, (grid_y - 1) / 2], ndmin=2)
  center_map = np.repeat(cdist(center_location, coords, 'euclidean'), num_patch, axis=0)
  zero_map = np.zeros_like(center_map)
  if any(n in head_names for n in ('halves', 'corners', 'eighths1', 'eighths2', 'zerohalves', 'zerocorners')):
    compare_x = np.expand_dims(np.arange(grid_x), (1, 2))
    compare_y = np.expand_dims(np.arange(grid_y), (1, 2))
    direction_mask = {
        'right': np.less(grid_locs[0], compare_x)[coords[:, 0]],
        'left': np.greater(grid_locs[0], compare_x)[coords[:, 0]],
        'up': np.greater(grid_locs[1], compare_y)[coords[:, 1]],
        'down': np.less(grid_locs[1], compare_y)[coords[:, 1]],
    }
  if any(n in head_names for n in ('triangles', 'zerotriangles', 'eighths1', 'eighths2', 'diagonals')):
    diag_coord_ud, diag_label_ud, diag_coord_lr, diag_label_lr = [], [], [], []
    max_dia = np.max((grid_x, grid_y))
    for i in range(-max_dia + 1, max_dia):
      d = np.vstack([np.diag(grid_locs[0], i), np.diag(grid_locs[1], i)])
      diag_label_ud.append(i * np.ones(d.shape[1]))
      diag_coord_ud.append(d)
      d = np.vstack([np.diag(np.fliplr(grid_locs[0]), i), np.diag(np.fliplr(grid_locs[1]), i)])
      diag_label_lr.append(i * np.ones(d.shape[1]))
      diag_coord_lr.append(d)
    diag_coord_ud = np.concatenate(diag_coord_ud, axis=1).T
    diag_label_ud = np.concatenate(diag_label_ud).T
    diag_coord_lr = np.concatenate(diag_coord_lr, axis=1).T
    diag_label_lr = np.concatenate(diag_label_lr).T
    triangles = {d: np.ones((num_patch, num_patch), dtype=bool) for d in ['up', 'down', 'left', 'right']}
    for i in range(coords.shape[0]):
      diag_pos = diag_label_ud[np.all(coords[[i], :] == diag_coord_ud[:, :2], axis=1)]
      diag_neg = diag_label_lr[np.all(coords[[i], :] == diag_coord_lr[:, :2], axis=1)]
      trid = np.tri(grid_y, grid_x, k=diag_pos[0], dtype=bool)
      triu = ~np.tri(grid_y, grid_x, k=diag_pos[0] - 1, dtype=bool)
      trir = np.fliplr(np.tri(grid_y, grid_x, k=diag_neg[0], dtype=bool))
      tril = ~np.fliplr(np.tri(grid_y, grid_x, k=diag_neg[0] - 1, dtype=bool))
      triangles['up'][i, :] = ~(triu & tril).flatten()
      triangles['down'][i, :] = ~(trid & trir).flatten()
      triangles['right'][i, :] = ~(triu & trir).flatten()
      triangles['left'][i, :] = ~(trid & tril).flatten()
  m = squareform(pdist(coords, 'euclidean'))
  lh = np.tile(m, (num_heads, 1, 1))
  if distance == 'sqrt':
    lh = lh**0.5
  elif distance == 'square':
    lh = lh**2
  for h in range(num_heads):
    dir_mask = np.zeros_like(m, dtype=bool)
    for dir in head_directions[h]:
      if dir == 'center':
        lh[h, :] = center_map
      elif dir == 'zero':
        lh[h, :] = zero_map
      elif 'tri' in dir:
        dir_mask = dir_mask | triangles[dir.split('_')[1]]
      elif 'diag' in dir:
        first_mask = triangles[dir.split('_')[1]] & triangles[dir.split('_')[2]]
        dir_mask = dir_mask | first_mask
      else:
        dir_mask = dir_mask | direction_mask[dir].reshape((num_patch, -1))
      if fill_with == 'inf':
        lh[h, dir_mask] = np.inf
      elif fill_with == 'zero':
        lh[h, dir_mask] = 0
  return np.expand_dims(head_slopes, (1, 2)) * lh


CASES = [
    ('halves', 4, 'linear', 'inf'),
    ('triangles', 8, 'linear', 'inf'),
    ('corners', 4, 'sqrt', 'inf'),
    ('diagonals', 4, 'square', 'zero'),
    ('eighths1-eighths2', 12, 'linear', 'inf'),
    ('halves-triangles-eighths1', 12, 'linear', 'inf'),
    ('halves-none', 6, 'linear', 'inf'),
    ('zerohalves-zerotriangles', 16, 'linear', 'inf'),
    ('none1zero3', 4, 'linear', 'inf'),
]


@pytest.mark.parametrize('directions, heads, distance, fill', CASES)
@pytest.mark.parametrize('shape', [(4, 4), (3, 5)])
def test_lookhere_matches_reference(directions, heads, distance, fill, shape):
  depth, layer = 4, 1
  config = dict(
      global_slope=0.5, layer_slopes=[1.5, 0.5], head_directions=directions, distance=distance, fill_with=fill
  )
  ref = ref_create_lh_bias_tensor(config, shape, depth, heads)[layer]
  slope = 0.5 * np.linspace(1.5, 0.5, depth)[layer]
  enc = grid.make('lookhere', directions=directions, slope=float(slope), distance=distance, fill_with=fill)
  params = enc.init(jax.random.key(0), heads)
  ours = np.asarray(grid.grid_bias_matrix(enc, params, shape), np.float64)
  np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-5)
  # The reference's bfloat16 map: the same to bfloat16's precision; the masked entries exactly -bf16 max.
  ref_bf16 = np.asarray(jnp.asarray(ref, jnp.bfloat16).astype(jnp.float32))
  np.testing.assert_allclose(ours, ref_bf16, rtol=1e-2, atol=1e-5)
  assert ((ours == -BF16_MAX) == (ref == -BF16_MAX)).all()
  grid.assert_block_toeplitz(ours, shape)
  # With a class token (the reference pads a zero row and column).
  with_cls = np.asarray(grid.grid_bias_matrix(enc, params, shape, class_token=True))
  assert (with_cls[:, 0] == 0).all() and (with_cls[:, :, 0] == 0).all()
  np.testing.assert_array_equal(with_cls[:, 1:, 1:], ours.astype(np.float32))


def test_hand_values():
  """halves, 4 heads (slopes 1/2): head 0 looks up. From (1, 1) on a 3 x 3 grid: the key above, (0, 1), at distance
  1 -> -0.5; the key below, (2, 1), masked; the key up-left, (0, 0), at sqrt 2 -> -0.5 sqrt 2; itself 0. Head 3
  looks right: (1, 2) kept, (1, 0) masked."""
  enc = grid.make('lookhere')
  b = np.asarray(grid.grid_bias_matrix(enc, enc.init(jax.random.key(0), 4), (3, 3)))
  i = 4  # (1, 1)
  assert b[0, i, 1] == -0.5 and b[0, i, 7] == -MASK and b[0, i, i] == 0
  np.testing.assert_allclose(b[0, i, 0], -0.5 * np.sqrt(2), rtol=1e-6)
  assert b[3, i, 5] == -0.5 and b[3, i, 3] == -MASK


def test_spec_and_refusals():
  for spec in ['lookhere', "lookhere(directions='halves-triangles', slope=0.75, distance='sqrt')"]:
    enc = grid.from_spec(spec)
    assert grid.from_spec(grid.to_spec(enc)) == enc and repr(enc) == grid.to_spec(enc)
  assert 'lookhere' in grid.names() and 'lookhere' not in encoders.names()
  with pytest.raises(ValueError, match='lookhere.*directions'):
    grid.make('lookhere', directions='center')
  with pytest.raises(ValueError, match='lookhere.*num_heads=6'):
    grid.make('lookhere').init(jax.random.key(0), 6)
  with pytest.raises(ValueError, match='lookhere.*num_heads=6'):
    grid.make('lookhere', directions='halves-triangles').init(jax.random.key(0), 6)  # the reference's slopes: 8
  with pytest.raises(ValueError, match='lookhere.*axes'):
    grid.make('lookhere', axes=3)
  with pytest.raises(ValueError, match='lookhere.*slope'):
    grid.make('lookhere', slope=0.0)
  enc = grid.make('lookhere')
  with pytest.raises(ValueError, match=r'lookhere.*trailing axis of 2.*got shape \(1, 9\)'):
    grid.grid_bias_at_positions(enc, enc.init(jax.random.key(0), 4), jnp.arange(9)[None], jnp.arange(9)[None])


def test_layer_grid_path_masks_outside_the_cone():
  layer = RelativeMultiHeadAttention(
      4, 32, grid.from_spec("lookhere(directions='triangles') + rope_axial"), rngs=nnx.Rngs(0)
  )
  x = jax.random.normal(jax.random.key(0), (2, 13, 32))
  coords = jnp.broadcast_to(grid.grid_positions((3, 4), class_token=True), (2, 13, 2))
  a = layer(x, grid_shape=(3, 4), class_token=True)
  np.testing.assert_allclose(a, layer(x, positions=coords), rtol=2e-5, atol=2e-5)
  tiled = RelativeMultiHeadAttention(4, 32, layer.encoder, rngs=nnx.Rngs(0), implementation='blockwise', block_size=4)
  np.testing.assert_allclose(tiled(x, grid_shape=(3, 4), class_token=True), a, rtol=1e-5, atol=1e-5)
  w = np.asarray(layer.attention_weights(x, grid_shape=(3, 4), class_token=True))
  enc = grid.make('lookhere', directions='triangles')
  masked = np.asarray(grid.grid_bias_matrix(enc, enc.init(jax.random.key(0), 4), (3, 4), class_token=True)) == -MASK
  assert masked.any() and (w[:, masked] == 0).all() and np.isfinite(w).all()
  np.testing.assert_allclose(
      layer(x[:, 1:], positions=coords[:, 1:]), layer(x[:, 1:], positions=coords[:, 1:] + 5), atol=2e-4
  )
