"""Terms that read the content q . k along the keys: counts of gates (CoPE: `CountedPositions`), a replaced
content logit (PaTH: `ReplacedContent`), a score transform (DAPE: `ScoreTransform`), a
normalizer replacing the softmax (stick-breaking: `Normalizer`), and the refusal of a part with no per-tile
form (`NoTileForm`).

  counts along the keys (CoPE)   p_ij = (query i's gates on the keys of j's tile from j on) + (its gates on
                                 every nearer key tile): a carry per (query tile, key tile) from `complete`.
  replaced content (PaTH)        a_ij reads every token between j and i through a carry across the keys: built
                                 whole on the one tile of the explicit path (its chunked scan); tiled, key tiles
                                 nearest first with the query carried per row through the tiles between
                                 (`carries`), each key tile's data computed once in `complete`.
  score transform (DAPE)         A + B + f([A; B]) on the tile: B from the base's own Term, f per pair (v1);
                                 v2's convolutions along the keys read `key_halo` keys on each side, so a
                                 tile also scores a strip of that many keys left and right and crops f's
                                 output to the tile (`blockwise.transformed`).
  normalizer (stick-breaking)    no softmax: key tiles from the nearest to the farthest, the encoder's
                                 `tile_weights` with a per-row carry of sum log(1 - beta) (the normalizer
                                 kernel in blockwise); the remainder (1 - sum_j A_ij) v_own outside.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax.encoders import contract
from relpos_jax.nn.terms import base


def check_features(parts, features, batch: int, k_len: int) -> list:
  """The token features `attend` was given: one entry per part, each None or (batch, k_len, F)."""
  if features is None:
    features = [None] * len(parts)
  if len(features) != len(parts):
    raise ValueError(
        f'attend: features must have one entry per attention part ({len(parts)}), got ' f'{len(features)}.'
    )
  for part, f in zip(parts, features):
    if f is not None and (f.ndim != 3 or f.shape[:2] != (batch, k_len)):
      raise ValueError(
          f'attend: the token features of {part.name} must be (batch, k_len, F) = '
          f'({batch}, {k_len}, F), got {f.shape}.'
      )
  return list(features)


@dataclasses.dataclass(frozen=True)
class CountedPositions(base.Contextual):
  """A term of counts along the keys (CoPE): p_ij = (query i's gates on the keys of j's tile from j on) +
  (its gates on every nearer key tile). The second sum is a carry per (query tile, key tile), from the row
  sums of every tile's gates (`complete`, once, by plain autodiff: O(L^2 / bk) floats); a tile adds its own
  suffix sums and reads the encoder's `counted_term` at p."""

  per_pair_work = True

  scale: float
  shares_scores: bool = True  # its q . k is the content score too (no query bias u, no remap replacing it)

  def prepare(self, part, params, ctx):
    return {'params': params, 'carry': None}

  def complete(self, part, theta, cfg, aux, q, k):
    def query_tile(t):
      qs = t * cfg.bq
      q_t = jax.lax.dynamic_slice_in_dim(q, qs, cfg.bq, axis=1).astype(jnp.float32)

      @jax.checkpoint  # the gates of a tile are recomputed in the backward pass, never stored
      def row_sums(n):
        ks = n * cfg.bk
        k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1).astype(jnp.float32)
        logits = jnp.einsum('bihd,bjhd->bhij', q_t, k_t) * np.float32(self.scale)
        return jnp.sum(part.gates(logits, base.tile_mask(cfg, aux, base.tile_at(cfg, aux, qs, ks))), axis=-1)

      return jax.lax.map(row_sums, jnp.arange(cfg.num_k_tiles, dtype=jnp.int32))  # (nk, B, H, bq)

    if cfg.num_k_tiles == 1:  # one key tile: no nearer tile, nothing to carry
      b, _, h, _ = q.shape
      return {'params': theta['params'], 'carry': jnp.zeros((cfg.num_q_tiles, 1, b, h, cfg.bq), jnp.float32)}
    sums = jax.lax.map(query_tile, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))  # (nq, nk, B, H, bq)
    nearer = jnp.flip(jnp.cumsum(jnp.flip(sums, 1), axis=1), 1) - sums  # the key tiles after n
    return {'params': theta['params'], 'carry': nearer}

  def local(self, theta, tile):
    t, n = tile.qs // tile.bq, tile.ks // tile.bk
    carry = jax.lax.dynamic_index_in_dim(jax.lax.dynamic_index_in_dim(theta['carry'], t, 0, False), n, 0, False)
    return {'params': theta['params'], 'carry': carry}

  def accumulate(self, acc, d_local, tile):
    first = base.start(tile.qs // tile.bq, tile.ks // tile.bk, *(0,) * (acc['carry'].ndim - 2))
    update = d_local['carry'][None, None]
    carry = jax.lax.dynamic_update_slice(
        acc['carry'], jax.lax.dynamic_slice(acc['carry'], first, update.shape) + update, first
    )
    return {'params': jax.tree.map(jnp.add, acc['params'], d_local['params']), 'carry': carry}

  def content(self, part, local, content_q, k_t, scores, tile, valid=None, query=None):
    query = content_q if query is None else query
    logits = jnp.einsum('bihd,bjhd->bhij', query, k_t, preferred_element_type=jnp.float32)  # q . k, no u
    if scores is None and self.shares_scores:
      scores = logits
    gates = part.gates(logits * np.float32(self.scale), valid)
    counts = local['carry'][..., None] + jnp.flip(jnp.cumsum(jnp.flip(gates, -1), axis=-1), -1)
    return scores, part.counted_term(local['params'], query, counts, np.float32(self.scale))


@dataclasses.dataclass(frozen=True)
class ReplacedContent(base.Contextual):
  """A contextual part whose logit replaces q . k (PaTH): a_ij reads every token between j and i.

  One tile (the explicit path, `one_tile`): the encoder's `score_term` builds the logits whole (its chunked
  scan). Tiled (`carries`): `complete` computes each key tile's data once (the encoder's `key_tiles`: its
  directions, WY transform, carried keys and whole product), and the tile loops visit a query tile's key
  tiles nearest first, threading per query row the query carried through the tiles between (`carry`, the
  encoder's `tile_logits`); the blockwise backward runs that carry's adjoint farthest first, recomputing the
  carries of one query tile at a time (`blockwise.attention_bwd`)."""

  per_pair_work = True  # the diagonal tiles' O(bq bk (bk + D)) work: the smaller CPU tiles are faster

  one_tile: bool = True

  @property
  def carries(self) -> bool:
    return not self.one_tile

  def prepare(self, part, params, ctx):
    if self.one_tile:
      return {'params': params, 'feature': ctx.feature, 'logits': None}
    w, beta = part.directions(params, ctx.feature, ctx.key_mask)
    return {'w': w, 'beta': beta}

  def complete(self, part, theta, cfg, aux, q, k):
    if not self.one_tile:
      w, beta = (base.pad_axis(theta[name], 1, k.shape[1]) for name in ('w', 'beta'))  # padding: H = I
      return part.key_tiles(w, beta, k, cfg.bk)
    tile = base.tile_at(cfg, aux, jnp.int32(0), jnp.int32(0))
    valid = base.tile_mask(cfg, aux, tile)
    b, q_len = q.shape[:2]
    ctx = contract.AttentionContext(
        query=q.astype(jnp.float32),
        key=k.astype(jnp.float32),
        features=theta['feature'],
        valid=jnp.ones((1, 1, cfg.bq, cfg.bk), bool) if valid is None else valid,
        key_mask=aux.get('key_mask', jnp.ones((b, cfg.k_len), bool)),
        q_index=jnp.arange(q_len, dtype=jnp.int32) + aux['q_offset'],
        scale=cfg.scale,
    )
    return {**theta, 'logits': jnp.asarray(part.score_term(theta['params'], ctx), jnp.float32)}

  def local(self, theta, tile):
    if self.one_tile:  # the tile's keys: all of them, or a score transform's halo strip (masked, outside them)
      return {**theta, 'logits': jax.lax.dynamic_slice_in_dim(theta['logits'], tile.ks, tile.bk, axis=-1)}
    n = tile.ks // tile.bk
    return jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, n, 2, keepdims=False), theta)

  def accumulate(self, acc, d_local, tile):
    if self.one_tile:
      return jax.tree.map(jnp.add, acc, d_local)
    n = tile.ks // tile.bk

    def add(total, part):
      part = part[:, :, None]
      first = base.start(0, 0, n, *(0,) * (total.ndim - 3))
      return jax.lax.dynamic_update_slice(total, jax.lax.dynamic_slice(total, first, part.shape) + part, first)

    return jax.tree.map(add, acc, d_local)

  def initial_carry(self, part, q_t):
    b, bq, h, d = q_t.shape
    return jnp.zeros((b, h, bq, d), jnp.float32)

  def carry(self, part, local, q_t, k_t, carry, tile):
    rows = tile.q_offset + tile.qs - tile.ks + jnp.arange(tile.bq, dtype=jnp.int32)
    q_t, k_t = (jnp.moveaxis(a.astype(jnp.float32), 1, 2) for a in (q_t, k_t))
    logits, carry = part.tile_logits(local, q_t, k_t, carry, rows)
    return {**local, 'logits': logits}, carry

  def content(self, part, local, content_q, k_t, scores, tile, valid=None, query=None):
    return local['logits'], None


