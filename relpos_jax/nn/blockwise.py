"""Blockwise attention: queries and keys in tiles, an online softmax, every position term built per tile.

`implementation='blockwise'` of `functional.attend`. The explicit path materialises (B, H, Lq, Lk) scores
and, for a scalar bias, an (H, Lq, Lk) bias; this one never holds more than one (B, H, bq, bk) tile of
scores, so memory grows linearly with the length, for training too.

Forward (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Rabe & Staats 2021,
"Self-attention does not need O(n^2) memory"; Dao et al. 2022/2023, FlashAttention 1/2): for each query
tile, loop over key tiles keeping the running row maximum m, the running normaliser l and the unnormalised
output acc,

    s     = (q_t . k_t + position scores) * scale + bias_t          masked entries: a large negative value
    m'    = max(m, rowmax s);  p = exp(s - m');  c = exp(m - m')
    l     = c l + rowsum p;    acc = c acc + p v_t + (a^V term of p);   m = m'

and output acc / l, keeping lse = m + log l. Under a causal mask the key tiles wholly ahead of the query
tile (index > q_offset + last query) are never visited.

Backward: a custom VJP that recomputes each tile from q, k, v, the position data and lse (FlashAttention-2's
backward): P = exp(s - lse), dP = dO . (v + a^V)^T, dS = P (dP - D) with D_i = dO_i . O_i, then the tile's
own score and value functions are differentiated by `jax.vjp` to give dq, dk, dv and the position data's
gradient. Nothing (Lq, Lk)-sized is saved or rebuilt: memory O(L) in training (a normalizer, stick-breaking, also
saves its carry per (query, key tile): Lq x Lk / bk floats, below the output's size up to Lk = bk x head_dim).

A Term that carries state per query row across key tiles (`terms.base.Term.carries`: PaTH's query carried
through the Householder products of the tiles between) has the forward visit key tiles nearest first (the
online softmax is order-free) and thread its carry (`carried_logits`). The backward still visits them
farthest first: per query tile it first recomputes the carry entering each key tile (`_carries_entering`,
num_k_tiles x bq rows, freed after the query tile), then each tile's `jax.vjp` maps the cotangent of the carry
leaving it to that of the carry entering it, which the next nearer tile receives. The normalizer's fold
(below) threads the same carries.

What each part contributes to a tile is its Term (`relpos_jax.nn.terms`: chosen per kind by `terms.select`,
the same for the explicit path, which is the one-tile case `explicit.attend`); this module folds a tile's
Terms into its logits by their declared stage, in one order (`tile_logits`), and runs the tile loops. It never
names a kind.

Tile sizes: `block_size` None (512 x 512), an int (square tiles) or (block_q, block_k); each capped at the
sequence length, remainders padded (padded keys masked, padded queries dropped). Numerics: float32 scores
and accumulation whatever the inputs' dtype; the same large finite negative for masked scores as the other
paths, so a query that sees no key gives what they give (the caller zeroes it).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax.nn import terms

DEFAULT_BLOCK_SIZE = (512, 512)
# A Term with elementwise work of its own on every pair (`terms.base.Term.per_pair_work`: a normalizer, a score
# transform, counts along the keys) keeps several (B, H, bq, bk) float32 intermediates alive per tile: on a
# CPU, 256 x 256 tiles halve stick-breaking's fwd+bwd at L = 2,048 and take a quarter off CoPE's and DAPE's
# (docs/benchmarks.md 4k), while plain tiles are fastest at 512.
PER_PAIR_BLOCK_SIZE = (256, 256)
# dot_product_attention's own choice (jax.nn.functions._get_large_negative): finite in float32. Every path
# masks with it (functional imports it from here).
LARGE_NEGATIVE = np.float32(-0.7 * np.finfo(np.float32).max)


def block_sizes(block_size, per_pair_work: bool = False) -> tuple[int, int]:
  """None -> the default (block_q, block_k), on a CPU smaller for Terms with per-pair work; an int -> square
  tiles; a pair -> itself. Else ValueError."""
  if block_size is None:
    return PER_PAIR_BLOCK_SIZE if per_pair_work and jax.default_backend() == 'cpu' else DEFAULT_BLOCK_SIZE
  pair = (block_size, block_size) if isinstance(block_size, numbers.Integral) else block_size
  try:
    pair = tuple(pair)
  except TypeError:
    pair = ()
  ok = len(pair) == 2 and all(isinstance(b, numbers.Integral) and not isinstance(b, bool) and b >= 1 for b in pair)
  if not ok:
    raise ValueError(
        f'block_size={block_size!r} is invalid; allowed: None (default {DEFAULT_BLOCK_SIZE}), '
        'an int >= 1 (square tiles) or a pair (block_q, block_k) of ints >= 1.'
    )
  return int(pair[0]), int(pair[1])


# ----------------------------------------------------------------------------------------------------------
# The kernel.


@dataclasses.dataclass(frozen=True)
class TileConfig:
  """Everything static about one call (hashable: the custom VJP's nondiff argument)."""

  parts: tuple  # the parts with a term inside attention (not rotary)
  part_terms: tuple
  given_bias: bool  # theta ends with a precomputed bias
  causal: bool
  scale: float
  bq: int
  bk: int
  num_q_tiles: int
  num_k_tiles: int
  k_len: int  # real keys (later ones are padding)
  has_key_mask: bool
  has_mask: bool
  has_segments: bool = False  # aux holds q_segment_ids / k_segment_ids: a query sees its own document's keys only
  normalizer: int | None = None  # index in parts of a normalizer replacing the softmax (stick-breaking)
  halo: int = 0  # extra key columns on each side of a tile that a score transform reads (DAPE version 2)
  # How a tile reads the precomputed bias: sliced from (B|1, H, Lq, Lk).
  given_term: terms.base.Term = terms.scalar.GivenBias()

  @property
  def carries(self) -> bool:
    """Some Term carries state per query row across key tiles (`terms.base.Term.carries`): nearest first."""
    return any(t.carries for t in self.part_terms)


def tile_locals(cfg: TileConfig, theta, tile: terms.base.Tile, k=None, aux=None):
  """The tile's share of every part's data; with a halo (and k given), also each side strip's keys and share."""
  shares = [t.local(th, tile) for t, th in zip(cfg.part_terms, theta['parts'])]
  given = cfg.given_term.local(theta['given'], tile) if cfg.given_bias else None
  out = {'parts': shares, 'given': given, 'u': theta['u']}
  if cfg.halo and k is not None:
    out['halo'] = tuple(
        (jax.lax.dynamic_slice_in_dim(k, side.ks, cfg.halo, axis=1), tile_locals(cfg, theta, side))
        for side in _halo_tiles(cfg, aux, tile)
    )
  return out


def _accumulate(cfg: TileConfig, acc, d_local, tile: terms.base.Tile, aux=None):
  shares = [t.accumulate(a, d, tile) for t, a, d in zip(cfg.part_terms, acc['parts'], d_local['parts'])]
  given = cfg.given_term.accumulate(acc['given'], d_local['given'], tile) if cfg.given_bias else None
  u = None if acc['u'] is None else acc['u'] + d_local['u']
  out = {'parts': shares, 'given': given, 'u': u}
  for side, (_, d_side) in zip(_halo_tiles(cfg, aux, tile) if 'halo' in d_local else (), d_local.get('halo', ())):
    out = _accumulate(cfg, out, d_side, side)
  return out


def _halo_tiles(cfg: TileConfig, aux, tile: terms.base.Tile) -> tuple[terms.base.Tile, terms.base.Tile]:
  """The strips of `cfg.halo` keys left and right of a tile. A strip that starts outside the keys (before
  the first, after the padded last) is clamped by the slices but wholly masked (`_valid`): its values never
  count, and its gradient is zero. Every other strip lies inside the keys (`prepare` keeps bk >= halo)."""
  h = cfg.halo

  def side(ks):
    return dataclasses.replace(tile, ks=ks, bk=h, k_pos=jax.lax.dynamic_slice_in_dim(aux['k_pos'], ks, h, axis=1))

  return side(tile.ks - h), side(tile.ks + tile.bk)


def _add_halo_keys(cfg: TileConfig, dk, d_local, tile: terms.base.Tile):
  """dk plus the gradients of the side strips' keys (zero for a strip outside the keys)."""
  for (d_k_side, _), start in zip(d_local.get('halo', ()), (tile.ks - cfg.halo, tile.ks + tile.bk)):
    start = jnp.clip(start, 0, dk.shape[1] - cfg.halo)  # where the forward's clamped slice read
    dk = jax.lax.dynamic_update_slice_in_dim(
        dk, jax.lax.dynamic_slice_in_dim(dk, start, cfg.halo, axis=1) + d_k_side.astype(dk.dtype), start, axis=1
    )
  return dk


def tile_logits(cfg: TileConfig, aux, tile: terms.base.Tile, q_t, k_t, local):
  """The tile's masked scores (B, H, bq, bk) float32, exactly as the explicit path computes them: every score
  and bias, then the score transforms (DAPE), then the other transforms (temperatures), then the mask."""
  valid = terms.base.tile_mask(cfg, aux, tile)
  s = _scores(cfg, tile, q_t, k_t, local, valid)
  for index, term in enumerate(cfg.part_terms):
    if term.stage is terms.base.Stage.SCORE_TRANSFORM:
      s = _transformed(cfg, aux, tile, q_t, s, valid, index, local)
  for part, term, th in zip(cfg.parts, cfg.part_terms, local['parts']):
    if term.stage is not terms.base.Stage.SCORE_TRANSFORM:
      s = term.transform(part, th, s, tile)
  return s if valid is None else jnp.where(valid, s, LARGE_NEGATIVE)


def _transformed(cfg: TileConfig, aux, tile: terms.base.Tile, q_t, s, valid, index: int, local):
  """A score transform on the tile: with a halo, on [left strip | tile | right strip], cropped to the tile."""
  part, term = cfg.parts[index], cfg.part_terms[index]
  layers = {'layers': local['parts'][index]['layers']}
  bias = term.base_bias(part, local['parts'][index], tile)
  if not term.halo:
    return part.transform(layers, s, bias, valid)
  pieces = []
  for side, (k_side, side_local) in zip(_halo_tiles(cfg, aux, tile), local['halo']):
    side_valid = terms.base.tile_mask(cfg, aux, side)
    side_scores = _scores(cfg, side, q_t, k_side, side_local, side_valid)
    pieces.append((side_scores, term.base_bias(part, side_local['parts'][index], side), side_valid))
  (s_left, b_left, v_left), (s_right, b_right, v_right) = pieces
  everything = (s, s_left, s_right, v_left, v_right) + (() if valid is None else (valid,))
  batch = max(x.shape[0] for x in everything)
  scores = jnp.concatenate([s_left, s, s_right], axis=-1)
  widths = (cfg.halo, tile.bk, cfg.halo)
  full = lambda x, width: jnp.broadcast_to(x, (batch, s.shape[1], cfg.bq, width))
  biases = jnp.concatenate([full(b, w) for b, w in zip((b_left, bias, b_right), widths)], axis=-1)
  middle = jnp.ones((1, 1, cfg.bq, tile.bk), bool) if valid is None else valid
  flags = jnp.concatenate(
      [jnp.broadcast_to(v, (batch, 1, cfg.bq, w)) for v, w in zip((v_left, middle, v_right), widths)], -1
  )
  out = part.transform(layers, jnp.broadcast_to(scores, (batch,) + scores.shape[1:]), biases, flags)
  return out[..., cfg.halo : cfg.halo + tile.bk]


def _scores(cfg: TileConfig, tile: terms.base.Tile, q_t, k_t, local, valid=None):
  """Every score and bias of the tile, scaled and summed, before any transform (unmasked; `valid` is for the
  terms that read the mask, CoPE's gates)."""
  content_q = q_t
  if local['u'] is not None:
    content_q = q_t.astype(jnp.float32) + local['u']
    k_t = k_t.astype(jnp.float32)
  s, remap_bias = None, None
  for part, term, th in zip(cfg.parts, cfg.part_terms, local['parts']):
    s, b = term.content(part, th, content_q, k_t, s, tile, valid, q_t)
    if b is not None:
      remap_bias = b if remap_bias is None else remap_bias + b
  if s is None:
    s = jnp.einsum('bihd,bjhd->bhij', content_q, k_t, preferred_element_type=jnp.float32)
  for part, term, th in zip(cfg.parts, cfg.part_terms, local['parts']):
    extra = term.scores(part, th, q_t, tile)
    if extra is not None:
      s = s + extra
  s = s * np.float32(cfg.scale)
  for part, term, th in zip(cfg.parts, cfg.part_terms, local['parts']):
    b = term.bias(part, th, tile)
    if b is not None:
      s = s + b
  if cfg.given_bias:
    s = s + cfg.given_term.bias(None, local['given'], tile)
  if remap_bias is not None:
    s = s + remap_bias
  return s


def initial_carries(cfg: TileConfig, q_t):
  """Each part's carry entering a query tile's nearest key tile (None for a Term that carries nothing)."""
  return tuple(t.initial_carry(part, q_t) if t.carries else None for part, t in zip(cfg.parts, cfg.part_terms))


def carried_logits(cfg: TileConfig, aux, tile: terms.base.Tile, q_t, k_t, local, carries):
  """`tile_logits` after each carrying Term has taken its step on the tile (`terms.base.Term.carry`): (the tile's
  masked scores, the carries into the next farther key tile)."""
  shares, out = list(local['parts']), list(carries)
  for i, (part, term) in enumerate(zip(cfg.parts, cfg.part_terms)):
    if term.carries:
      shares[i], out[i] = term.carry(part, shares[i], q_t, k_t, carries[i], tile)
  return tile_logits(cfg, aux, tile, q_t, k_t, {**local, 'parts': shares}), tuple(out)


def _carries_entering(cfg: TileConfig, aux, theta, q_t, k, qs, carries):
  """The carries entering each key tile of query tile qs, leading axis num_k_tiles (the backward's recomputation:
  the forward's nearest-first sweep of the carrying Terms' steps alone, O(num_k_tiles x bq) rows per carry)."""
  lo, hi, key_tile_of = _reverse_key_tiles(cfg, aux, qs)
  saved = jax.tree.map(lambda x: jnp.zeros((cfg.num_k_tiles,) + x.shape, x.dtype), carries)

  def key_tile(i, inner):
    carries, saved = inner
    n = key_tile_of(i)
    saved = jax.tree.map(lambda a, x: jax.lax.dynamic_update_index_in_dim(a, x, n, 0), saved, carries)
    tile = terms.base.tile_at(cfg, aux, qs, n * cfg.bk)
    local = tile_locals(cfg, theta, tile)
    k_t = jax.lax.dynamic_slice_in_dim(k, n * cfg.bk, cfg.bk, axis=1)
    carries = tuple(
        term.carry(part, th, q_t, k_t, c, tile)[1] if term.carries else None
        for part, term, th, c in zip(cfg.parts, cfg.part_terms, local['parts'], carries)
    )
    return carries, saved

  return jax.lax.fori_loop(lo, hi, key_tile, (carries, saved))[1]


def tile_values(cfg: TileConfig, tile: terms.base.Tile, p_t, v_t, local):
  """sum_j p_ij (v_j + a^V_ij): (B, bq, H, D) float32."""
  out = jnp.einsum('bhij,bjhd->bihd', p_t.astype(v_t.dtype), v_t, preferred_element_type=jnp.float32)
  for part, term, th in zip(cfg.parts, cfg.part_terms, local['parts']):
    extra = term.values(part, th, p_t, tile)
    if extra is not None:
      out = out + extra
  return out


def _key_tile_range(cfg: TileConfig, aux, qs):
  """[lo, hi): the key tiles query tile qs must visit (causal: none wholly ahead of its last query)."""
  if not cfg.causal:
    return 0, cfg.num_k_tiles
  last_key = qs + cfg.bq - 1 + aux['q_offset']  # the furthest key any query of the tile sees
  hi = jnp.clip(last_key // cfg.bk + 1, 0, cfg.num_k_tiles)
  return 0, hi


def _forward(cfg: TileConfig, q, k, v, theta, aux):
  b, _, h, d = q.shape

  def query_tile(t):
    qs = t * cfg.bq
    q_t = jax.lax.dynamic_slice_in_dim(q, qs, cfg.bq, axis=1)

    lo, hi, nearest_first = _reverse_key_tiles(cfg, aux, qs)

    def key_tile(i, carry):
      m, l, acc, carries = carry
      n = nearest_first(i) if cfg.carries else i  # a carrying Term's state flows from the query outwards
      ks = n * cfg.bk
      tile = terms.base.tile_at(cfg, aux, qs, ks)
      local = tile_locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      s, carries = carried_logits(cfg, aux, tile, q_t, k_t, local, carries)
      m_new = jnp.maximum(m, jnp.max(s, axis=-1))
      p = jnp.exp(s - m_new[..., None])
      correction = jnp.exp(m - m_new)  # (B, H, bq)
      l = correction * l + jnp.sum(p, axis=-1)
      acc = acc * jnp.moveaxis(correction, 1, 2)[..., None] + tile_values(cfg, tile, p, v_t, local)
      return m_new, l, acc, carries

    init = (
        jnp.full((b, h, cfg.bq), -jnp.inf, jnp.float32),
        jnp.zeros((b, h, cfg.bq), jnp.float32),
        jnp.zeros((b, cfg.bq, h, d), jnp.float32),
        initial_carries(cfg, q_t),
    )
    m, l, acc, _ = jax.lax.fori_loop(lo, hi, key_tile, init)
    seen = l > 0
    out = acc / jnp.moveaxis(jnp.where(seen, l, 1.0), 1, 2)[..., None]
    lse = jnp.where(seen, m + jnp.log(jnp.where(seen, l, 1.0)), -jnp.inf)
    return out.astype(v.dtype), lse

  out, lse = jax.lax.map(query_tile, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  out = jnp.moveaxis(out, 0, 1).reshape(b, cfg.num_q_tiles * cfg.bq, h, d)  # (nq, B, bq, H, D) -> (B, Lq, H, D)
  lse = jnp.moveaxis(lse, 0, 2).reshape(b, h, cfg.num_q_tiles * cfg.bq)
  return out, lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(cfg: TileConfig, q, k, v, theta, aux):
  return _forward(cfg, q, k, v, theta, aux)[0]


def _attention_fwd(cfg, q, k, v, theta, aux):
  out, lse = _forward(cfg, q, k, v, theta, aux)
  return out, (q, k, v, theta, aux, out, lse)


def _query_tile_rows(cfg, t, q, d_out, *per_row):
  """Query tile t's start and rows: q and d_out are (B, L, H, D) (rows on axis 1), per_row are (B, H, L)."""
  qs = t * cfg.bq
  rows = [jax.lax.dynamic_slice_in_dim(x, qs, cfg.bq, axis=1) for x in (q, d_out)]
  rows += [jax.lax.dynamic_slice_in_dim(x, qs, cfg.bq, axis=2) for x in per_row]
  return qs, rows


def _add_key_rows(cfg, ks, totals, parts):
  """Each (B, L, H, D) total plus its key tile's part at rows ks .. ks + bk."""
  return tuple(
      jax.lax.dynamic_update_slice_in_dim(
          total, jax.lax.dynamic_slice_in_dim(total, ks, cfg.bk, axis=1) + part.astype(total.dtype), ks, axis=1
      )
      for total, part in zip(totals, parts)
  )


def attention_bwd(cfg, residuals, d_out):
  q, k, v, theta, aux, out, lse = residuals
  d_out = d_out.astype(jnp.float32)
  # D_i = dO_i . O_i = sum_j P_ij dP_ij: the softmax's backward per row, once.
  delta = jnp.einsum('bihd,bihd->bhi', d_out, out.astype(jnp.float32))
  zeros = lambda x: jax.tree.map(jnp.zeros_like, x)

  def query_tile(carry, t):
    dk, dv, d_theta = carry
    qs, (q_t, do_t, lse_t, delta_t) = _query_tile_rows(cfg, t, q, d_out, lse, delta)

    carries = initial_carries(cfg, q_t)
    # A carrying Term's carries, recomputed for this query tile only (never stored per tile by the forward).
    entering = _carries_entering(cfg, aux, theta, q_t, k, qs, carries) if cfg.carries else carries

    def key_tile(n, inner):  # farthest first: the carries' adjoint flows from the farthest key tile inwards
      dq_t, dk, dv, d_theta, d_carries = inner
      ks = n * cfg.bk
      tile = terms.base.tile_at(cfg, aux, qs, ks)
      local = tile_locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      c_in = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, n, 0, keepdims=False), entering)
      (s, _), logits_vjp = jax.vjp(
          lambda q_, k_, l_, c_: carried_logits(cfg, aux, tile, q_, k_, l_, c_), q_t, k_t, local, c_in
      )
      p = jnp.exp(s - lse_t[..., None])
      _, values_vjp = jax.vjp(lambda p_, v_, l_: tile_values(cfg, tile, p_, v_, l_), p, v_t, local)
      dp, dv_t, d_local_v = values_vjp(do_t)
      ds = p * (dp - delta_t[..., None])
      # d_carries: the cotangent of the carries leaving this tile (zero at the farthest), returned for those
      # entering it, which left the next nearer tile.
      dq_part, dk_t, d_local_s, d_carries = logits_vjp((ds, d_carries))
      d_local = jax.tree.map(jnp.add, d_local_s, d_local_v)
      dk, dv = _add_key_rows(cfg, ks, (dk, dv), (dk_t, dv_t))
      dk = _add_halo_keys(cfg, dk, d_local, tile)
      d_theta = _accumulate(cfg, d_theta, d_local, tile, aux)
      return dq_t + dq_part.astype(jnp.float32), dk, dv, d_theta, d_carries

    lo, hi = _key_tile_range(cfg, aux, qs)
    dq_t = jnp.zeros(q_t.shape, jnp.float32)
    init = (dq_t, dk, dv, d_theta, jax.tree.map(jnp.zeros_like, carries))
    dq_t, dk, dv, d_theta, _ = jax.lax.fori_loop(lo, hi, key_tile, init)
    return (dk, dv, d_theta), dq_t

  init = (jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32), zeros(theta))
  (dk, dv, d_theta), dq = jax.lax.scan(query_tile, init, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  b, _, h, d = q.shape
  dq = jnp.moveaxis(dq, 0, 1).reshape(q.shape)
  return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), d_theta, None


