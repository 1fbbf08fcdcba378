"""augment_coords against a numpy transcription of DINOv3's coordinate augmentation (facebookresearch/dinov3
dinov3/layers/rope_position_encoding.py `RopePositionEmbedding.forward`, commit 6876159a), evaluation unchanged,
and the wrapper through the layer and the ViT."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import grid
from relpos_jax.nn import RelativeMultiHeadAttention
from relpos_jax.nn.vit import ViT


def ref_dinov3_coords(H, W, normalize_coords, shift_hw=None, jitter_hw=None, rescale_hw=None):
  """The coords of RopePositionEmbedding.forward (training), with the random draws given: (HW, 2) in [-1, 1]."""
  if normalize_coords == 'max':
    coords_h = np.arange(0.5, H) / max(H, W)
    coords_w = np.arange(0.5, W) / max(H, W)
  elif normalize_coords == 'min':
    coords_h = np.arange(0.5, H) / min(H, W)
    coords_w = np.arange(0.5, W) / min(H, W)
  else:
    coords_h = np.arange(0.5, H) / H
    coords_w = np.arange(0.5, W) / W
  coords = np.stack(np.meshgrid(coords_h, coords_w, indexing='ij'), axis=-1).reshape(-1, 2)
  coords = 2.0 * coords - 1.0
  if shift_hw is not None:
    coords = coords + shift_hw[None, :]
  if jitter_hw is not None:
    coords = coords * jitter_hw[None, :]
  if rescale_hw is not None:
    coords = coords * rescale_hw
  return coords


def _to_unit(enc, p, shape):
  """Our patch coordinates p (N, 2) -> DINOv3's u = 2 (p - o) / N (the module docstring's map)."""
  n = np.asarray(shape, np.float64)
  norm = {'separate': n, 'max': np.full(2, n.max()), 'min': np.full(2, n.min())}[enc.normalize]
  origin = -0.5 + norm / 2
  return 2 * (np.asarray(p, np.float64) - origin) / norm


@pytest.mark.parametrize('normalize', ['separate', 'max', 'min'])
@pytest.mark.parametrize('shape', [(4, 4), (3, 5)])
def test_augmentation_matches_dinov3(normalize, shape):
  enc = grid.make(
      'augment_coords', base=grid.make('rope_axial'), shift=0.3, jitter=1.5, rescale=2.0, normalize=normalize
  )
  coords = grid.grid_positions(shape)
  # The clean coordinates map onto the reference's grid of patch centres.
  np.testing.assert_allclose(_to_unit(enc, coords, shape), ref_dinov3_coords(*shape, normalize), atol=1e-6)
  for seed in range(3):
    shift, jitter, rescale = (np.asarray(v) for v in enc.draw(jax.random.key(seed)))
    ours = np.asarray(enc.augment(jax.random.key(seed), coords))
    ref = ref_dinov3_coords(*shape, normalize, shift, jitter, rescale)
    np.testing.assert_allclose(_to_unit(enc, ours, shape), ref, rtol=1e-5, atol=1e-5)


def test_draws_follow_the_reference_distributions():
  enc = grid.from_spec('augment_coords(rope_axial, shift=0.25, jitter=1.5, rescale=3.0)')
  draws = [enc.draw(jax.random.key(s)) for s in range(400)]
  shift = np.stack([np.asarray(d[0]) for d in draws])
  jitter = np.stack([np.asarray(d[1]) for d in draws])
  rescale = np.asarray([float(d[2]) for d in draws])
  assert shift.shape == (400, 2) and jitter.shape == (400, 2) and rescale.shape == (400,)
  assert np.abs(shift).max() <= 0.25 and np.abs(shift).max() > 0.2  # U(-s, s) per axis
  assert np.abs(np.log(jitter)).max() <= math.log(1.5) + 1e-6  # log-uniform in [1/j, j] per axis
  assert np.abs(np.log(rescale)).max() <= math.log(3.0) + 1e-6 and np.abs(np.log(rescale)).max() > 0.9
  # Log-uniform: log r is uniform on [-log 3, log 3], mean 0, variance (log 3)^2 / 3.
  assert abs(np.log(rescale).mean()) < 0.1
  assert abs(np.log(rescale).var() - math.log(3.0) ** 2 / 3) < 0.08
  assert not np.allclose(jitter[:, 0], jitter[:, 1])  # per axis, not shared
  # Only what is asked for is drawn: DINOv3's default (rescale=2 alone) neither shifts nor jitters.
  s, j, r = grid.make('augment_coords', base=grid.make('rope_axial')).draw(jax.random.key(0))
  np.testing.assert_array_equal(s, 0.0)
  np.testing.assert_array_equal(j, 1.0)
  assert 0.5 <= float(r) <= 2.0


def test_hand_values_and_class_token():
  """rescale 2 about the centre of a 3 x 3 grid: (0, 0) -> (-1, -1), (1, 1) stays, (2, 2) -> (3, 3); shift 0.5
  moves a 3-wide axis by 0.5 * 3 / 2 = 0.75 patches; the class token keeps its sentinel."""
  enc = grid.from_spec('augment_coords(rope_axial, shift=1.0, jitter=2.0)')
  coords = grid.grid_positions((3, 3), class_token=True)
  out = np.asarray(enc.apply(coords, jnp.zeros(2), jnp.ones(2), jnp.float32(2.0)))
  assert (out[0] == grid.CLASS_TOKEN).all()
  np.testing.assert_allclose(out[[1, 5, 9]], [[-1, -1], [1, 1], [3, 3]], atol=1e-6)
  out = np.asarray(enc.apply(coords, jnp.array([0.5, 0.0]), jnp.array([1.0, 2.0]), jnp.float32(1.0)))
  np.testing.assert_allclose(out[1], [0.75, -1.0], atol=1e-6)


def test_spec_round_trips_and_refusals():
  for spec in [
      'augment_coords(rope_axial)',
      'augment_coords(rope_mixed, shift=0.1, jitter=1.1, rescale=None)',
      "augment_coords(alibi2d + rope_axial, normalize='max')",
      'augment_coords(mrope)',
  ]:
    enc = grid.from_spec(spec)
    assert grid.to_spec(enc) == spec.replace('"', "'")
    assert grid.from_spec(grid.to_spec(enc)) == enc and repr(enc) == grid.to_spec(enc)
  assert 'augment_coords' in grid.names()
  from relpos_jax import encoders

  with pytest.raises(ValueError, match=r"augment_coords.*\['rope'\] read 1-D positions"):
    grid.make('augment_coords', base=encoders.make('rope'))
  with pytest.raises(ValueError, match='augment_coords.*learned tables'):
    grid.from_spec('augment_coords(swin)')
  with pytest.raises(ValueError, match='augment_coords.*at least one augmentation'):
    grid.from_spec('augment_coords(rope_axial, rescale=None)')
  with pytest.raises(ValueError, match='augment_coords.*rescale'):
    grid.from_spec('augment_coords(rope_axial, rescale=0.5)')
  with pytest.raises(ValueError, match='augment_coords.*no augment_coords itself'):
    grid.from_spec('augment_coords(augment_coords(rope_axial))')
  with pytest.raises(ValueError, match=r'augment_coords.*trailing axis of 2.*got shape \(1, 9\)'):
    grid.from_spec('augment_coords(rope_axial)').augment(jax.random.key(0), jnp.arange(9)[None])
  with pytest.raises(ValueError, match='augment_coords around the whole encoder'):
    grid.train_coordinates(grid.from_spec('alibi2d + augment_coords(rope_axial)'), jax.random.key(0), None)


HEADS, DIM = 4, 32


def test_eval_is_the_base_and_training_moves_the_coordinates():
  """The layer sees the base (same params, same outputs at the clean coordinates); the training coordinates
  change the rotary scores, and a relative base's scores do not see the shift."""
  x = jax.random.normal(jax.random.key(0), (2, 13, DIM))
  base = RelativeMultiHeadAttention(HEADS, DIM, grid.from_spec('rope_mixed'), rngs=nnx.Rngs(0))
  wrapped = RelativeMultiHeadAttention(HEADS, DIM, grid.from_spec('augment_coords(rope_mixed)'), rngs=nnx.Rngs(0))
  clean = jnp.broadcast_to(grid.grid_positions((3, 4), class_token=True), (2, 13, 2))
  np.testing.assert_array_equal(
      base(x, grid_shape=(3, 4), class_token=True), wrapped(x, grid_shape=(3, 4), class_token=True)
  )
  np.testing.assert_array_equal(base(x, positions=clean), wrapped(x, positions=clean))
  moved = grid.train_coordinates(wrapped.encoder, jax.random.key(1), clean)
  assert not np.allclose(wrapped(x, positions=moved), wrapped(x, positions=clean), atol=1e-4)
  # A shift alone leaves a relative encoder's layer unchanged (the scores read p_i - p_j; without a class token,
  # whose unrotated pairs read the keys' own rotations).
  shifted = grid.from_spec('augment_coords(rope_mixed, shift=0.5, rescale=None)')
  patches = clean[:, 1:]
  moved = grid.train_coordinates(shifted, jax.random.key(2), patches)
  assert not np.allclose(moved, patches)
  np.testing.assert_allclose(wrapped(x[:, 1:], positions=moved), wrapped(x[:, 1:], positions=patches), atol=1e-4)
  # Nothing to augment: the coordinates come back as they are.
  assert grid.train_coordinates(grid.make('rope_axial'), jax.random.key(0), clean) is clean


