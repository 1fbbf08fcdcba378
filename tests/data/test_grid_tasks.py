"""The grid tasks: hand-checked rules, determinism, split streams, label ranges at every side."""

import numpy as np
import pytest

from relpos_jax.data import grid_tasks as gt


def _board(rows):
  return np.array([[1 if ch == '#' else 0 for ch in row] for row in rows])


def test_blinker_oscillates():
  vertical = _board(['.....', '..#..', '..#..', '..#..', '.....'])
  horizontal = _board(['.....', '.....', '.###.', '.....', '.....'])
  np.testing.assert_array_equal(gt.life_step(vertical), horizontal)
  np.testing.assert_array_equal(gt.life_step(horizontal), vertical)


def test_block_is_still_and_glider_moves():
  block = _board(['....', '.##.', '.##.', '....'])
  np.testing.assert_array_equal(gt.life_step(block), block)
  glider = _board(['.#....', '..#...', '###...', '......', '......', '......'])
  board = glider
  for _ in range(4):
    board = gt.life_step(board)
  np.testing.assert_array_equal(board, np.roll(np.roll(glider, 1, 0), 1, 1))  # one cell south-east per 4 steps


def test_dead_boundary():
  # A block in the corner is still; a blinker on the edge dies to a domino (its outside neighbours are dead).
  corner = _board(['##..', '##..', '....', '....'])
  np.testing.assert_array_equal(gt.life_step(corner), corner)
  edge = _board(['###', '...', '...'])
  np.testing.assert_array_equal(gt.life_step(edge), _board(['.#.', '.#.', '...']))


def test_life_step_batched_equals_loop():
  rng = np.random.default_rng(0)
  boards = (rng.random((3, 6, 6)) < 0.4).astype(np.int32)
  np.testing.assert_array_equal(gt.life_step(boards), np.stack([gt.life_step(b) for b in boards]))


def test_life_batch_labels_are_next_step():
  task = gt.make_grid_task('life')
  batch = task.batch(side=9, batch_size=4, seed=1, split='train', step=2)
  assert batch['images'].shape == (4, 9, 9, 1) and batch['images'].dtype == np.float32
  assert batch['labels'].shape == (4, 9, 9) and batch['labels'].dtype == np.int32
  np.testing.assert_array_equal(batch['labels'], gt.life_step(batch['images'][..., 0].astype(np.int32)))
  assert task.per_cell and task.num_classes == 2


def test_compass_sectors_by_hand():
  # rows grow southward: (d_row, d_col) = (0, 1) east, (-1, 0) north, (1, 0) south, (-1, -1) north-west.
  offsets = [(0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1), (-1, 3), (-3, 1), (2, -5)]
  expected = [0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 4]  # atan(1/3)=18.4° east; atan(3)=71.6° north; 180+21.8° west
  np.testing.assert_array_equal(gt.compass_sector(*np.array(offsets).T), expected)


def test_direction_and_distance_labels_match_marks():
  for name in ('direction', 'distance'):
    task = gt.make_grid_task(name)
    batch = task.batch(side=11, batch_size=16, seed=0, split='test', step=0)
    assert batch['images'].shape == (16, 11, 11, 2)
    for image, label in zip(batch['images'], batch['labels']):
      assert image[..., 0].sum() == 1 and image[..., 1].sum() == 1
      (ra, ca), (rb, cb) = np.argwhere(image[..., 0])[0], np.argwhere(image[..., 1])[0]
      if name == 'direction':
        assert label == gt.compass_sector(rb - ra, cb - ca)
      else:
        assert label == max(abs(rb - ra), abs(cb - ca)) - 1 and 0 <= label < task.num_classes


def test_count_labels_and_classes():
  task = gt.make_grid_task('count', max_count=5)
  assert task.num_classes == 6
  batch = task.batch(side=7, batch_size=64, seed=3, split='validation', step=0)
  np.testing.assert_array_equal(batch['images'].sum(axis=(1, 2, 3)), batch['labels'])
  assert set(batch['labels'].tolist()) == set(range(6))  # 64 draws of 6 classes: all seen (fixed seed)


def test_shift_by_hand():
  grid = _board(['#..', '.#.', '..#'])
  np.testing.assert_array_equal(gt.shift_grid(grid, 1, 1), _board(['...', '.#.', '..#']))
  np.testing.assert_array_equal(gt.shift_grid(grid, 0, -1), _board(['...', '#..', '.#.']))
  task = gt.make_grid_task('shift', shift_rows=1, shift_cols=2)
  batch = task.batch(side=6, batch_size=2, seed=0, split='train', step=0)
  np.testing.assert_array_equal(batch['labels'], gt.shift_grid(batch['images'][..., 0].astype(np.int32), 1, 2))


@pytest.mark.parametrize('name', gt.grid_task_names())
def test_deterministic_and_batch_size_independent(name):
  task = gt.make_grid_task(name)
  a = task.batch(side=8, batch_size=6, seed=5, split='train', step=1)
  b = task.batch(side=8, batch_size=6, seed=5, split='train', step=1)
  c = task.batch(side=8, batch_size=3, seed=5, split='train', step=2)  # examples 6..8
  for key in ('images', 'labels'):
    np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(a[key][:3], c[key])


@pytest.mark.parametrize('name', ['life', 'count', 'direction'])
def test_splits_and_seeds_are_different_streams(name):
  task = gt.make_grid_task(name)
  batches = [
      task.batch(side=7, batch_size=32, seed=s, split=sp, step=0)
      for s, sp in [(0, 'train'), (0, 'validation'), (0, 'test'), (1, 'train')]
  ]
  for i in range(len(batches)):
    for j in range(i + 1, len(batches)):
      assert not np.array_equal(batches[i]['images'], batches[j]['images'])
  if name == 'life':  # 2^-49 per pair to collide: no board of one split is in another
    seen = {b.tobytes() for b in batches[0]['images']}
    assert not any(b.tobytes() in seen for batch in batches[1:3] for b in batch['images'])


def test_bad_input_names_the_key():
  with pytest.raises(ValueError, match=r"grid task 'lif' is unknown.*'life'"):
    gt.make_grid_task('lif')
  with pytest.raises(ValueError, match=r"no parameter\(s\) \['max_cont'\]"):
    gt.make_grid_task('count', max_count=3, max_cont=3)
  task = gt.make_grid_task('life')
  with pytest.raises(ValueError, match=r"side=1 is invalid for grid task 'life'.*>= 2"):
    task.batch(side=1, batch_size=2, seed=0, split='train', step=0)
  with pytest.raises(ValueError, match=r"split='val' is invalid.*'validation'"):
    task.batch(side=4, batch_size=2, seed=0, split='val', step=0)
  with pytest.raises(ValueError, match=r'batch_size=0 is invalid'):
    task.batch(side=4, batch_size=0, seed=0, split='train', step=0)
  with pytest.raises(ValueError, match=r'side=3 is invalid.*>= 4'):
    gt.make_grid_task('count', max_count=10).batch(side=3, batch_size=1, seed=0, split='train', step=0)
  with pytest.raises(ValueError, match=r'min_density'):
    gt.make_grid_task('life', min_density=0.7, max_density=0.5)