_attention.defvjp(_attention_fwd, attention_bwd)


# ----------------------------------------------------------------------------------------------------------
# A normalizer instead of the softmax (stick-breaking): key tiles from the nearest to the farthest.
#
# Forward, per query tile: C = 0 (sum of log(1 - beta) over the allowed keys already visited, all nearer the
# query), then for each key tile, nearest first: (A, C) = tile_weights(s, allowed, C), acc += A v (+ a^V
# term), w += rowsum A. Outputs (acc, w); the remainder (1 - w) v_own is added outside, by plain autodiff.
#
# Backward: with g_ij = dL/dA_ij (from the values' VJP, plus the cotangent of w), A_ij depends on z_ij and on
# the carry entering its tile, which the nearer tiles' log(1 - beta) make up. The carry leaving a tile feeds
# every farther key, so its cotangent is F_i = sum_{farther j} g_ij A_ij. The backward visits the key tiles
# farthest first and accumulates F_i directly (0 at the farthest tile), reading the carry entering each tile
# from the forward (saved per key tile: (key tiles, B, H, Lq) float32, 1/bk of an (Lq, Lk) array). It used to
# go nearest first with F_i = G_i - R_i (all keys' sum dacc_i . acc_i + dw_i w_i minus the nearer keys'): a
# difference of two nearly equal float32 sums whose rounding every farther key's dq picked up, 2e-5 relative
# at L = 2,048 and 2.6e-4 at |z| ~ 200 against a float64 reference (the explicit path: 2e-7, 7e-6).
# The explicit path's autodiff forms the same sums as a cumulative sum, directly. Each tile is `jax.vjp` of
# its own tile_weights: no (Lq, Lk) array.


