"""Tasks on a grid that need no data and ask for resolution extrapolation: train at one grid side, test at larger.

    task = make_grid_task('life')
    batch = task.batch(side=7, batch_size=32, seed=0, split='train', step=0)
    batch['images']   # float32[32, 7, 7, task.in_channels]
    batch['labels']   # int32[32, 7, 7] (task.per_cell) or int32[32]

Every task is the 2-D counterpart of an algorithmic task of the 1-D suite: its rule is the same at every grid
side, so a model that learned the rule (and not the training grid) keeps its accuracy at 2x-4x the side. The
grid-side question is "resolution extrapolation" (Heo et al. 2024, "Rotary Position Embedding for
Vision Transformer", evaluate ImageNet models at larger resolutions than trained).

Determinism. Example `index` of a (seed, split) stream at grid `side` is drawn from its own generator,
`np.random.default_rng([task salt, seed, split id, side, index])` (numpy's SeedSequence hashes the whole
entropy list), so an example does not depend on the batch size or on which other examples were drawn, and
batch `step` of size B holds the examples `step * B ... step * B + B - 1`. The splits ('train', 'validation',
'test') are different entries of that list, i.e. independent seed streams; two splits can hold the same board
only by chance (for `life` at side 7 that is a 2^-49 event per pair; for `count` and the pair tasks at small
sides collisions are likely and harmless: the question is the rule at a new side, not memorisation).

Tasks (names of `GRID_TASKS`):
  life       one step of Conway's Game of Life (B3/S23) with a dead boundary: per-cell labels (next state,
             2 classes); scored per cell (accuracy) and per board (exact match). Board density per board
             uniform in [0.2, 0.6], so every neighbour count 0..8 occurs.
  count      the number of marked cells, k uniform in 0..max_count (default 9, 10 classes, label k). The count
             distribution is the same at every side, so the marks get sparser as the grid grows: a model that
             learned density instead of count fails there (mean pooling alone computes density).
  direction  two marked cells, A (channel 0) and B (channel 1), anywhere on the grid: the compass sector of B
             seen from A, 8 classes (0 east, 1 north-east, 2 north, ... 7 south-east; rows grow southward).
             The angle atan2(-drow, dcol) of integer offsets never falls on a sector boundary (tan 22.5° is
             irrational), so the label is unambiguous.
  distance   two marked cells as above, B within Chebyshev distance max_distance (default 6) of A: the class is
             max(|drow|, |dcol|) - 1 (max_distance classes). The distances are those of the training grid at
             every side, so only the placement extrapolates; a side of max_distance + 1 (7 by default) allows
             every distance.
  shift      a 2-D copy: per-cell labels are the input shifted by (shift_rows, shift_cols) (default (1, 2)),
             zero where the shift enters from outside the grid; random binary input of density 0.5.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from typing import ClassVar

import numpy as np

SPLITS = ('train', 'validation', 'test')
_SPLIT_ID = {'train': 0, 'validation': 1, 'test': 2}


def check_int(key: str, value, minimum: int) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
    raise ValueError(f'{key}={value!r} is invalid: allowed: an int >= {minimum}.')
  return int(value)


@dataclasses.dataclass(frozen=True)
class GridTask:
  """Common interface: name, num_classes, per_cell (labels per cell, else one per grid), in_channels,
  patch_size (pixels per token side: a model sees side / patch_size tokens per row) and `batch`."""

  name: ClassVar[str] = ''
  per_cell: ClassVar[bool] = False
  in_channels: ClassVar[int] = 1
  patch_size: ClassVar[int] = 1

  @property
  def num_classes(self) -> int:
    raise NotImplementedError

  def min_side(self) -> int:
    """The smallest grid side the task is defined at."""
    return 2

  def check_side(self, side, key: str = 'side') -> int:
    side = check_int(key, side, 1)
    if side < self.min_side():
      raise ValueError(f'{key}={side} is invalid for grid task {self.name!r}: allowed: an int >= {self.min_side()}.')
    return side

  def describe(self) -> dict:
    """What the task is (for results.json): its name, parameters and label layout."""
    fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
    return {'name': self.name, **fields, 'num_classes': self.num_classes, 'per_cell': self.per_cell}

  def data_fingerprint(self) -> str | None:
    """A digest of the data the task's examples are drawn from, for a run's record (a run is never reused on
    other data); None for a synthetic task, whose examples are a function of its description (`describe`) and
    the seeds, both in the run's config."""
    return None

  def _example(self, rng: np.random.Generator, side: int) -> tuple[np.ndarray, np.ndarray | int]:
    raise NotImplementedError

  def _rng(self, seed: int, split: str, side: int, index: int) -> np.random.Generator:
    salt = zlib.crc32(self.name.encode())  # Different tasks: different streams for one seed.
    return np.random.default_rng([salt, seed, _SPLIT_ID[split], side, index])

  def batch(self, side: int, batch_size: int, seed: int, split: str, step: int) -> dict[str, np.ndarray]:
    """Examples step * batch_size ... + batch_size - 1 of the (seed, split) stream at grid `side`."""
    side = self.check_side(side)
    batch_size = check_int('batch_size', batch_size, 1)
    seed = check_int('seed', seed, 0)
    step = check_int('step', step, 0)
    if split not in _SPLIT_ID:
      raise ValueError(f'split={split!r} is invalid: allowed: one of {SPLITS}.')
    images = np.zeros((batch_size, side, side, self.in_channels), np.float32)
    labels = np.zeros((batch_size, side, side) if self.per_cell else (batch_size,), np.int32)
    for i in range(batch_size):
      images[i], labels[i] = self._example(self._rng(seed, split, side, step * batch_size + i), side)
    return {'images': images, 'labels': labels}


