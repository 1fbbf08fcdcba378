"""Coordinate augmentation in training (DINOv3, Simeoni et al. 2025): any grid encoder, trained at randomly
shifted, jittered and rescaled coordinates, evaluated at the clean ones.

Reference: facebookresearch/dinov3 dinov3/layers/rope_position_encoding.py, `RopePositionEmbedding.forward`
(commit 6876159a11b4df116f30f667f8c9888617df0751). The reference normalises the patch centres to [-1, 1] per axis
(normalize_coords='separate': u = 2 (p + 0.5) / n - 1 on an axis of n patches; 'max' / 'min' divide every axis by
the longer / shorter side), then, in training only (`self.training`), with one draw per forward pass:

    u <- u + s,        s_a ~ U(-shift, shift) per axis                               (shift_coords)
    u <- u * j,        j_a = exp(U(-log jitter, log jitter)) per axis                (jitter_coords)
    u <- u * r,        r   = exp(U(-log rescale, log rescale)), shared by the axes   (rescale_coords)

and evaluation uses u unchanged. DINOv3 trains with rescale_coords=2 and no shift or jitter (configs/train/
dinov3_vit7b16_pretrain.yaml), the defaults here. The grid encoders read patch coordinates p (0 .. n - 1 on an
axis), not u; the map u = 2 (p - o) / N, with o = m - 1/2 + N/2 the coordinate where u = 0 (m the axis's smallest
coordinate, N the axis's normaliser: its extent n for 'separate'), carries the same augmentation over exactly:

    p' = o + (p - o + s N / 2) * j_a * r

so a base whose angles are linear in p (rope_axial, rope_mixed, mrope) is rotated as DINOv3's RoPE would be at the
augmented u, up to the fixed affine map between p and u. The extents are those of the tokens given (per example,
class token excluded), so the wrapper works on any grid and under jit. One draw per call, shared by the examples of
the batch and by every layer (`train_coordinates` with the same key), as the reference draws once per forward pass.

`augment_coords(base, ...)` wraps any grid encoder (a sum included): a COMBINED encoder whose one child is the
base, so the attention layer sees the base with the base's params, and evaluation (a layer given `grid_shape` or
clean coordinates) is the base's, bit for bit. Training asks for its coordinates with `train_coordinates(encoder,
rng, coordinates)` (relpos_jax.nn.vit.ViT does when called with train=True and an rng) -- the 2-D counterpart of
`relpos_jax.encoders.randomized` and `contract.train_positions`. The augmented coordinates are float: a learned
table (swin, learned2d: `any_size` False) cannot read them and is refused; the class token keeps its sentinel.
For the relative encoders the shift changes nothing (the scores depend on p_i - p_j); it moves an absolute one.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.grid import contract as grid_contract
from relpos_jax.grid import positions as positions_lib
from relpos_jax.grid.registry import register

NORMALIZE = ('separate', 'max', 'min')


def check_coordinate_base(
    wrapper, *, one_d_why: str, nested_allowed: str, tables_why: str, tables_allowed: str
) -> None:
  """The checks a wrapper that moves a grid encoder's coordinates makes of its `base` (augment_coords here,
  randomize_coords): an encoder instance of grid parts only, of one number of axes, that reads coordinates, holds
  no such wrapper itself and no learned table of a fixed window. Each ValueError names `base`."""
  name, base = wrapper.name, wrapper.base
  validation.require(
      isinstance(base, contract.Encoder),
      name,
      'base',
      base,
      f"a grid encoder instance, e.g. relpos_jax.grid.make('rope_axial') (or a nested spec: {name}(rope_axial))",
  )
  leaves = contract.leaves(base)
  one_d = [leaf.name or type(leaf).__name__ for leaf in leaves if not grid_contract.is_grid(leaf)]
  validation.require(
      not one_d,
      name,
      'base',
      base,
      f'grid encoders only (relpos_jax.grid.names()): {one_d} read 1-D positions{one_d_why}',
  )
  nested = [n.name for n in contract.walk(base) if getattr(n, 'augments_coordinates', False)]
  validation.require(not nested, name, 'base', base, nested_allowed)
  tables = [leaf.name for leaf in leaves if not getattr(leaf, 'any_size', True)]
  validation.require(not tables, name, 'base', base, f'{tables_allowed}: {tables} {tables_why}')
  validation.require(base.reads_positions, name, 'base', base, 'an encoder that reads coordinates')
  axes = {leaf.axes for leaf in leaves}
  validation.require(len(axes) == 1, name, 'base', base, 'grid parts of one number of axes')


class CoordinateWrapper(contract.WrapsBase, contract.Encoder):
  """What a wrapper that moves a grid encoder's coordinates in training shares (augment_coords, randomize_coords):
  it is its base to the layer (its axes, its one term, its params); subclasses hold `base` and draw coordinates."""

  kind = contract.Kind.COMBINED
  is_grid = True
  augments_coordinates = True

  @property
  def axes(self) -> int:
    return contract.leaves(self.base)[0].axes

  def children(self):
    return (self.base,)

  def terms(self, params):
    """(base, params): the one term, read with the base's params (the COMBINED contract)."""
    return ((self.base, params),)

  def init(self, rng, num_heads, *, head_dim=None, model_dim=None):
    """The base's params: what the layer, which sees the base, reads."""
    return self.base.init(rng, num_heads, head_dim=head_dim, model_dim=model_dim)


