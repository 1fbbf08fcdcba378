"""Vector relative embeddings (kind VECTOR_RELATIVE): q_i . a^K_{j-i} (Shaw) or (q_i + v) . W_R R_{j-i}
(Transformer-XL) in the scores, sum_j w_ij a^V_{j-i} in the outputs, and Transformer-XL's content bias u on
the queries of q . k (`Term.query_bias`).

  contiguous, unclipped     the table rows a^K (and a^V) of the distinct relative positions, evaluated once;
  (Transformer-XL)          a tile slices its bq + bk - 1 rows, projects its queries on them and skews
                            (`VectorRows`).
  otherwise (Shaw's         the tile is a (bq, bk) problem of its own at q_offset + qs - ks:
  clipped tables, explicit  `skew.relative_table`, `vector_scores` / `vector_values` (`VectorTable`).
  positions)

Never builds an (Lq, Lk, head_dim) tensor: the queries are projected once against the table rows that can
occur (`skew.RelativeTable`) and the scores gathered per distance; the attention weights are aggregated per
row before meeting a^V.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import positions as positions_lib
from relpos_jax.nn import skew
from relpos_jax.nn.terms import base


def vector_scores(encoder, params, query: jax.Array, table: skew.RelativeTable) -> jax.Array | None:
  """Unscaled position scores (q_i + v) . a^K_{rel_ij}: query (B, Lq, H, D) -> (B, H, Lq, Lk) float32, or None
  when the encoder has no a^K (iRPE's contextual mode on values or queries only)."""
  _, v = encoder.query_biases(params)
  q = query.astype(jnp.float32)
  if v is not None:
    q = q + jnp.asarray(v, jnp.float32)
  if table.mode == 'pairwise':
    emb = encoder.key_embeddings(params, table.rel)  # (B, Lq, Lk, H, D)
    return None if emb is None else jnp.einsum('bihd,bijhd->bhij', q, jnp.asarray(emb, jnp.float32))
  rows = encoder.key_embeddings(params, table.rows)  # (R, H, D)
  if rows is None:
    return None
  rows = jnp.asarray(rows, jnp.float32)
  projected = jnp.einsum('bihd,rhd->bhir', q, rows)  # queries against each row, once
  return skew.gather_rows(projected, table)


def vector_values(encoder, params, weights: jax.Array, table: skew.RelativeTable) -> jax.Array | None:
  """The a^V output term sum_j w_ij a^V_{rel_ij}: weights (B, H, Lq, Lk) -> (B, Lq, H, D) float32, or None."""
  weights = weights.astype(jnp.float32)
  if table.mode == 'pairwise':
    emb = encoder.value_embeddings(params, table.rel)
    if emb is None:
      return None
    return jnp.einsum('bhij,bijhd->bihd', weights, jnp.asarray(emb, jnp.float32))
  rows = encoder.value_embeddings(params, table.rows)
  if rows is None:
    return None
  aggregated = skew.aggregate_weights(weights, table)
  return jnp.einsum('bhir,rhd->bihd', aggregated, jnp.asarray(rows, jnp.float32))


@dataclasses.dataclass(frozen=True)
class VectorTerm(base.Term):
  """What both vector forms share: scores and a value term, and the query bias u."""

  stage = base.Stage.SCORES

  def query_bias(self, part, params):
    u, _ = part.query_biases(params)
    return u


@dataclasses.dataclass(frozen=True)
class VectorRows(VectorTerm):
  """Contiguous positions, unclipped table: a^K (a^V) at the distinct relative positions, once."""

  def prepare(self, part, params, ctx):
    rel = positions_lib.distinct_relative_positions(ctx.padded_q_len, ctx.padded_k_len, ctx.q_offset)
    _, v = part.query_biases(params)
    value_rows = part.value_embeddings(params, rel)
    return {
        'key': jnp.asarray(part.key_embeddings(params, rel), jnp.float32),
        'value': None if value_rows is None else jnp.asarray(value_rows, jnp.float32),
        'v': None if v is None else jnp.asarray(v, jnp.float32),
    }

  def local(self, theta, tile):
    return {
        'key': base.slice_diagonals(theta['key'], tile, axis=0),
        'value': None if theta['value'] is None else base.slice_diagonals(theta['value'], tile, axis=0),
        'v': theta['v'],
    }

  def accumulate(self, acc, d_local, tile):
    return {
        'key': base.add_diagonals(acc['key'], d_local['key'], tile, axis=0),
        'value': None if acc['value'] is None else base.add_diagonals(acc['value'], d_local['value'], tile, axis=0),
        'v': None if acc['v'] is None else acc['v'] + d_local['v'],
    }

  def scores(self, part, local, q_t, tile):
    q = q_t.astype(jnp.float32)
    if local['v'] is not None:
      q = q + local['v']
    projected = jnp.einsum('bihd,rhd->bhir', q, local['key'])  # (B, H, bq, bq + bk - 1)
    return skew.skew(projected, tile.bk)  # out[i, j] = projected[i, j - i + bq - 1]

  def values(self, part, local, p_t, tile):
    if local['value'] is None:
      return None
    rows = skew.unskew(p_t.astype(jnp.float32), tile.bq + tile.bk - 1)
    return jnp.einsum('bhir,rhd->bihd', rows, local['value'])


@dataclasses.dataclass(frozen=True)
class VectorTable(VectorTerm):
  """Clipped tables or explicit positions: the tile as a (bq, bk) problem of its own, `vector_scores` /
  `vector_values` on its `skew.relative_table`."""

  contiguous: bool = True

  def _table(self, part, tile):
    if self.contiguous:
      return skew.relative_table(part, tile.bq, tile.bk, q_offset=tile.tile_q_offset)
    return skew.relative_table(part, tile.bq, tile.bk, q_positions=tile.q_pos, k_positions=tile.k_pos)

  def scores(self, part, local, q_t, tile):
    return vector_scores(part, local, q_t, self._table(part, tile))

  def values(self, part, local, p_t, tile):
    return vector_values(part, local, p_t, self._table(part, tile))