@dataclasses.dataclass(frozen=True)
class ScoreTransform(base.Term):
  """A score transform (DAPE): A + B + f([A; B]) on the tile, B from the base's own Term. A correction that
  reads neighbouring keys (`key_halo`, version 2's convolutions) sees `halo` extra key columns on each side,
  scored exactly like the tile's own (`blockwise.logits`), then cropped: the explicit path's result, tile by
  tile."""

  stage = base.Stage.SCORE_TRANSFORM
  per_pair_work = True
  reads_content = True

  base: base.Term
  halo: int = 0

  def prepare(self, part, params, ctx):
    return {'layers': params['layers'], 'base': self.base.prepare(part.base, params['base'], ctx)}

  def local(self, theta, tile):
    return {'layers': theta['layers'], 'base': self.base.local(theta['base'], tile)}

  def accumulate(self, acc, d_local, tile):
    return {
        'layers': jax.tree.map(jnp.add, acc['layers'], d_local['layers']),
        'base': self.base.accumulate(acc['base'], d_local['base'], tile),
    }

  def base_bias(self, part, local, tile):
    return self.base.bias(part.base, local['base'], tile)


@dataclasses.dataclass(frozen=True)
class Normalizer(base.Term):
  """Replaces the softmax (stick-breaking): no term of its own; the kernel folds its `tile_weights`."""

  stage = base.Stage.NORMALIZER
  per_pair_work = True
  reads_content = True

  def prepare(self, part, params, ctx):
    return None


@dataclasses.dataclass(frozen=True)
class NoTileForm(base.Term):
  """A part with no per-tile form (a normalizer without `tiles`, a contextual term of none of the forms above,
  an absolute part handed to attention): `select.terms_for` refuses it, naming the encoder and its kind."""

  stage: base.Stage = base.Stage.CONTENT
  reads_content: bool = False
  tiles = False


@dataclasses.dataclass(frozen=True)
class ContextualWithoutTiles(base.Contextual):
  """A contextual part of none of the tiled forms: its token features still count (the layer caches them),
  but `select.terms_for` refuses it."""

  tiles = False