@register('augment_coords')
@dataclasses.dataclass(frozen=True)
class AugmentCoords(CoordinateWrapper):
  """`augment_coords(rope_axial)`, `augment_coords(rope_mixed, shift=0.1, jitter=1.1, rescale=2.0)`."""

  base: contract.Encoder
  shift: float | None = None
  jitter: float | None = None
  rescale: float | None = 2.0
  normalize: str = 'separate'

  def __post_init__(self):
    check_coordinate_base(
        self,
        one_d_why=', which have no coordinates to augment (relpos_jax.encoders.randomized is the 1-D counterpart)',
        nested_allowed='an encoder that holds no augment_coords itself',
        tables_why='are learned tables of integer offsets, which augmented (scaled, shifted) coordinates would '
        'read off their rows',
        tables_allowed='encoders that read float coordinates',
    )
    if self.shift is not None:
      validation.number(self.name, 'shift', self.shift, at_least=0, at_most=1e3)
    for field in ('jitter', 'rescale'):
      value = getattr(self, field)
      if value is not None:
        validation.number(self.name, field, value, at_least=1, at_most=1e3)
    validation.choice(self.name, 'normalize', self.normalize, NORMALIZE)
    validation.require(
        any(v is not None for v in (self.shift, self.jitter, self.rescale)),
        self.name,
        'shift / jitter / rescale',
        (self.shift, self.jitter, self.rescale),
        'at least one augmentation (all None would train at the clean coordinates: use the base alone)',
    )

  def draw(self, rng):
    """(shift (axes,), jitter (axes,), rescale ()) float32, in the reference's order; 0 / 1 where not augmented."""
    k_shift, k_jitter, k_rescale = jax.random.split(rng, 3)
    axes = self.axes
    shift = jnp.zeros((axes,), jnp.float32)
    jitter = jnp.ones((axes,), jnp.float32)
    rescale = jnp.ones((), jnp.float32)
    if self.shift is not None:
      shift = jax.random.uniform(k_shift, (axes,), jnp.float32, -self.shift, self.shift)
    if self.jitter is not None:
      top = math.log(self.jitter)
      jitter = jnp.exp(jax.random.uniform(k_jitter, (axes,), jnp.float32, -top, top))
    if self.rescale is not None:
      top = math.log(self.rescale)
      rescale = jnp.exp(jax.random.uniform(k_rescale, (), jnp.float32, -top, top))
    return shift, jitter, rescale

  def apply(self, coordinates, shift, jitter, rescale):
    """Coordinates (..., L, axes) -> float32 p' = o + (p - o + shift N / 2) * jitter * rescale (module docstring),
    with the extents of the tokens of each (...) slice; the class token keeps its sentinel."""
    c = positions_lib.check_coordinates(self.name, coordinates, self.axes, 'coordinates')
    if c.ndim < 2:
      raise ValueError(f'{self.name}: coordinates must be (..., length, {self.axes}), got shape {tuple(c.shape)}.')
    p = c.astype(jnp.float32)
    cls = positions_lib.is_class_token(c)[..., None]  # (..., L, 1)
    lo = jnp.min(jnp.where(cls, jnp.inf, p), axis=-2, keepdims=True)
    hi = jnp.max(jnp.where(cls, -jnp.inf, p), axis=-2, keepdims=True)
    extent = jnp.where(jnp.isfinite(hi - lo), hi - lo + 1.0, 1.0)  # n per axis (1 when only a class token)
    lo = jnp.where(jnp.isfinite(lo), lo, 0.0)
    if self.normalize == 'separate':
      norm = extent
    elif self.normalize == 'max':
      norm = jnp.max(extent, axis=-1, keepdims=True)
    else:
      norm = jnp.min(extent, axis=-1, keepdims=True)
    origin = lo - 0.5 + norm / 2
    out = origin + (p - origin + shift * norm / 2) * jitter * rescale
    return jnp.where(cls, float(positions_lib.CLASS_TOKEN), out)

  def augment(self, rng, coordinates):
    """The training coordinates: one draw (`draw`) applied to coordinates (..., L, axes) (`apply`)."""
    return self.apply(coordinates, *self.draw(rng))


def check_augmentation(who: str, encoder) -> None:
  """Refuses an augment_coords that is not the whole encoder (`alibi2d + augment_coords(rope_axial)`): a layer
  reads one set of coordinates for all its parts, so only the whole layer can be moved
  (`augment_coords(alibi2d + rope_axial)`)."""
  found = [node for node in contract.walk(encoder) if getattr(node, 'augments_coordinates', False)]
  validation.require(
      not found or found[0] is encoder,
      who,
      'encoder',
      encoder,
      'augment_coords around the whole encoder (augment_coords(alibi2d + rope_axial), not alibi2d + '
      'augment_coords(rope_axial)): the layer reads one set of coordinates for all its parts',
  )


def train_coordinates(encoder, rng, coordinates):
  """The coordinates a training batch uses: augmented when `encoder` is an augment_coords, else `coordinates`
  unchanged. Evaluation passes the clean coordinates (or grid_shape) and never calls this."""
  check_augmentation('train_coordinates', encoder)
  if not augments(encoder):
    return coordinates
  return encoder.augment(rng, coordinates)


def augments(encoder) -> bool:
  """Whether training moves the coordinates of `encoder` (its tree holds an augment_coords)."""
  return any(getattr(node, 'augments_coordinates', False) for node in contract.walk(encoder))


def check_train_grid(encoder, shape) -> None:
  """Refuses, naming the key, a training grid the encoder's coordinate draw cannot cover (randomize_coords: a side
  above its max_side); nothing for the other encoders. Called where the grid is static, before the draw."""
  for node in contract.walk(encoder):
    check = getattr(node, 'check_train_grid', None)
    if check is not None:
      check(shape)