def _reverse_key_tiles(cfg, aux, qs):
  lo, hi = _key_tile_range(cfg, aux, qs)
  return lo, hi, lambda i: hi - 1 - (i - lo)  # loop index -> key tile, nearest first


def allowed_pairs(cfg, aux, tile, normalizer):
  valid = terms.base.tile_mask(cfg, aux, tile)
  if valid is None:
    valid = jnp.ones((1, 1, cfg.bq, cfg.bk), bool)
  q_index = tile.qs + jnp.arange(cfg.bq, dtype=jnp.int32) + tile.q_offset
  return normalizer.allowed(valid, q_index, tile.ks + jnp.arange(cfg.bk, dtype=jnp.int32))


def _normalized_forward(cfg: TileConfig, q, k, v, theta, aux, save_carries: bool = False):
  """(acc, w), and with save_carries the carry entering each key tile (key tiles, B, H, Lq) for the backward."""
  b, _, h, d = q.shape
  normalizer = cfg.parts[cfg.normalizer]

  def query_tile(t):
    qs = t * cfg.bq
    q_t = jax.lax.dynamic_slice_in_dim(q, qs, cfg.bq, axis=1)
    lo, hi, key_tile_of = _reverse_key_tiles(cfg, aux, qs)

    def key_tile(i, carry):
      c, w, acc, saved, carries = carry
      kt = key_tile_of(i)
      ks = kt * cfg.bk
      if save_carries:
        saved = jax.lax.dynamic_update_index_in_dim(saved, c, kt, axis=0)
      tile = terms.base.tile_at(cfg, aux, qs, ks)
      local = tile_locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      s, carries = carried_logits(cfg, aux, tile, q_t, k_t, local, carries)
      weights, c = normalizer.tile_weights(s, allowed_pairs(cfg, aux, tile, normalizer), c)
      return c, w + jnp.sum(weights, axis=-1), acc + tile_values(cfg, tile, weights, v_t, local), saved, carries

    c0 = normalizer.initial_carry((b, h, cfg.bq))
    init = (
        c0,
        jnp.zeros((b, h, cfg.bq), jnp.float32),
        jnp.zeros((b, cfg.bq, h, d), jnp.float32),
        jnp.zeros((cfg.num_k_tiles if save_carries else 0, *c0.shape), c0.dtype),
        initial_carries(cfg, q_t),
    )
    _, w, acc, saved, _ = jax.lax.fori_loop(lo, hi, key_tile, init)
    return acc, w, saved

  acc, w, saved = jax.lax.map(query_tile, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  acc = jnp.moveaxis(acc, 0, 1).reshape(b, cfg.num_q_tiles * cfg.bq, h, d)
  w = jnp.moveaxis(w, 0, 2).reshape(b, h, cfg.num_q_tiles * cfg.bq)
  return (acc, w, saved) if save_carries else (acc, w)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _normalized_attention(cfg: TileConfig, q, k, v, theta, aux):
  """(sum_j A_ij (v_j + a^V_ij) (B, Lq, H, D) float32, sum_j A_ij (B, H, Lq)) of a tiled normalizer."""
  return _normalized_forward(cfg, q, k, v, theta, aux)


def _normalized_fwd(cfg, q, k, v, theta, aux):
  acc, w, carries = _normalized_forward(cfg, q, k, v, theta, aux, save_carries=True)
  return (acc, w), (q, k, v, theta, aux, carries)


def _normalized_bwd(cfg, residuals, cotangents):
  q, k, v, theta, aux, carries = residuals
  d_acc, d_w = cotangents
  d_acc = d_acc.astype(jnp.float32)
  normalizer = cfg.parts[cfg.normalizer]
  zeros = lambda x: jax.tree.map(jnp.zeros_like, x)

  def query_tile(carry, t):
    dk, dv, d_theta = carry
    qs, (q_t, do_t, dw_t) = _query_tile_rows(cfg, t, q, d_acc, d_w)
    carries_t = carries[t]  # (key tiles, B, H, bq): the carry entering each key tile
    lo, hi = _key_tile_range(cfg, aux, qs)  # visited farthest first: key tile lo is the farthest
    term_carries = initial_carries(cfg, q_t)  # a carrying Term's (PaTH's), recomputed as in attention_bwd
    entering = _carries_entering(cfg, aux, theta, q_t, k, qs, term_carries) if cfg.carries else term_carries

    def key_tile(kt, inner):
      dq_t, dk, dv, d_theta, farther, d_carries = inner
      ks = kt * cfg.bk
      c = carries_t[kt]
      tile = terms.base.tile_at(cfg, aux, qs, ks)
      local = tile_locals(cfg, theta, tile, k, aux)
      k_t = jax.lax.dynamic_slice_in_dim(k, ks, cfg.bk, axis=1)
      v_t = jax.lax.dynamic_slice_in_dim(v, ks, cfg.bk, axis=1)
      c_in = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, kt, 0, keepdims=False), entering)
      (s, _), logits_vjp = jax.vjp(
          lambda q_, k_, l_, c_: carried_logits(cfg, aux, tile, q_, k_, l_, c_), q_t, k_t, local, c_in
      )
      allowed = allowed_pairs(cfg, aux, tile, normalizer)
      (weights, _), weights_vjp = jax.vjp(lambda s_: normalizer.tile_weights(s_, allowed, c), s)
      _, values_vjp = jax.vjp(lambda p_, v_, l_: tile_values(cfg, tile, p_, v_, l_), weights, v_t, local)
      d_weights, dv_t, d_local_v = values_vjp(do_t)
      g = d_weights + dw_t[..., None]
      # The carry into the farther tiles: its cotangent is what those tiles' weights owe, F (their sum of g A).
      (ds,) = weights_vjp((g, farther))
      farther = farther + jnp.sum(g * weights, axis=-1)
      dq_part, dk_t, d_local_s, d_carries = logits_vjp((ds, d_carries))
      d_local = jax.tree.map(jnp.add, d_local_s, d_local_v)
      dk, dv = _add_key_rows(cfg, ks, (dk, dv), (dk_t, dv_t))
      dk = _add_halo_keys(cfg, dk, d_local, tile)
      d_theta = _accumulate(cfg, d_theta, d_local, tile, aux)
      return dq_t + dq_part.astype(jnp.float32), dk, dv, d_theta, farther, d_carries

    b, _, h, _ = q.shape
    init = (jnp.zeros(q_t.shape, jnp.float32), dk, dv, d_theta, jnp.zeros((b, h, cfg.bq), jnp.float32))
    init += (jax.tree.map(jnp.zeros_like, term_carries),)
    dq_t, dk, dv, d_theta, _, _ = jax.lax.fori_loop(lo, hi, key_tile, init)
    return (dk, dv, d_theta), dq_t

  init = (jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32), zeros(theta))
  (dk, dv, d_theta), dq = jax.lax.scan(query_tile, init, jnp.arange(cfg.num_q_tiles, dtype=jnp.int32))
  dq = jnp.moveaxis(dq, 0, 1).reshape(q.shape)
  return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), d_theta, None


