"""Position remaps at inference: Self-Extend, ReRoPE (and leaky ReRoPE), Dual Chunk Attention.

Each wraps a rotary or scalar-bias `base` and changes which positions it sees, without new parameters, so a
model trained with `rope` can be evaluated with `self_extend(rope)`. A remap returns one or more
`contract.ScoreSet`s: positions for the queries and keys, and the region of (query, key) pairs whose score
comes from that set. The attention layer (kind POSITION_REMAP) computes the base's scores per set and merges
them by region, as the reference implementations merge two or three attention-score matrices. Distances
d = i - j >= 0 (query minus key; the package's rel = j - i = -d). All remaps are causal.

  self_extend(base, group_size=G, window=W)      Jin et al. 2024, "LLM Maybe LongLM" (reference: LongLM's
      SelfExtend.py). Pairs with d < W use the true positions; the others use grouped ones, queries at
      i // G + W - W // G and keys at j // G, so far distances are floor-divided by G and continue from W.
  rerope(base, window=W, leak=None)              Su 2023, "ReRoPE" (kexue.fm/archives/9708, reference:
      bojone/rerope). Pairs with d < W use the true positions; the others see distance W: queries at W,
      keys at 0. Leaky ReRoPE (leak=k, an int >= 2): the others see W + (d - W) / k, i.e. queries at
      (i + W (k - 1)) / k and keys at j / k (a rotary base rotating at positions / k needs `rotate_divided`).
  dual_chunk(base, chunk=S, local_window=w)      An et al. 2024, "Training-Free Long-Context Scaling of LLMs"
      (reference: HKUNLP/ChunkLlama). Sequences are cut into chunks of c = S - w tokens; keys sit at j mod c.
      Queries sit at i mod c for keys of their own chunk (intra), at min(i mod c + c, S) for keys of the
      previous chunk (successive), and at min(2c - 1, S) for older keys (inter: S unless the local window
      exceeds (S - 1) / 2, as the reference's table index c - 1 gives); no distance seen exceeds S.

Published defaults: Self-Extend's Llama-2 setting G = 8 (they use 2-16), W = 1024 (512-2048); ReRoPE's
W = 512 (for a 4k model; leaky k = 16); ChunkLlama's S = 3/4 and w = 1/16 of a 4096 pretraining length.
Set them from the training length (the study uses W = L_train / 2).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register

_BASE_KINDS = (contract.Kind.ROTARY, contract.Kind.SCALAR_BIAS)


def _distance(q_positions, k_positions):
  """(B, Lq, Lk) int32: d = i - j, query minus key position."""
  return jnp.asarray(q_positions, jnp.int32)[..., :, None] - jnp.asarray(k_positions, jnp.int32)[..., None, :]


class _Remap(contract.PositionRemapEncoder):
  """Shared validation and the base's properties."""

  def __post_init__(self):
    base = self.base
    if not isinstance(base, contract.Encoder):
      raise validation.invalid(self.name, 'base', base, 'an Encoder instance, e.g. make("rope")')
    validation.require(
        base.kind in _BASE_KINDS,
        self.name,
        'base',
        base,
        'a rotary or scalar-bias encoder (rope, alibi, t5, ...): a remap changes the positions they see',
    )
    validation.require(
        base.kind is not contract.Kind.ROTARY or base.one_rotation,
        self.name,
        'base',
        base,
        f'a rotary encoder that rotates queries and keys with one map (rope): a remap rotates both with '
        f'{base.name}.rotate at its remapped positions, and {base.name} treats queries and keys differently',
    )
    # A remap rotates under positions of its own (grouped, clipped, chunk-local) against one position of the
    # other axis, per tile and per decoding step: a base that reads its length from the positions it rotates
    # saw a different length on each path. Padding changed real tokens' outputs, the tiled path differed from
    # the explicit one by 0.48 at L = 600, decoding from the forward by 0.08.
    validation.require(
        not getattr(base, 'length_dependent', False),
        self.name,
        'base',
        base,
        'a rotary encoder whose frequencies do not follow the current length (rope with scaling none, linear, '
        'ntk, yarn with dynamic=False, llama3; not dynamic, longrope or dynamic YaRN), or a scalar-bias encoder',
    )
    validation.require(
        base.reads_positions,
        self.name,
        'base',
        base,
        f'an encoder that reads positions: {base.name} reads none, so remapping them changes nothing',
    )
    self._check()

  def _check(self):
    raise NotImplementedError

  @property
  def carries_position(self):
    return self.base.carries_position

  def check_positions(self, positions_upper_bound):
    return self.base.check_positions(positions_upper_bound)