def test_vit_trains_at_augmented_coordinates_and_evaluates_at_clean_ones():
  kw = dict(num_classes=3, patch_size=2, in_channels=1, model_dim=DIM, num_heads=HEADS, num_layers=2, pool='cls')
  images = jax.random.normal(jax.random.key(0), (2, 8, 6, 1))
  wrapped = ViT(encoder='augment_coords(rope_axial, jitter=1.5)', rngs=nnx.Rngs(0), **kw)
  base = ViT(encoder='rope_axial', rngs=nnx.Rngs(0), **kw)
  np.testing.assert_array_equal(wrapped(images), base(images))
  a = wrapped(images, train=True, rng=jax.random.key(3))
  np.testing.assert_array_equal(a, wrapped(images, train=True, rng=jax.random.key(3)))  # one draw per key
  assert not np.allclose(a, base(images), atol=1e-4)
  assert not np.allclose(a, wrapped(images, train=True, rng=jax.random.key(4)), atol=1e-4)
  np.testing.assert_array_equal(base(images, train=True), base(images))  # nothing augments: train changes nothing
  with pytest.raises(ValueError, match='ViT: rng.*augment_coords'):
    wrapped(images, train=True)
  with pytest.raises(ValueError, match='augment_coords around the whole encoder'):
    ViT(encoder='alibi2d + augment_coords(rope_axial)', rngs=nnx.Rngs(0), **kw)