_normalized_attention.defvjp(_normalized_fwd, _normalized_bwd)


@dataclasses.dataclass(frozen=True)
class Prepared:
  """One call, ready for the tile loops: the static config, padded q, k, v, the position data and masks."""

  cfg: TileConfig
  q: jax.Array
  k: jax.Array
  v: jax.Array
  theta: dict
  aux: dict
  q_len: int


def prepare(inputs, parts, params, settings, one_tile: bool = False) -> Prepared:
  """Tiles, padding, and each part's prepared data (`terms.base.Term.prepare`, differentiable by plain autodiff), for
  `inputs` (`call.AttentionInputs`, as `functional.attend` hands them: masks folded, keys sanitized) and `settings`
  (`call.AttentionSettings`: causal, block_size); `one_tile` for the explicit path (one tile of every pair)."""
  query, key, value, pos = inputs.query, inputs.key, inputs.value, inputs.positions
  causal, block_size, position_bias, features = settings.causal, settings.block_size, inputs.bias, inputs.features
  key_mask, mask, q_positions, k_positions = inputs.key_mask, inputs.mask, pos.query, pos.key
  q_segment_ids, k_segment_ids = pos.query_segments, pos.key_segments
  b, q_len, num_heads, head_dim = query.shape
  scale = 1.0 / np.sqrt(head_dim)
  k_len = key.shape[1]
  contiguous = q_positions is None
  q_offset = jnp.asarray(pos.offset, jnp.int32)

  if features is None:
    features = [None] * len(parts)
  # Rotations act before attention; a given position_bias replaces the scalar parts' own bias (functional.attend's
  # contract).
  kept = lambda t: t.stage is not terms.base.Stage.ROTATE and not (position_bias is not None and t.scalar_bias)
  active = [
      (part, p, f)
      for part, p, f in zip(parts, params, features)
      if kept(terms.select.term_for(part, contiguous, where=pos))
  ]
  u = terms.parts.query_biases([part for part, _, _ in active], [p for _, p, _ in active])
  part_terms = terms.select.terms_for(
      [part for part, _, _ in active], contiguous, scale, one_tile=one_tile, query_bias=u is not None, where=pos
  )
  per_pair_work = any(t.per_pair_work for t in part_terms)
  bq, bk = (q_len, k_len) if one_tile else block_sizes(block_size, per_pair_work)  # one_tile: the explicit path
  normalizers = [i for i, t in enumerate(part_terms) if t.replaces_softmax]
  halo, halo_part = terms.select.key_halo([part for part, _, _ in active], part_terms)
  if halo and min(bk, k_len) < halo and k_len > bk:
    raise ValueError(
        f'block_size={block_size!r}: key tiles of {bk} are narrower than the {halo} neighbouring keys '
        f'{halo_part.name!r} reads on each side of a logit; allowed: key tiles of at least {halo}.'
    )
  bq, bk = min(bq, q_len), max(min(bk, k_len), halo)  # one key tile of at least the halo (padding masked)
  num_q_tiles, num_k_tiles = -(-q_len // bq), -(-k_len // bk)
  padded_q, padded_k = num_q_tiles * bq, num_k_tiles * bk
  q_index = jnp.arange(q_len, dtype=jnp.int32) + q_offset
  if contiguous:
    q_pos = (jnp.arange(padded_q, dtype=jnp.int32) + q_offset)[None]
    k_pos = jnp.arange(padded_k, dtype=jnp.int32)[None]
  else:
    q_pos = terms.base.pad_axis(jnp.asarray(q_positions, jnp.int32), 1, padded_q)
    k_pos = terms.base.pad_axis(jnp.asarray(k_positions, jnp.int32), 1, padded_k)
  content_q, content_k = terms.base.pad_axis(query, 1, padded_q), terms.base.pad_axis(key, 1, padded_k)
  if u is not None:  # As tile_logits: the content queries carry Transformer-XL's u.
    content_q, content_k = content_q.astype(jnp.float32) + u, content_k.astype(jnp.float32)
  counts = None
  segments = q_segment_ids is not None
  if any(t.stage is terms.base.Stage.ROW_TRANSFORM for t in part_terms):
    if segments:  # the keys of the query's own document (functional.attend folds segments into `mask` else)
      counts, _ = segment_visibility(
          q_segment_ids, k_segment_ids, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask
      )
      counts = counts.astype(jnp.float32)
    else:
      counts = terms.rows.visible_counts(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask)
  ctx = terms.base.Context(
      padded_q,
      padded_k,
      q_offset,
      q_index=q_index,
      key_mask=jnp.ones((b, k_len), bool) if key_mask is None else jnp.asarray(key_mask, bool),
      counts=counts,
      query=content_q,
      key=content_k,
      q_pos=jnp.broadcast_to(q_pos, (b, padded_q)),
      k_pos=jnp.broadcast_to(k_pos, (b, padded_k)),
  )
  theta = {
      'parts': [t.prepare(part, p, dataclasses.replace(ctx, feature=f)) for t, (part, p, f) in zip(part_terms, active)],
      'given': None,
      'u': u,
  }
  if position_bias is not None:
    bias = jnp.asarray(position_bias, jnp.float32)
    bias = bias[None] if bias.ndim == 3 else bias
    theta['given'] = terms.base.pad_axis(terms.base.pad_axis(bias, 2, padded_q), 3, padded_k)

  aux = {'q_offset': q_offset, 'q_pos': q_pos, 'k_pos': k_pos}
  if key_mask is not None:
    aux['key_mask'] = terms.base.pad_axis(jnp.asarray(key_mask, bool), 1, padded_k)
  if mask is not None:
    m = jnp.asarray(mask, bool)
    m = jnp.reshape(m, (1,) * (4 - m.ndim) + m.shape)
    m = jnp.broadcast_to(m, m.shape[:2] + (q_len, k_len))
    aux['mask'] = terms.base.pad_axis(terms.base.pad_axis(m, 2, padded_q), 3, padded_k)
  if segments:  # (B, padded L) int32 each: a tile compares its queries' ids with its keys' (terms.tile_mask)
    aux['q_segment_ids'] = terms.base.pad_axis(jnp.asarray(q_segment_ids, jnp.int32), 1, padded_q)
    aux['k_segment_ids'] = terms.base.pad_axis(jnp.asarray(k_segment_ids, jnp.int32), 1, padded_k)

  cfg = TileConfig(
      parts=tuple(part for part, _, _ in active),
      part_terms=part_terms,
      given_bias=position_bias is not None,
      causal=bool(causal),
      scale=float(scale),
      bq=bq,
      bk=bk,
      num_q_tiles=num_q_tiles,
      num_k_tiles=num_k_tiles,
      k_len=k_len,
      has_key_mask=key_mask is not None,
      has_mask=mask is not None,
      has_segments=segments,
      normalizer=normalizers[0] if normalizers else None,
      halo=halo,
  )
  padded_query, padded_key = terms.base.pad_axis(query, 1, padded_q), terms.base.pad_axis(key, 1, padded_k)
  theta['parts'] = [
      t.complete(part, th, cfg, aux, padded_query, padded_key)
      for t, part, th in zip(part_terms, cfg.parts, theta['parts'])
  ]
  return Prepared(cfg, padded_query, padded_key, terms.base.pad_axis(value, 1, padded_k), theta, aux, q_len)


# Key columns per step of `segment_visibility`: its memory is O(B Lq SEGMENT_CHUNK H), never (Lq, Lk).
SEGMENT_CHUNK = 512


def segment_visibility(
    q_segment_ids, k_segment_ids, *, causal: bool, q_offset=0, key_mask=None, mask=None, bad=None, chunk=SEGMENT_CHUNK
):
  """Under a document mask (query i sees key j only when their segment ids are equal, and the causal mask,
  `key_mask` and `mask` allow it): (counts (B, Lq) int32, the keys each query sees; seen (B, Lq, H) bool, whether
  it sees a key flagged in `bad` (B, Lk, H), or None without `bad`).

  What functional.attend needs before the tiled kernel runs (which rows see no key, which see a non-finite key)
  and the temperatures' n_i, computed over key chunks: O(B Lq chunk) memory, no (Lq, Lk) array (unless `mask`,
  an arbitrary (B|1, H|1, Lq, Lk) mask the caller already holds, whose first head is read)."""
  q_seg, k_seg = jnp.asarray(q_segment_ids, jnp.int32), jnp.asarray(k_segment_ids, jnp.int32)
  b, q_len = q_seg.shape
  k_len = k_seg.shape[1]
  c = min(int(chunk), k_len)
  padded = -(-k_len // c) * c
  k_seg = terms.base.pad_axis(k_seg, 1, padded)
  real = jnp.ones((b, k_len), bool) if key_mask is None else jnp.asarray(key_mask, bool)
  real = terms.base.pad_axis(real, 1, padded)  # padding keys are False
  if mask is not None:
    m = jnp.asarray(mask, bool)
    m = jnp.reshape(m, (1,) * (4 - m.ndim) + m.shape)
    m = terms.base.pad_axis(jnp.broadcast_to(m[:, 0], (m.shape[0], q_len, k_len)), 2, padded)
  if bad is not None:
    bad = terms.base.pad_axis(jnp.asarray(bad, bool), 1, padded)
  q_index = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)

  def step(n, carry):
    counts, seen = carry
    ks = n * c
    visible = (q_seg[:, :, None] == jax.lax.dynamic_slice_in_dim(k_seg, ks, c, axis=1)[:, None, :]) & (
        jax.lax.dynamic_slice_in_dim(real, ks, c, axis=1)[:, None, :]
    )
    if causal:
      visible = visible & (ks + jnp.arange(c, dtype=jnp.int32)[None, :] <= q_index[:, None])[None]
    if mask is not None:
      visible = visible & jax.lax.dynamic_slice_in_dim(m, ks, c, axis=2)
    counts = counts + jnp.sum(visible, axis=-1, dtype=jnp.int32)
    if bad is not None:
      bad_c = jax.lax.dynamic_slice_in_dim(bad, ks, c, axis=1).astype(jnp.float32)  # (B, c, H)
      # A count of the visible flagged keys, as a product: no (B, Lq, chunk, H) intermediate.
      seen = seen | (jnp.einsum('bqc,bch->bqh', visible.astype(jnp.float32), bad_c) > 0)
    return counts, seen

  seen0 = jnp.zeros((b, q_len, 0 if bad is None else bad.shape[-1]), bool)
  counts, seen = jax.lax.fori_loop(0, padded // c, step, (jnp.zeros((b, q_len), jnp.int32), seen0))
  return counts, (None if bad is None else seen)


def with_remainder(p: Prepared, value, out, w):
  """A normalizer's output: what the keys leave (1 - sum_j A_ij) goes to the query's own value if it says so."""
  out, w = out[:, : p.q_len], w[:, :, : p.q_len]
  if p.cfg.parts[p.cfg.normalizer].remainder_to_self:
    own_index = jnp.clip(jnp.arange(p.q_len, dtype=jnp.int32) + p.aux['q_offset'], 0, p.cfg.k_len - 1)
    own = jnp.take(value, own_index, axis=1).astype(jnp.float32)  # (B, Lq, H, D)
    out = out + jnp.moveaxis(1.0 - w, 1, 2)[..., None] * own
  return out.astype(value.dtype)


def attend(inputs, parts, params, settings) -> jax.Array:
  """`functional.attend`'s contract, blockwise (arguments as `prepare`): (B, Lq, H, D) in value's dtype.

  The caller (functional.attend) has checked the inputs and zeroes the queries that see no key.
  """
  p = prepare(inputs, parts, params, settings)
  value = inputs.value
  if p.cfg.normalizer is None:
    return _attention(p.cfg, p.q, p.k, p.v, p.theta, p.aux)[:, : p.q_len]
  acc, w = _normalized_attention(p.cfg, p.q, p.k, p.v, p.theta, p.aux)
  return with_remainder(p, value, acc, w)
