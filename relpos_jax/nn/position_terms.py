"""The position terms of attention, one pure function per encoder kind.

Shared by the NNX layer (`relpos_jax.nn.attention`) and its Linen twin (`relpos_jax.nn.linen`), so both
compute exactly the same thing. Everything dispatches on `encoder.kind`, never on a name:

  SCALAR_BIAS      `scalar_bias`: b_h(i, j) added to the scaled scores, (H, Lq, Lk) from the Toeplitz
                   expansion of the Lq + Lk - 1 distinct relative positions, or (B, H, Lq, Lk) for explicit
                   positions.
  VECTOR_RELATIVE  `vector_scores` / `vector_values`: q_i . a^K_{j-i} (Shaw) or (q_i + v) . W_R R_{j-i}
                   (Transformer-XL) in the scores, sum_j w_ij a^V_{j-i} in the outputs. Never builds an
                   (Lq, Lk, head_dim) tensor: the queries are projected once against the table rows that
                   can occur (`skew.RelativeTable`) and the scores gathered per distance; the attention weights
                   are aggregated per row before meeting a^V.
  ROTARY           `rotate`: q and k rotated at their positions.
  ABSOLUTE         `input_embedding`: x + p_i, added by the model at its input, not in the layer.
  COMBINED         `contract.leaves`: the parts (a wrapper: its base), each adding its own kind's term.
  POSITION_REMAP   `remap_scores`: the base's term under each of the remap's position sets, merged by
                   region (content scores of remapped rotations, or the base's bias at remapped positions).

Positions. Either contiguous (`q_positions is None`: queries at q_offset .. q_offset + Lq - 1, keys at
0 .. Lk - 1, the layout of a full forward and of cached decoding), or explicit int arrays (B, Lq) and
(B, Lk) (randomized positions, or an offset p .. p + L - 1). Relative position = key - query, always.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


from relpos_jax import validation
from relpos_jax.encoders import contract, matrices
from relpos_jax.nn import skew

Kind = contract.Kind


# ----------------------------------------------------------------------------------------------------------
# Parts: which encoders act where.


def attention_parts(encoder: contract.Encoder) -> tuple[contract.Encoder, ...]:
  """The parts that act inside attention: scalar biases, vector-relative tables, rotations."""
  return tuple(p for p in contract.leaves(encoder) if p.kind is not Kind.ABSOLUTE)


def input_parts(encoder: contract.Encoder) -> tuple[contract.Encoder, ...]:
  """The absolute parts: the model adds their embedding to its input (x + p_i)."""
  return tuple(p for p in contract.leaves(encoder) if p.kind is Kind.ABSOLUTE)


def has_kind(parts, kind: Kind) -> bool:
  return any(p.kind is kind for p in parts)


def init_params(parts, rng: jax.Array, *, num_heads: int, head_dim: int, model_dim: int) -> list:
  """One params pytree per part (each part sees every size: some need head_dim, others model_dim)."""
  rngs = jax.random.split(rng, max(len(parts), 1))
  return [part.init(r, num_heads, head_dim=head_dim, model_dim=model_dim) for part, r in zip(parts, rngs)]


def check_params(parts, params, num_heads: int | None = None) -> None:
  """One params pytree per part, each what that part's `init` returns (for `num_heads` heads, if given)."""
  validation.require(
      len(params) == len(parts),
      'position_params',
      'len(position_params)',
      len(params),
      f'one params pytree per attention part ({[p.name or type(p).__name__ for p in parts]})',
  )
  for part, p in zip(parts, params):
    contract.check_params(part, p, num_heads)


def check_causal(who: str, encoder: contract.Encoder, causal: bool) -> None:
  """Refuses a causal-only part (xPos) in a bidirectional layer or model."""
  causal_only = [p.name or type(p).__name__ for p in contract.leaves(encoder) if p.requires_causal]
  validation.require(
      causal or not causal_only,
      who,
      'encoder',
      encoder,
      f'an encoder without a causal-only part when causal=False; {causal_only} is causal-only '
      f'(requires_causal: keys ahead of the query would be scaled without bound): use '
      f'causal=True (a DecoderLM) or another encoder',
  )


def contiguous_positions(batch: int, length: int, offset=0) -> jax.Array:
  """Int32 (batch, length): offset .. offset + length - 1 in every row."""
  row = jnp.arange(length, dtype=jnp.int32) + jnp.asarray(offset, jnp.int32)
  return jnp.broadcast_to(row, (batch, length))


# ----------------------------------------------------------------------------------------------------------
# ABSOLUTE


def input_embedding(parts, params, positions: jax.Array) -> jax.Array | None:
  """Sum of the absolute parts' embeddings at int positions (B, L) -> (B, L, model_dim) float32, or None."""
  total = None
  for part, p in zip(parts, params):
    if part.kind is Kind.ABSOLUTE:
      emb = jnp.asarray(part.embed(p, positions), jnp.float32)
      total = emb if total is None else total + emb
  return total


# ----------------------------------------------------------------------------------------------------------
# SCALAR_BIAS


