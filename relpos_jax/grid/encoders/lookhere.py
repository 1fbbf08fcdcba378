"""LookHere (Fuller, Kyrollos, Yassin & Green 2024, "LookHere: Vision Transformers with Directed Attention
Generalize and Extrapolate", NeurIPS 2024): each head looks in one 2-D direction -- keys outside its cone are
masked -- and pays a distance penalty inside it.

Reference: GreenCUBIC/lookhere lookhere.py, `create_lh_bias_tensor` and `create_lh_layer_tensor` (commit
641deab8c6610b6480a5c564a9a34a29bf934574). With dx = x_j - x_i, dy = y_j - y_i (key minus query; x the column, y
the row, growing downwards, as the reference's `meshgrid(range(grid_x), range(grid_y))`):

    b_h(i, j) = -slope * s_h * f(|p_i - p_j|_2)      inside head h's cone       (f: 'linear' d, 'sqrt', 'square')
    b_h(i, j) = -M                                    outside it (fill_with='inf'; 'zero': 0, no penalty there)

M = the largest bfloat16, 3.3895e38: the reference scales inf by the slopes, `nan_to_num(posinf=bfloat16 max)`,
negates, and adds the (H, N, N) map to the scores as `attn_mask` (a large finite negative, not -inf). Its
bfloat16 cast of the penalties is not reproduced (float32 here). Cones (a key is kept where), per direction word:

    right: dx >= 0    left: dx <= 0    up: dy <= 0    down: dy >= 0                  (half-planes, 180 degrees)
    tri_up: dy <= -|dx|   tri_down: dy >= |dx|   tri_right: dx >= |dy|   tri_left: dx <= -|dy|   (90 degrees)
    diag_a_b: tri_a or tri_b                                                          (180, rotated by 45)
    zero: no distance penalty (f = 0)

A head's words combine by masking the union of their masks (['up', 'left'] keeps the up-left quadrant). The
direction sets are the reference's shorthands (`dir_short_hand`, four heads each): halves [up, down, left,
right]; corners (quadrants); triangles (90-degree cones); diagonals; eighths1 / eighths2 (45-degree cones
[tri_up, left] ...); none (distance only); zero (nothing); zerohalves / zerocorners / zerotriangles (masks only).
`directions` is one shorthand or several joined by '-' ('halves-triangles'), assigned to heads as the reference
does (one set: repeated over num_heads, a multiple of 4; several: the reference's splits for 6, 12 and 16
heads); other head counts are refused by name. Per-head slopes s_h are the reference's: 2^-1, 2^-2, ... repeated
over each run of 4 directional heads (`get_slopes`), and 1/4, 1/16, 1/64, 1/256 for none / zero heads
(`get_none_slopes`). `slope` is the reference's global_slope times its layer slope (the reference spreads layer
slopes linearly over depth, `layer_slopes`: a per-layer pattern of lookhere(slope=...) specs gives the same).

Every cone holds p_j = p_i, so no query is left without keys. The map depends on p_i - p_j only (relative,
block-Toeplitz), so it extrapolates to any grid, the paper's point. Not taken over: the 'center' shorthand (a
distance to the grid's centre: absolute) and fill_with='max' (the largest penalty of the grid: not a function of
the offset). 2-D only; the class token's pairs get 0, as the reference pads them.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.registry import register

# The reference's `dir_short_hand` (its 'center' left out: absolute).
SHORTHANDS = {
    'none': [[]] * 4,
    'zero': [['zero']] * 4,
    'none1zero3': [[]] + [['zero']] * 3,
    'none2zero2': [[]] * 2 + [['zero']] * 2,
    'none3zero1': [[]] * 3 + [['zero']],
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
DISTANCES = ('linear', 'sqrt', 'square')
FILLS = ('inf', 'zero')
MASK = float(jnp.finfo(jnp.bfloat16).max)  # the reference's stand-in for +inf, negated


def head_assignment(directions: str, num_heads: int):
  """(head names, head direction lists) as the reference's `create_lh_layer_tensor` assigns them, or None for a
  head count it does not define."""
  sh = directions.split('-')
  dirs = [SHORTHANDS[s] for s in sh]
  if num_heads == 6 and len(sh) >= 2:
    return [sh[0]] * 4 + [sh[1]] * 2, dirs[0] + dirs[1][:2]
  if num_heads != 6 and len(sh) == 1 and num_heads % 4 == 0:
    return [sh[0]] * num_heads, dirs[0] * (num_heads // 4)
  if len(sh) == 2 and num_heads == 12:
    return [sh[0]] * 8 + [sh[1]] * 4, dirs[0] * 2 + dirs[1]
  if len(sh) == 2 and num_heads == 16:
    return [sh[0]] * 8 + [sh[1]] * 8, dirs[0] * 2 + dirs[1] * 2
  if len(sh) == 3 and num_heads == 12:
    return [sh[0]] * 4 + [sh[1]] * 4 + [sh[2]] * 4, dirs[0] + dirs[1] + dirs[2]
  if len(sh) == 3 and num_heads == 16:
    return [sh[0]] * 8 + [sh[1]] * 4 + [sh[2]] * 4, dirs[0] * 2 + dirs[1] + dirs[2]
  if len(sh) == 4 and num_heads == 16:
    return [sh[0]] * 4 + [sh[1]] * 4 + [sh[2]] * 4 + [sh[3]] * 4, dirs[0] + dirs[1] + dirs[2] + dirs[3]
  return None


def _none_slopes(n):
  slopes = [0.25, 0.0625, 0.015625, 0.00390625]
  if n == 2:
    return slopes[:2]
  if n == 4:
    return slopes
  return list(np.repeat(slopes, n // 4))


def _slopes(n):
  return list(np.repeat(np.exp2(-np.arange(1, n / 4 + 1)), 4))


def head_slopes(names) -> list[float]:
  """The reference's per-head slopes: one run of equal names at a time (`groupby`)."""
  out = []
  for k, v in itertools.groupby(names):
    n = len(list(v))
    out += _none_slopes(n) if ('zero' in k or 'none' in k) else _slopes(n)
  return [float(s) for s in out]


