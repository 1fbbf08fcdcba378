"""Where one attention call's tokens sit, as values: 1-D `Positions`, a static `Grid` or explicit `Coordinates`.

    Positions(offset, query, key, query_segments, key_segments)   # 1-D: an offset, explicit positions, documents
    Grid(shape, class_token, segments)                            # the tokens are a grid in raster order
    Coordinates(values, segments)                                 # each token's coordinates (B, L, axes)

`call.AttentionInputs` carries one of them, and `select.term_for` chooses each part's Term by its kind and by the
type of this value (a grid bias on a `Grid` gathers from its table of distinct offsets, at `Coordinates` it
evaluates each pair): the only place that compares the types. A `Grid` and `Coordinates` are self-attention
(queries = keys, offset 0, no 1-D positions); they answer the 1-D fields the paths read (`offset`, `query`, `key`,
the segments) as contiguous self-attention does, so the tile loops and masks need no second path.

Defined here, below `call` and `select` (which both read them); `relpos_jax.nn.call` re-exports them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import grid as grid_lib
from relpos_jax import validation


@dataclasses.dataclass(frozen=True)
class Positions:
  """1-D positions: query i sits at key index `offset` + i (a KV cache's fill), and the position terms read
  `query` (B, Lq) and `key` (B, Lk) int positions when given (both or neither; None: contiguous, queries at
  offset + i, keys at j). `query_segments` (B, Lq), `key_segments` (B, Lk) int document ids of packed sequences
  (both or neither): query i sees key j only when their ids are equal."""

  offset: Any = 0
  query: jax.Array | None = None
  key: jax.Array | None = None
  query_segments: jax.Array | None = None
  key_segments: jax.Array | None = None

  @property
  def contiguous(self) -> bool:
    return self.query is None

  @property
  def segmented(self) -> bool:
    return self.query_segments is not None

  def without_segments(self) -> Positions:
    """The same positions, the document mask taken elsewhere (folded into a mask)."""
    return dataclasses.replace(self, query_segments=None, key_segments=None)

  def for_rotation(self, batch: int, length: int, padding_mask=None) -> jax.Array:
    """Int32 (batch, length): the positions a layer's rotary parts rotate its tokens at (self-attention), the
    padding at 0 (padding counts in no length: dynamic NTK, YaRN)."""
    rot = self.query
    if rot is None:
      rot = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32) + jnp.asarray(self.offset, jnp.int32), (batch, length))
    return rot if padding_mask is None else jnp.where(padding_mask, rot, 0)


class SelfAttention:
  """What a grid's positions answer to the 1-D fields the paths read: queries = keys, offset 0, no 1-D
  positions (a tile's indices are the tokens' raster indices), and the tokens' document ids (`segments`, (B, L)
  int, or None) on both sides."""

  offset = 0
  query = None
  key = None
  contiguous = True

  @property
  def query_segments(self):
    return self.segments

  @property
  def key_segments(self):
    return self.segments

  @property
  def segmented(self) -> bool:
    return self.segments is not None

  def without_segments(self):
    return dataclasses.replace(self, segments=None)

  def for_rotation(self, batch: int, length: int, padding_mask=None) -> jax.Array:
    """(batch, length, axes): the coordinates the grid's rotary parts rotate the tokens at (padding included)."""
    del length, padding_mask
    return self.coordinates(batch)


@dataclasses.dataclass(frozen=True)
class Grid(SelfAttention):
  """The tokens are the grid `shape` ((H, W) or (T, H, W), static) in raster order, after a class token first
  when `class_token`: the grid's counterpart of contiguous positions (a relative bias has a table of the
  prod(2n - 1) distinct offsets). `segments`: (B, L) document ids of packed images, or None."""

  shape: tuple
  class_token: bool = False
  segments: jax.Array | None = None

  @classmethod
  def checked(cls, who: str, shape, class_token, segments=None) -> Grid:
    shape = grid_lib.positions.check_shape(who, shape)
    return cls(shape, validation.boolean(who, 'class_token', class_token), segments)

  @property
  def num_tokens(self) -> int:
    return int(np.prod(self.shape)) + int(self.class_token)

  def coordinates(self, batch: int) -> jax.Array:
    """Int32 (batch, L, axes): every token's coordinates (a class token's are CLASS_TOKEN)."""
    coords = grid_lib.grid_positions(self.shape, class_token=self.class_token)
    return jnp.broadcast_to(coords, (batch,) + coords.shape)


@dataclasses.dataclass(frozen=True)
class Coordinates(SelfAttention):
  """Explicit coordinates (B, L, axes), int or float, of each token (Qwen2-VL style mixed sequences, shifted or
  float coordinates): no table of distinct offsets exists, every pair is evaluated. `segments` as `Grid`'s."""

  values: jax.Array
  segments: jax.Array | None = None

  def coordinates(self, batch: int) -> jax.Array:
    del batch
    return self.values