def scalar_bias(
    parts, params, q_len: int, k_len: int, *, q_offset=0, q_positions=None, k_positions=None
) -> jax.Array | None:
  """The summed scalar bias of `parts`, float32; None when no part is a scalar bias.

  Contiguous positions: (H, q_len, k_len) via `relpos_jax.bias_matrix` (Toeplitz from q_len + k_len - 1
  values, or the encoder's own pair_bias path when it is not Toeplitz). Explicit positions:
  (B, H, q_len, k_len) via `relpos_jax.bias_at_positions`.
  """
  total = None
  for part, p in zip(parts, params):
    if part.kind is not Kind.SCALAR_BIAS:
      continue
    if q_positions is None:
      b = matrices.bias_matrix(part, p, q_len, k_len, q_offset)
    else:
      b = matrices.bias_at_positions(part, p, q_positions, k_positions)
    b = jnp.asarray(b, jnp.float32)
    total = b if total is None else total + b
  return total


def toeplitz_parts(parts) -> bool:
  """Whether every scalar-bias part claims to be Toeplitz (so its realised bias must be)."""
  return all(p.is_toeplitz for p in parts if p.kind is Kind.SCALAR_BIAS)


# ----------------------------------------------------------------------------------------------------------
# ROTARY


def rotate(
    parts, params, query: jax.Array, key: jax.Array, q_positions: jax.Array, k_positions: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """q (B, Lq, H, D) and k (B, Lk, H, D) rotated at int positions (B, Lq), (B, Lk) by the rotary parts.

  The rotation is computed in float32 (the encoders' contract) and cast back to the inputs' dtype, so a
  bfloat16 model keeps bfloat16 matmuls but exact angles.
  """
  for part, p in zip(parts, params):
    if part.kind is Kind.ROTARY:
      query = part.rotate_queries(p, query.astype(jnp.float32), q_positions).astype(query.dtype)
      key = part.rotate_keys(p, key.astype(jnp.float32), k_positions).astype(key.dtype)
  return query, key


# ----------------------------------------------------------------------------------------------------------
# POSITION_REMAP


def remap_rotations(part, params, query: jax.Array, key: jax.Array, q_positions: jax.Array, k_positions: jax.Array):
  """A rotary-base remap's queries and keys rotated under each of its position sets: [(q_s, k_s)], each as
  query / key. A set's query positions depend on the queries' only (and its keys' on the keys'), so each
  axis is remapped against one position of the other: O(L), never a (Lq, Lk) region."""
  base = part.base
  q_sets = part.score_sets(q_positions, k_positions[..., :1])
  k_sets = part.score_sets(q_positions[..., :1], k_positions)
  return [
      (
          _rotate_set(base, params, query, qs.q_positions, qs.divisor),
          _rotate_set(base, params, key, ks.k_positions, ks.divisor),
      )
      for qs, ks in zip(q_sets, k_sets)
  ]


def remap_merge(part, params, rotations, query, key, q_positions, k_positions, scores=None):
  """A remap's (content scores (B, H, Lq, Lk) float32, bias (B, H, Lq, Lk) float32 or None) for the pairs of
  q_positions (B, Lq) x k_positions (B, Lk): the whole matrix (explicit path) or one tile (blockwise).

  Rotary base: each pair's <R(q_s) q, R(k_s) k> from `rotations` (`remap_rotations` of these queries and
  keys), of the set whose region holds it; `scores` (the plain q . k of the other parts) is replaced.
  Scalar-bias base: `scores` (q . k if None) stays, and the bias is the base's pair_bias at the set's
  positions, per region.
  """
  base = part.base
  sets = part.score_sets(q_positions, k_positions)
  if base.kind is Kind.ROTARY:
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
          jnp.moveaxis(base.pair_bias(params, s.q_positions[..., :, None], s.k_positions[..., None, :]), -1, -3),
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


def remap_scores(
    part,
    params,
    query: jax.Array,
    key: jax.Array,
    q_positions: jax.Array,
    k_positions: jax.Array,
    scores: jax.Array | None = None,
):
  """A remap's contribution over the whole matrix: `remap_merge` of `remap_rotations`. Positions (B, Lq), (B, Lk)."""
  rotations = None
  if part.base.kind is Kind.ROTARY:
    rotations = remap_rotations(part, params, query, key, q_positions, k_positions)
  return remap_merge(part, params, rotations, query, key, q_positions, k_positions, scores)


def _rotate_set(base, params, x, positions, divisor):
  x32 = x.astype(jnp.float32)
  if divisor == 1:
    return base.rotate(params, x32, positions).astype(x.dtype)
  return base.rotate_divided(params, x32, positions, divisor).astype(x.dtype)


# ----------------------------------------------------------------------------------------------------------
# VECTOR_RELATIVE


def query_biases(parts, params):
  """Summed Transformer-XL content bias u over the vector parts: (H, D) float32 or None."""
  total = None
  for part, p in zip(parts, params):
    if part.kind is Kind.VECTOR_RELATIVE:
      u, _ = part.query_biases(p)
      if u is not None:
        u = jnp.asarray(u, jnp.float32)
        total = u if total is None else total + u
  return total


def vector_scores(encoder, params, query: jax.Array, table: skew.RelativeTable) -> jax.Array:
  """Unscaled position scores (q_i + v) . a^K_{rel_ij}: query (B, Lq, H, D) -> (B, H, Lq, Lk) float32."""
  _, v = encoder.query_biases(params)
  q = query.astype(jnp.float32)
  if v is not None:
    q = q + jnp.asarray(v, jnp.float32)
  if table.mode == 'pairwise':
    emb = jnp.asarray(encoder.key_embeddings(params, table.rel), jnp.float32)  # (B, Lq, Lk, H, D)
    return jnp.einsum('bihd,bijhd->bhij', q, emb)
  rows = jnp.asarray(encoder.key_embeddings(params, table.rows), jnp.float32)  # (R, H, D)
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
