"""Randomized positions per axis in training (Ruoss et al. 2023's randomized positional encodings, in 2-D): any grid
encoder trained at coordinates drawn from a larger grid, evaluated at the clean ones.

    enc = grid.from_spec('randomize_coords(rope_axial, max_side=28)')     # train at 7 x 7, coordinates from [0, 28)

In training, an axis of n tokens (coordinates lo .. lo + n - 1) gets the coordinates of a sorted random subset of
n distinct integers of [0, max_side) instead: token p reads m_a[p - lo], m_a the subset in increasing order, drawn
independently per axis (the rows' coordinates and the columns', as RPE-2D-style randomization reads them), so the
model meets in training the coordinates and offsets (up to max_side - 1 per axis) of a max_side x max_side grid
while seeing only n x n tokens. Evaluation reads the clean grid (0 .. n - 1), as relpos_jax.encoders.randomized
(the 1-D form, whose docstring follows the reference code google-deepmind/randomized_positional_encodings)
evaluates at 0 .. L - 1. One draw per call, shared by the examples of a batch, as the reference draws one subset
per batch (and `augment_coords` one augmentation per forward pass); coordinates with leading axes (..., L, axes)
get one draw per leading slice.

The subset is drawn for an n known only at run time (the extents are read from the coordinates under jit): each
of the max_side integers gets a uniform key and the n smallest keys pick the subset (uniform over n-subsets).
`max_side` (Ruoss's L) must cover the training grid: an axis longer than max_side has no n distinct coordinates to
draw, and is refused by name, up front where the grid is static (`check_train_grid`, which relpos_jax.nn.vit.ViT
calls) and at the draw where the coordinates are concrete. To meet every evaluation coordinate in training,
max_side should also cover the largest evaluation side (the resolution study checks its config's).

`randomize_coords(base, ...)` wraps a grid encoder that reads float or integer coordinates at any offset (a
learned table, swin / learned2d, is refused: its rows end at its window); like `augment_coords` it is a COMBINED
encoder whose one child is the base, so evaluation is the base's, bit for bit, and training asks for its
coordinates with `grid.train_coordinates` (integer, int32; the class token keeps its sentinel).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.grid import positions as positions_lib
from relpos_jax.grid.encoders import augment
from relpos_jax.grid.registry import register

MAX_SIDE = 4096  # the largest coordinate range drawn from, per axis


def draw_axis(rng, n, max_side: int) -> jax.Array:
  """Int32 (max_side,): entries 0 .. n - 1 hold a sorted uniform random subset of n distinct integers of
  [0, max_side) (n may be traced; the entries from n on are 0)."""
  keys = jax.random.uniform(rng, (max_side,))
  rank = jnp.argsort(jnp.argsort(keys))
  chosen = rank < n
  order = jnp.cumsum(chosen) - 1  # the place of each chosen integer in the sorted subset
  slots = jnp.where(chosen, order, max_side)
  return jnp.zeros((max_side,), jnp.int32).at[slots].set(jnp.arange(max_side, dtype=jnp.int32), mode='drop')


@register('randomize_coords')
@dataclasses.dataclass(frozen=True)
class RandomizeCoords(augment.CoordinateWrapper):
  """`randomize_coords(rope_axial, max_side=28)`: the base, trained at coordinates drawn per axis from [0, max_side)."""

  base: contract.Encoder
  max_side: int = 64

  def __post_init__(self):
    augment.check_coordinate_base(
        self,
        one_d_why=' (relpos_jax.encoders.randomized is the 1-D form)',
        nested_allowed='an encoder that holds no augment_coords / randomize_coords itself',
        tables_why='are learned tables of a fixed window, which coordinates drawn from a larger grid would read past',
        tables_allowed='encoders defined at any offset',
    )
    validation.positive_int(self.name, 'max_side', self.max_side, minimum=2, maximum=MAX_SIDE)

  def check_train_grid(self, shape) -> None:
    """Refuses a training grid with a side above max_side (no distinct coordinates to draw), naming max_side."""
    shape = positions_lib.check_shape(self.name, shape)
    validation.require(
        max(shape) <= self.max_side,
        self.name,
        'max_side',
        self.max_side,
        f'a coordinate range covering the training grid {shape}: max_side >= {max(shape)}',
    )

  def _one(self, rng, c):
    """Coordinates (L, axes) int32 -> the drawn ones (L, axes): one subset per axis."""
    cls = positions_lib.is_class_token(c)
    big = jnp.iinfo(jnp.int32).max
    lo = jnp.min(jnp.where(cls[:, None], big, c), axis=0)
    hi = jnp.max(jnp.where(cls[:, None], -big, c), axis=0)
    lo = jnp.where(hi >= lo, lo, 0)
    n = jnp.maximum(hi - lo + 1, 0)
    keys = jax.random.split(rng, self.axes)
    out = []
    for a in range(self.axes):
      table = draw_axis(keys[a], n[a], self.max_side)
      out.append(jnp.take(table, jnp.clip(c[:, a] - lo[a], 0, self.max_side - 1)))
    drawn = jnp.stack(out, axis=-1)
    return jnp.where(cls[:, None], jnp.int32(positions_lib.CLASS_TOKEN), drawn)

  def augment(self, rng, coordinates):
    """The training coordinates: per axis, the grid's coordinates mapped to a sorted random subset of [0, max_side)
    (module docstring); one draw per (...) slice of coordinates (..., L, axes)."""
    c = positions_lib.check_coordinates(self.name, coordinates, self.axes, 'coordinates')
    if c.ndim < 2:
      raise ValueError(f'{self.name}: coordinates must be (..., length, {self.axes}), got shape {tuple(c.shape)}.')
    validation.require(
        jnp.issubdtype(c.dtype, jnp.integer),
        self.name,
        'coordinates',
        f'<dtype {c.dtype}>',
        'integer coordinates (a grid of tokens): the draw maps each integer coordinate to a drawn one',
    )
    values = validation.concrete(c)
    if values is not None and values.size:
      real = values[~(values == positions_lib.CLASS_TOKEN).all(axis=-1)]
      if real.size:
        extent = int((real.max(axis=0) - real.min(axis=0)).max()) + 1
        validation.require(
            extent <= self.max_side,
            self.name,
            'max_side',
            self.max_side,
            f'a coordinate range covering the grid given (a side of {extent}): max_side >= {extent}',
        )
    lead = c.shape[:-2]
    flat = c.reshape((-1,) + c.shape[-2:]).astype(jnp.int32)
    keys = jax.random.split(rng, flat.shape[0]) if lead else rng[None]
    out = jax.vmap(self._one)(keys, flat)
    return out.reshape(c.shape)