@register('self_extend')
@dataclasses.dataclass(frozen=True)
class SelfExtend(_Remap):
  """`self_extend(rope, group_size=4, window=32)`: neighbour attention within W, grouped positions beyond."""

  base: contract.Encoder
  group_size: int = 8
  window: int = 1024
  is_relative = False  # Grouping floor-divides absolute positions.

  def _check(self):
    for field in ('group_size', 'window'):
      validation.positive_int(self.name, field, getattr(self, field))

  def score_sets(self, q_positions, k_positions):
    g, w = self.group_size, self.window
    neighbour = _distance(q_positions, k_positions) < w
    grouped_q = q_positions // g + (w - w // g)
    return (
        contract.ScoreSet(q_positions, k_positions, neighbour),
        contract.ScoreSet(grouped_q, k_positions // g, ~neighbour),
    )


@register('rerope')
@dataclasses.dataclass(frozen=True)
class ReRope(_Remap):
  """`rerope(rope, window=32)`: distances clipped at W; `leak=k` compresses them past W by k instead."""

  base: contract.Encoder
  window: int = 512
  leak: int | None = None

  def _check(self):
    validation.positive_int(self.name, 'window', self.window)
    if self.leak is not None:
      validation.positive_int(self.name, 'leak', self.leak, minimum=2)
      # Far queries sit at i + W (k - 1): it must fit int32 with the positions (leak=10**9 overflowed in JAX).
      validation.require(
          self.window * (self.leak - 1) <= validation.MAX_POSITION,
          self.name,
          'leak',
          self.leak,
          f'an int with window * (leak - 1) <= {validation.MAX_POSITION} (window={self.window})',
      )
      rotary = self.base.kind is contract.Kind.ROTARY
      validation.require(
          rotary and callable(getattr(self.base, 'rotate_divided', None)),
          self.name,
          'leak',
          self.leak,
          f'None for base {self.base.name!r}: leaky ReRoPE needs a rotary base '
          'that rotates at fractional positions (rotate_divided, e.g. rope)',
      )

  def score_sets(self, q_positions, k_positions):
    w, k = self.window, self.leak
    near = _distance(q_positions, k_positions) < w
    if k is None:
      far_q = jnp.full_like(q_positions, w)
      far_k = jnp.zeros_like(k_positions)
      return (contract.ScoreSet(q_positions, k_positions, near), contract.ScoreSet(far_q, far_k, ~near))
    # (i + W (k - 1)) / k - j / k = W + (d - W) / k: integer positions, frequencies divided by k.
    return (
        contract.ScoreSet(q_positions, k_positions, near),
        contract.ScoreSet(q_positions + w * (k - 1), k_positions, ~near, divisor=k),
    )


@register('dual_chunk')
@dataclasses.dataclass(frozen=True)
class DualChunk(_Remap):
  """`dual_chunk(rope, chunk=48, local_window=4)`: intra-, successive- and inter-chunk positions."""

  is_relative = False  # Chunks are cut at absolute positions.
  base: contract.Encoder
  chunk: int = 3072
  local_window: int = 256

  def _check(self):
    validation.positive_int(self.name, 'chunk', self.chunk, minimum=2)
    validation.positive_int(self.name, 'local_window', self.local_window)
    validation.require(
        self.local_window < self.chunk,
        self.name,
        'local_window',
        self.local_window,
        f'an int < chunk={self.chunk} (chunks hold chunk - local_window tokens)',
    )

  @property
  def inter_query_position(self) -> int:
    """Where queries sit for keys two or more chunks back: ChunkLlama rotates them with its successive table
    at index c - 1 (`qc_t[chunk_len - 1]`), i.e. min(2 c - 1, S), c = S - w: S unless w > (S - 1) / 2."""
    size = self.chunk - self.local_window
    return min(2 * size - 1, self.chunk)

  def score_sets(self, q_positions, k_positions):
    size = self.chunk - self.local_window  # Tokens per chunk.
    q_chunk = (q_positions // size)[..., :, None]
    k_chunk = (k_positions // size)[..., None, :]
    k_local = k_positions % size
    q_local = q_positions % size
    return (
        contract.ScoreSet(q_local, k_local, q_chunk == k_chunk),
        contract.ScoreSet(jnp.minimum(q_local + size, self.chunk), k_local, q_chunk - k_chunk == 1),
        contract.ScoreSet(jnp.full_like(q_positions, self.inter_query_position), k_local, q_chunk - k_chunk > 1),
    )
