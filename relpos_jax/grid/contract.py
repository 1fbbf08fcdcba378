"""The grid encoders' contract: the 1-D kinds, read at coordinates (..., axes) instead of positions (...).

A grid encoder is an encoder of one of the existing kinds (the README's "Positions on a grid"): a grid bias is
a SCALAR_BIAS, a grid rotary is a ROTARY, an absolute grid embedding is an ABSOLUTE, so the attention layer adds
their terms where it adds the 1-D ones. What changes is how positions become offsets:

    params = encoder.init(rng, num_heads, head_dim=..., model_dim=...)
    b = encoder.bias(params, delta)                  # GridBiasEncoder: delta (..., axes) = p_i - p_j -> (..., H)
    b = encoder.pair_bias(params, q_pos, k_pos)      # coordinates (..., axes), broadcast -> (..., H)
    q = encoder.rotate(params, q, positions)         # GridRotaryEncoder: q (..., L, H, D), positions (..., L, axes)
    e = encoder.embed(params, positions)             # GridAbsoluteEncoder: (..., axes) -> (..., model_dim)

Every grid encoder has a field `axes` (2: H x W, 3: T x H x W) and refuses coordinates with another trailing axis
by name (`positions.check_coordinates`), 1-D positions included. The class token (coordinates CLASS_TOKEN) takes
no position: `pair_bias` gives its pairs `class_bias(params)` and the rotations leave it unrotated.

`is_grid = True` marks them: the attention layer gives them their grid Terms (`relpos_jax.nn.terms.select`, by
the part and the positions' type: `call.Grid` or `call.Coordinates`), and refuses a 1-D encoder given
coordinates there. They are registered in their own registry (`grid.registry`), so
the 1-D sweeps over `relpos_jax.encoders.names()` never meet them.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import rope  # the rotation and head-size checks of the 1-D RoPE
from relpos_jax.grid import positions as positions_lib

AXES = (2, 3)


def check_axes(name: str, axes) -> int:
  validation.require(
      validation.is_int(axes) and axes in AXES, name, 'axes', axes, f'one of {AXES} (H x W or T x H x W)'
  )
  return int(axes)


class GridEncoder:
  """Mixin: what every grid encoder has (its dataclass declares the field `axes`)."""

  is_grid: ClassVar[bool] = True
  # Whether the encoder extrapolates to any grid (False: a learned table of a fixed window, `max_offset`).
  any_size: ClassVar[bool] = True
  reads_inputs: ClassVar[bool] = False  # its score term reads the layer input x (PaPE: per-token features)

  def coordinates(self, positions, field: str = 'positions') -> jax.Array:
    return positions_lib.check_coordinates(self.name or type(self).__name__, positions, self.axes, field)

  def max_offset(self) -> int | None:
    """The largest |p_i - p_j| per axis the encoder covers (None: any)."""
    return None

  def check_grid(self, shape) -> None:
    """Raises ValueError when the grid `shape` holds offsets beyond what the encoder covers (a learned table)."""
    limit = self.max_offset()
    shape = positions_lib.check_shape(self.name, shape)
    validation.require(
        len(shape) == self.axes, self.name, 'grid shape', shape, f'{self.axes} axes (the encoder has axes={self.axes})'
    )
    if limit is not None and max(shape) - 1 > limit:
      raise ValueError(
          f'{self.name}: the grid {shape} has offsets up to {max(shape) - 1} per axis, beyond the learned table, '
          f'which covers |p_i - p_j| <= {limit} (a window of {limit + 1}); a learned table cannot extrapolate. Use '
          f'a grid of side <= {limit + 1}, a larger window, or an encoder that extrapolates.'
      )


@dataclasses.dataclass(frozen=True)
class GridBiasEncoder(GridEncoder, contract.ScalarBiasEncoder):
  """b_h(p_i - p_j): one scalar per head and pair of coordinates, added to the attention scores."""

  axes: int = 2

  def __post_init__(self):
    check_axes(self.name, self.axes)

  def bias(self, params, delta):
    """Offsets delta = p_i - p_j (..., axes), int or float -> float32 (..., num_heads)."""
    raise NotImplementedError

  def grid_offset_bias(self, params, shape) -> jax.Array:
    """(P, num_heads): the bias at the P distinct offsets of the grid `shape` (`positions.distinct_offsets` order),
    what the grid's bias table is built from (relpos_jax.grid.matrices). A table resized to the grid (Swin v1's,
    `resize`) overrides it; every other encoder reads `bias` there."""
    return self.bias(params, positions_lib.distinct_offsets(shape))

  def query_bias(self, params, q_pos, k_pos):
    """The bias of a query-dependent encoder (is_toeplitz False: FIRE-2D); coordinates broadcast."""
    raise NotImplementedError

  def class_bias(self, params) -> jax.Array:
    """(num_heads,) float32: the bias of every pair with a class token (0 unless the reference learns one)."""
    return jnp.zeros((contract.dims(params).num_heads,), jnp.float32)

  def pair_bias(self, params, q_pos, k_pos):
    q = self.coordinates(q_pos, 'q_pos')
    k = self.coordinates(k_pos, 'k_pos')
    cls = positions_lib.is_class_token(q) | positions_lib.is_class_token(k)
    # The class token's sentinel coordinates are never read as a place (a table would see a huge offset).
    q = jnp.where(positions_lib.is_class_token(q)[..., None], jnp.zeros((), q.dtype), q)
    k = jnp.where(positions_lib.is_class_token(k)[..., None], jnp.zeros((), k.dtype), k)
    if self.is_toeplitz:  # a class pair reads offset 0 (its value is replaced): a learned window's check passes
      values = self.bias(params, jnp.where(cls[..., None], jnp.zeros((), q.dtype), positions_lib.offsets(q, k)))
    else:
      values = self.query_bias(params, q, k)
    values = jnp.asarray(values, jnp.float32)
    return jnp.where(cls[..., None], self.class_bias(params), values)


@dataclasses.dataclass(frozen=True)
class GridRotaryEncoder(GridEncoder, contract.RotaryEncoder):
  """q and k rotated at their coordinates: angles (..., L, D/2) from the coordinates, the 1-D rotation."""

  axes: int = 2

  def __post_init__(self):
    check_axes(self.name, self.axes)

  def angles(self, params, positions, head_dim: int) -> jax.Array:
    """Coordinates (..., L, axes) (checked) -> float32 angles (..., L, D/2) or (..., L, H, D/2)."""
    raise NotImplementedError

  def rotate(self, params, x, positions):
    who = self.name or type(self).__name__
    if x.ndim < 3:
      raise ValueError(f'{who}: x must be (..., length, heads, head_dim), got shape {x.shape}.')
    head_dim = rope.check_head_dim(who, x.shape[-1])
    dims = contract.dims(params)
    if dims.head_dim is not None and dims.head_dim != head_dim:
      raise ValueError(
          f'{who}: x has head_dim={head_dim} but the params were initialised for head_dim={dims.head_dim}.'
      )
    coords = self.coordinates(positions)
    lead = tuple(x.shape[:-2])
    try:
      ok = coords.ndim >= 2 and np.broadcast_shapes(coords.shape[:-1], lead) == lead and coords.shape[-2] == lead[-1]
    except ValueError:
      ok = False
    if not ok:
      raise ValueError(
          f'{who}: positions of shape {coords.shape} do not match x of shape {x.shape}; they must be '
          f'(..., length={x.shape[-3]}, {self.axes}).'
      )
    self.check_dims(contract.Dims(dims.num_heads, head_dim))
    angles = self.angles(params, coords, head_dim)
    cls = positions_lib.is_class_token(coords)
    angles = jnp.where(cls[..., None] if angles.ndim == coords.ndim else cls[..., None, None], 0.0, angles)
    if angles.ndim == coords.ndim:  # shared by the heads: (..., L, D/2)
      return rope.apply_rotation(x, angles, self.layout)
    return _apply_head_rotation(x, angles, self.layout)  # per head: (..., L, H, D/2)


def _apply_head_rotation(x, angles, layout):
  """apply_rotation with per-head angles (..., L, H, D/2)."""
  half = x.shape[-1] // 2
  cos, sin = jnp.cos(angles), jnp.sin(angles)
  x32 = x.astype(jnp.float32)
  if layout == 'half':
    first, second = x32[..., :half], x32[..., half:]
  else:
    pairs = x32.reshape(x.shape[:-1] + (half, 2))
    first, second = pairs[..., 0], pairs[..., 1]
  a, b = first * cos - second * sin, first * sin + second * cos
  out = jnp.concatenate([a, b], -1) if layout == 'half' else jnp.stack([a, b], -1).reshape(x.shape)
  return out.astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class GridAbsoluteEncoder(GridEncoder, contract.AbsoluteEncoder):
  """A vector per coordinate, added to the input (x + p_i): not relative (the translation test's foil)."""

  axes: int = 2

  def __post_init__(self):
    check_axes(self.name, self.axes)

  def embed_grid(self, params, shape, *, class_token: bool = False) -> jax.Array:
    """(N, model_dim): the embedding of every token of the grid `shape` in raster order (N = prod(shape), + 1
    with a class token first), what relpos_jax.nn.vit.ViT adds at evaluation. A table resized to the grid
    (learned2d / sincos2d with `resize`) overrides it; every other encoder reads `embed` at the grid's positions."""
    return self.embed(params, positions_lib.grid_positions(shape, class_token=class_token))


def is_grid(encoder) -> bool:
  return bool(getattr(encoder, 'is_grid', False))