def life_step(board: np.ndarray) -> np.ndarray:
  """One step of Conway's Game of Life (birth on 3 neighbours, survival on 2 or 3), cells outside dead.

  board: int/bool[..., H, W] of 0/1. Returns int32 of the same shape."""
  board = np.asarray(board).astype(np.int32)
  padded = np.pad(board, [(0, 0)] * (board.ndim - 2) + [(1, 1), (1, 1)])
  h, w = board.shape[-2:]
  neighbours = sum(
      padded[..., 1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]
      for dr in (-1, 0, 1)
      for dc in (-1, 0, 1)
      if (dr, dc) != (0, 0)
  )
  return ((neighbours == 3) | ((board == 1) & (neighbours == 2))).astype(np.int32)


@dataclasses.dataclass(frozen=True)
class Life(GridTask):
  name: ClassVar[str] = 'life'
  per_cell: ClassVar[bool] = True
  min_density: float = 0.2
  max_density: float = 0.6

  def __post_init__(self):
    if not 0 <= self.min_density <= self.max_density <= 1:
      raise ValueError(
          f'life: min_density={self.min_density!r}, max_density={self.max_density!r} are invalid: allowed: '
          '0 <= min_density <= max_density <= 1.'
      )

  @property
  def num_classes(self) -> int:
    return 2

  def _example(self, rng, side):
    density = rng.uniform(self.min_density, self.max_density)
    board = (rng.random((side, side)) < density).astype(np.int32)
    return board[..., None].astype(np.float32), life_step(board)


@dataclasses.dataclass(frozen=True)
class Count(GridTask):
  name: ClassVar[str] = 'count'
  max_count: int = 9

  def __post_init__(self):
    check_int('count: max_count', self.max_count, 1)

  @property
  def num_classes(self) -> int:
    return self.max_count + 1

  def min_side(self) -> int:
    return max(2, math.isqrt(self.max_count - 1) + 1)  # side * side >= max_count: every count fits

  def _example(self, rng, side):
    k = int(rng.integers(0, self.max_count + 1))
    image = np.zeros((side * side, 1), np.float32)
    image[rng.choice(side * side, size=k, replace=False)] = 1.0
    return image.reshape(side, side, 1), k


def compass_sector(d_row, d_col) -> np.ndarray:
  """The 8-way compass sector of the offset (d_row, d_col) (rows grow southward): 0 east, 1 north-east,
  2 north, 3 north-west, 4 west, 5 south-west, 6 south, 7 south-east; the sector of angle a = atan2(-d_row,
  d_col) is round(a / 45°) mod 8."""
  angle = np.arctan2(-np.asarray(d_row, np.float64), np.asarray(d_col, np.float64))
  return (np.round(angle / (np.pi / 4)).astype(np.int64) % 8).astype(np.int32)


