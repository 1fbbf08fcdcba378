"""Position remaps (kind POSITION_REMAP: Self-Extend, ReRoPE, Dual Chunk): the base's term under each of the
remap's position sets, merged by region.

A rotary base: its q and k rotated under each position set once (`remap_rotations`, O(L) per set); the
content scores of each pair come from the set whose region holds it (`remap_merge`). A scalar-bias base: its
bias at the set's positions, per region. The explicit path merges the whole matrix, a tile its own pairs; a
tile wholly inside one region computes that set only (`Remap`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax.nn.terms import base


def remap_rotations(part, params, query: jax.Array, key: jax.Array, q_positions: jax.Array, k_positions: jax.Array):
  """A rotary-base remap's queries and keys rotated under each of its position sets: [(q_s, k_s)], each as
  query / key. A set's query positions depend on the queries' only (and its keys' on the keys'), so each
  axis is remapped against one position of the other: O(L), never a (Lq, Lk) region."""
  base_encoder = part.base
  q_sets = part.score_sets(q_positions, k_positions[..., :1])
  k_sets = part.score_sets(q_positions[..., :1], k_positions)
  return [
      (
          _rotate_set(base_encoder, params, query, qs.q_positions, qs.divisor),
          _rotate_set(base_encoder, params, key, ks.k_positions, ks.divisor),
      )
      for qs, ks in zip(q_sets, k_sets)
  ]


def remap_merge(part, params, rotations, query, key, q_positions, k_positions, scores=None):
  """A remap's (content scores (B, H, Lq, Lk) float32, bias (B, H, Lq, Lk) float32 or None) for the pairs of
  q_positions (B, Lq) x k_positions (B, Lk): the whole matrix (explicit path) or one tile (blockwise).

  Rotary base (`rotations` given: `remap_rotations` of these queries and keys): each pair's <R(q_s) q, R(k_s) k>
  of the set whose region holds it; `scores` (the plain q . k of the other parts) is replaced.
  Scalar-bias base (`rotations` None): `scores` (q . k if None) stays, and the bias is the base's pair_bias at
  the set's positions, per region.
  """
  base_encoder = part.base
  sets = part.score_sets(q_positions, k_positions)
  if rotations is not None:
    terms = [
        lambda q=q, k=k: jnp.einsum('bihd,bjhd->bhij', q, k, preferred_element_type=jnp.float32) for q, k in rotations
    ]
    # Pairs in no region (keys ahead of the query for chunked remaps) keep the last set's score: masked.
    return _merge_regions(sets, terms), None
  if scores is None:
    scores = jnp.einsum('bihd,bjhd->bhij', query, key, preferred_element_type=jnp.float32)
  for s in sets:
    if s.divisor != 1:
      raise ValueError(f'{part.name}: a scalar-bias base cannot read fractional positions (divisor ' f'{s.divisor}).')
  terms = [
      lambda s=s: jnp.asarray(
          jnp.moveaxis(
              base_encoder.pair_bias(params, s.q_positions[..., :, None], s.k_positions[..., None, :]), -1, -3
          ),
          jnp.float32,
      )
      for s in sets
  ]
  return scores, _merge_regions(sets, terms)


def _merge_regions(sets, terms):
  """Each pair's term from the set whose region holds it (the regions are disjoint). A block of pairs that one
  region holds whole (most tiles far from the diagonal) computes that set's term only (`lax.switch`)."""

  def merged():
    out = None
    for s, term in zip(sets, terms):
      out = term() if out is None else jnp.where(s.region[:, None], term(), out)
    return out

  if len(sets) == 1:
    return terms[0]()
  whole = jnp.stack([jnp.all(s.region) for s in sets])
  index = jnp.where(jnp.any(whole), jnp.argmax(whole), len(sets))
  return jax.lax.switch(index, [*terms, merged])


def _rotate_set(base_encoder, params, x, positions, divisor):
  x32 = x.astype(jnp.float32)
  if divisor == 1:
    return base_encoder.rotate(params, x32, positions).astype(x.dtype)
  return base_encoder.rotate_divided(params, x32, positions, divisor).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class Remap(base.Term):
  """A position remap: a rotary base's queries and keys rotated under each position set once (`prepare`); a
  tile merges its sets by region with `remap_merge` on the tile's positions (a scalar base: its bias there).
  `rotary`: whether the base rotates (decided by `select.term_for`)."""

  stage = base.Stage.CONTENT

  rotary: bool

  def prepare(self, part, params, ctx):
    if not self.rotary:
      return {'params': params}
    rotations = remap_rotations(part, params, ctx.query, ctx.key, ctx.q_pos, ctx.k_pos)
    return {'params': params, 'q': [q for q, _ in rotations], 'k': [k for _, k in rotations]}

  def local(self, theta, tile):
    if not self.rotary:
      return theta
    return {
        'params': theta['params'],
        'q': [jax.lax.dynamic_slice_in_dim(q, tile.qs, tile.bq, axis=1) for q in theta['q']],
        'k': [jax.lax.dynamic_slice_in_dim(k, tile.ks, tile.bk, axis=1) for k in theta['k']],
    }

  def accumulate(self, acc, d_local, tile):
    params = jax.tree.map(jnp.add, acc['params'], d_local['params'])
    if not self.rotary:
      return {'params': params}
    add = lambda a, d, first: jax.lax.dynamic_update_slice_in_dim(
        a, jax.lax.dynamic_slice_in_dim(a, first, d.shape[1], axis=1) + d, first, axis=1
    )
    return {
        'params': params,
        'q': [add(a, d, tile.qs) for a, d in zip(acc['q'], d_local['q'])],
        'k': [add(a, d, tile.ks) for a, d in zip(acc['k'], d_local['k'])],
    }

  def content(self, part, local, content_q, k_t, scores, tile, valid=None, query=None):
    rotations = list(zip(local['q'], local['k'])) if self.rotary else None
    return remap_merge(part, local['params'], rotations, content_q, k_t, tile.q_pos, tile.k_pos, scores)
