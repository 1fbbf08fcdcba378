"""The per-token and per-row helpers of the kinds that read the content (contextual, score transform,
normalizer, temperature); the per-pair terms themselves are the encoders' own methods, which
`relpos_jax.nn.blockwise`'s per-kind Terms call, tile by tile (the explicit path is the one-tile case).

  CONTEXTUAL       `token_features` from the layer input x (cached for decoding): FoX's gates, PaTH's
                   Householder directions. FoX is separable (row_i + column_j), CoPE counts gates along
                   the keys, PaTH replaces the content logit (one tile only).
  SCORE_TRANSFORM  logits <- transform(logits, base bias): A + B + f([A; B]) (DAPE).
  TEMPERATURE      logits of query i multiplied by t_h(n_i), n_i the keys it sees (SSMax, log-n):
                   `temperature_factor` of `visible_counts`, per row, before any score.
  NORMALIZER       the weights from the logits instead of the softmax (stick-breaking), plus a remainder on
                   the query's own value.

The order inside attention: content (or its replacement) and vector terms, scaled; + scalar biases;
+ contextual terms; score transform; temperature; mask; normalizer (or softmax). These kinds never take
jax.nn.dot_product_attention (it has no hook for them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relpos_jax.encoders import contract

Kind = contract.Kind
CONTENT_KINDS = (Kind.CONTEXTUAL, Kind.SCORE_TRANSFORM, Kind.NORMALIZER, Kind.TEMPERATURE)


def has_content_kind(parts) -> bool:
  """Whether a part needs the explicit path (a kind that reads the scores or the content)."""
  return any(p.kind in CONTENT_KINDS for p in parts)


def feature_sizes(parts, dims_: contract.Dims) -> tuple[int, ...]:
  """Per part, the size of the per-token features it keeps in the KV cache (0: none)."""
  return tuple(p.num_features(dims_) if p.kind is Kind.CONTEXTUAL else 0 for p in parts)


def token_features(parts, params, x: jax.Array) -> list:
  """Per part, its token features of the layer input x (B, L, model_dim): (B, L, F) float32 or None."""
  out = []
  for part, p in zip(parts, params):
    f = part.token_features(p, x) if part.kind is Kind.CONTEXTUAL else None
    out.append(None if f is None else jnp.asarray(f, jnp.float32))
  return out


def check_features(parts, features, batch: int, k_len: int) -> list:
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


def visible_counts(q_len: int, k_len: int, *, causal: bool, q_offset, key_mask, mask) -> jax.Array:
  """(B or 1, Lq) float32: the keys each query sees (causal mask, padding, any further mask's first head).

  O(B Lk) from a running count of the real keys unless an arbitrary `mask` is given (then its own size):
  the temperatures' n_i, known before any score, on every path.
  """
  q_index = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)
  k_index = jnp.arange(k_len, dtype=jnp.int32)
  if mask is not None:
    valid = jnp.broadcast_to(jnp.asarray(mask, bool), jnp.shape(mask)[:2] + (q_len, k_len))[:, 0]
    if causal:
      valid = valid & (k_index[None, :] <= q_index[:, None])[None]
    if key_mask is not None:
      valid = valid & key_mask[:, None, :]
    return jnp.sum(valid, axis=-1).astype(jnp.float32)
  if key_mask is None:
    if not causal:
      return jnp.full((1, q_len), float(k_len), jnp.float32)
    return jnp.clip(q_index + 1, 0, k_len).astype(jnp.float32)[None]
  if not causal:
    return jnp.broadcast_to(jnp.sum(key_mask, axis=-1, keepdims=True), (key_mask.shape[0], q_len)).astype(jnp.float32)
  real_so_far = jnp.cumsum(key_mask.astype(jnp.int32), axis=-1)  # (B, Lk)
  last = jnp.take(real_so_far, jnp.clip(q_index, 0, k_len - 1), axis=-1)
  return jnp.where(q_index >= 0, last, 0).astype(jnp.float32)


def temperature_factor(parts, params, counts: jax.Array, q_index: jax.Array) -> jax.Array | None:
  """The product of the temperature parts' t_h(n_i): (B or 1, H, Lq) float32, or None without one."""
  factor = None
  for part, p in zip(parts, params):
    if part.kind is Kind.TEMPERATURE:
      t = jnp.asarray(part.temperature(p, counts, q_index), jnp.float32)
      factor = t if factor is None else factor * t
  return factor