def _kept_masks(dx, dy):
  """Per direction word, bool (...): where the reference MASKS a key (outside the direction)."""
  triu, trid = dx - dy >= 0, dx - dy <= 0
  trir, tril = dx + dy >= 0, dx + dy <= 0
  return {
      'right': dx < 0,
      'left': dx > 0,
      'up': dy > 0,
      'down': dy < 0,
      'tri_up': ~(triu & tril),
      'tri_down': ~(trid & trir),
      'tri_right': ~(triu & trir),
      'tri_left': ~(trid & tril),
  }


@register('lookhere')
@dataclasses.dataclass(frozen=True)
class LookHere(GridBiasEncoder):
  directions: str = 'halves'
  slope: float = 1.0
  distance: str = 'linear'
  fill_with: str = 'inf'

  def __post_init__(self):
    super().__post_init__()
    validation.require(self.axes == 2, self.name, 'axes', self.axes, '2 (LookHere directs heads on an image)')
    words = self.directions.split('-') if isinstance(self.directions, str) else [None]
    validation.require(
        all(w in SHORTHANDS for w in words) and 1 <= len(words) <= 4,
        self.name,
        'directions',
        self.directions,
        f"one to four of the reference's direction sets joined by '-' ({', '.join(SHORTHANDS)}; e.g. "
        "'halves', 'halves-triangles')",
    )
    validation.number(self.name, 'slope', self.slope, above=0)
    validation.choice(self.name, 'distance', self.distance, DISTANCES)
    validation.choice(self.name, 'fill_with', self.fill_with, FILLS)

  def check_dims(self, dims_):
    found = head_assignment(self.directions, dims_.num_heads)
    ok = found is not None and len(head_slopes(found[0])) == dims_.num_heads
    validation.require(
        ok,
        self.name,
        'num_heads',
        dims_.num_heads,
        f'a head count the reference assigns directions={self.directions!r} to (one set: a multiple of 4; two sets: '
        '12 or 16, or 6 with a second set of none / zero heads; three: 12 or 16; four: 16)',
    )

  def heads(self, num_heads: int):
    """(directions per head, slope per head) as the reference assigns them."""
    names, dirs = head_assignment(self.directions, num_heads)
    return dirs, head_slopes(names)

  def bias(self, params, delta):
    num_heads = contract.dims(params).num_heads
    dirs, slopes = self.heads(num_heads)
    d = jnp.asarray(delta, jnp.float32)
    dy, dx = -d[..., 0], -d[..., 1]  # delta = p_i - p_j (row, column); the reference's key minus query
    squared = dx * dx + dy * dy
    dist = jnp.where(squared > 0, jnp.sqrt(jnp.where(squared > 0, squared, 1.0)), 0.0)
    penalty = {'linear': dist, 'sqrt': jnp.sqrt(dist), 'square': squared}[self.distance]
    masks = _kept_masks(dx, dy)
    heads = []
    for words, s in zip(dirs, slopes):
      value = jnp.zeros_like(dist) if 'zero' in words else penalty * (s * self.slope)
      masked = jnp.zeros(dist.shape, bool)
      for w in words:
        if w.startswith('diag_'):
          _, a, b = w.split('_')
          masked = masked | (masks['tri_' + a] & masks['tri_' + b])
        elif w != 'zero':
          masked = masked | masks[w]
      # fill 'inf': the reference's inf * slopes -> bfloat16 max (negated); 'zero': 0 outside the cone.
      heads.append(-jnp.where(masked, MASK if self.fill_with == 'inf' else 0.0, value))
    return jnp.stack(heads, axis=-1)