def _two_cells(rng, side: int, radius: int | None) -> tuple[int, int, int, int]:
  """A uniform, B uniform among the other cells (within Chebyshev `radius` of A when given)."""
  ra, ca = (int(x) for x in rng.integers(0, side, size=2))
  while True:
    if radius is None:
      rb, cb = (int(x) for x in rng.integers(0, side, size=2))
    else:
      rb = int(rng.integers(max(0, ra - radius), min(side, ra + radius + 1)))
      cb = int(rng.integers(max(0, ca - radius), min(side, ca + radius + 1)))
    if (rb, cb) != (ra, ca):
      return ra, ca, rb, cb


def _pair_image(side, ra, ca, rb, cb) -> np.ndarray:
  image = np.zeros((side, side, 2), np.float32)
  image[ra, ca, 0] = 1.0
  image[rb, cb, 1] = 1.0
  return image


@dataclasses.dataclass(frozen=True)
class Direction(GridTask):
  name: ClassVar[str] = 'direction'
  in_channels: ClassVar[int] = 2

  @property
  def num_classes(self) -> int:
    return 8

  def _example(self, rng, side):
    ra, ca, rb, cb = _two_cells(rng, side, None)
    return _pair_image(side, ra, ca, rb, cb), int(compass_sector(rb - ra, cb - ca))


@dataclasses.dataclass(frozen=True)
class Distance(GridTask):
  name: ClassVar[str] = 'distance'
  in_channels: ClassVar[int] = 2
  max_distance: int = 6

  def __post_init__(self):
    check_int('distance: max_distance', self.max_distance, 1)

  @property
  def num_classes(self) -> int:
    return self.max_distance

  def _example(self, rng, side):
    ra, ca, rb, cb = _two_cells(rng, side, self.max_distance)
    return _pair_image(side, ra, ca, rb, cb), max(abs(rb - ra), abs(cb - ca)) - 1


def shift_grid(grid: np.ndarray, rows: int, cols: int) -> np.ndarray:
  """out[r, c] = grid[r - rows, c - cols] inside the grid, else 0 (over the last two axes)."""
  grid = np.asarray(grid)
  h, w = grid.shape[-2:]
  out = np.zeros_like(grid)
  if abs(rows) >= h or abs(cols) >= w:
    return out
  dst_r, src_r = slice(max(rows, 0), h + min(rows, 0)), slice(max(-rows, 0), h - max(rows, 0))
  dst_c, src_c = slice(max(cols, 0), w + min(cols, 0)), slice(max(-cols, 0), w - max(cols, 0))
  out[..., dst_r, dst_c] = grid[..., src_r, src_c]
  return out


@dataclasses.dataclass(frozen=True)
class Shift(GridTask):
  name: ClassVar[str] = 'shift'
  per_cell: ClassVar[bool] = True
  shift_rows: int = 1
  shift_cols: int = 2

  def __post_init__(self):
    for key in ('shift_rows', 'shift_cols'):
      value = getattr(self, key)
      if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f'shift: {key}={value!r} is invalid: allowed: an int.')

  @property
  def num_classes(self) -> int:
    return 2

  def min_side(self) -> int:
    return max(2, abs(self.shift_rows) + 1, abs(self.shift_cols) + 1)

  def _example(self, rng, side):
    grid = (rng.random((side, side)) < 0.5).astype(np.int32)
    return grid[..., None].astype(np.float32), shift_grid(grid, self.shift_rows, self.shift_cols)


GRID_TASKS: dict[str, type[GridTask]] = {cls.name: cls for cls in (Life, Count, Direction, Distance, Shift)}


def grid_task_names() -> tuple[str, ...]:
  return tuple(GRID_TASKS)


def make_grid_task(name: str, **kwargs) -> GridTask:
  """The grid task `name` (one of GRID_TASKS) with its keyword parameters."""
  if name not in GRID_TASKS:
    raise ValueError(f'grid task {name!r} is unknown: allowed: one of {grid_task_names()}.')
  cls = GRID_TASKS[name]
  allowed = [f.name for f in dataclasses.fields(cls)]
  unknown = sorted(set(kwargs) - set(allowed))
  if unknown:
    raise ValueError(f'grid task {name!r} has no parameter(s) {unknown}: allowed: {allowed}.')
  return cls(**kwargs)


def per_cell_accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
  """The fraction of cells predicted right (per-cell tasks)."""
  return float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def exact_match(predictions: np.ndarray, labels: np.ndarray) -> float:
  """The fraction of boards with every cell right (per-cell tasks)."""
  right = np.asarray(predictions) == np.asarray(labels)
  return float(np.mean(right.reshape(right.shape[0], -1).all(axis=1)))
