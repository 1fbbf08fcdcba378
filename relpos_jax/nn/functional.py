"""The attention core as a pure function: projected q, k, v plus position terms -> per-head outputs.

Both the NNX layer and its Linen twin call `attend`, so given the same weights they compute the same thing.
Which path runs is decided by the parts' kinds:

  no position term, scalar bias, rotary  ->  `jax.nn.dot_product_attention(q, k, v, bias, mask,
                                             implementation=...)`, so cuDNN flash attention can be chosen on
                                             GPU (`implementation='cudnn'`)
  vector relative (Shaw a^K/a^V, XL)     ->  an explicit einsum path that adds the position scores and the
                                             a^V output term (`position_terms.vector_*`)
  contextual, score transform,           ->  the explicit path, with their terms (`content_terms`): CoPE, FoX,
  normalizer, temperature                    PaTH, DAPE, stick-breaking, SSMax / log-n

`implementation='einsum'` forces the explicit path for every kind (tests compare the two). The default
(`None`) takes dot_product_attention on accelerators and the explicit path on CPU, where XLA's
dot_product_attention measured about 8% slower per train step at our shapes (docs/benchmarks.md). A causal square
(no cache offset) goes to dot_product_attention as `is_causal=True` rather than as a mask, so the cuDNN
kernel can skip the masked half; padding and cache masks go in `mask`.

Numerics: scores, position terms and softmax are float32 whatever the input dtype; masked scores take a
large finite negative value, and query rows with no visible key (padding queries under a causal mask) give
exactly zero output instead of a uniform average, identically on both paths.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import checks
from relpos_jax.nn import content_terms, position_terms

Kind = position_terms.Kind

IMPLEMENTATIONS = (None, 'xla', 'cudnn', 'einsum')

# dot_product_attention's own choice (jax.nn.functions._get_large_negative): finite in float32.
_LARGE_NEGATIVE = np.float32(-0.7 * np.finfo(np.float32).max)


def check_implementation(implementation) -> None:
  if implementation not in IMPLEMENTATIONS:
    raise ValueError(f'attention implementation={implementation!r} is invalid; allowed: {IMPLEMENTATIONS} '
                     f'(None and "xla": jax.nn.dot_product_attention on XLA, "cudnn": its cuDNN kernel on '
                     f'GPU, "einsum": the explicit path).')


def attention_mask(q_len: int, k_len: int, *, causal: bool, q_offset=0,
                   key_mask: jax.Array | None = None) -> jax.Array | None:
  """Bool (B or 1, 1, q_len, k_len), True = may attend; None when nothing is masked.

  Causality is by index: query i (at index q_offset + i among the keys) sees keys j <= q_offset + i.
  `key_mask` (B, k_len) marks real keys (padding_mask of the keys, or the filled part of a cache).
  """
  mask = None
  if causal:
    q_index = jnp.arange(q_len, dtype=jnp.int32)[:, None] + jnp.asarray(q_offset, jnp.int32)
    mask = (jnp.arange(k_len, dtype=jnp.int32)[None, :] <= q_index)[None, None]
  if key_mask is not None:
    key_mask = jnp.asarray(key_mask, bool)
    if key_mask.ndim != 2 or key_mask.shape[1] != k_len:
      raise ValueError(f'padding/key mask must be (batch, {k_len}) bool, got shape {key_mask.shape}.')
    km = key_mask[:, None, None, :]
    mask = km if mask is None else mask & km
  return mask


def _check_toeplitz_callback(bias):
  checks.assert_toeplitz(bias)


def debug_check_bias(parts, params, bias: jax.Array, q_len: int, k_len: int, q_offset) -> None:
  """debug_checks: the realised bias, and each Toeplitz part's pair_bias on the grid, must be Toeplitz.

  The second check catches an encoder that claims `is_toeplitz` but whose pair_bias depends on the query
  position (bias_matrix only ever reads `bias(rel)`, so it would hide the lie).
  """
  jax.debug.callback(_check_toeplitz_callback, bias)
  q_pos = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)
  k_pos = jnp.arange(k_len, dtype=jnp.int32)
  for part, p in zip(parts, params):
    if part.kind is Kind.SCALAR_BIAS and part.is_toeplitz:
      grid = jnp.moveaxis(part.pair_bias(p, q_pos[:, None], k_pos[None, :]), -1, 0)
      jax.debug.callback(_check_toeplitz_callback, grid)


def _is_static_zero(q_offset) -> bool:
  return not isinstance(q_offset, jax.core.Tracer) and np.ndim(q_offset) == 0 and int(q_offset) == 0


def _rows_seeing_a_key(q_len, k_len, *, causal, q_offset, key_mask, mask):
  """(B or 1, Lq) bool: which queries see at least one key; None when all do. O(B Lk) unless `mask`."""
  sees = None
  if key_mask is not None:
    if causal:
      # Query i sees keys j <= q_offset + i: is any of them real? A running count answers every row.
      real_so_far = jnp.cumsum(key_mask.astype(jnp.int32), axis=-1)  # (B, Lk)
      last = jnp.clip(jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32), 0, k_len - 1)
      sees = jnp.take(real_so_far, last, axis=-1) > 0  # (B, Lq)
    else:
      sees = jnp.broadcast_to(jnp.any(key_mask, axis=-1, keepdims=True), (key_mask.shape[0], q_len))
  elif causal and not _is_static_zero(q_offset):
    sees = (jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32) >= 0)[None]
  if mask is not None:  # An arbitrary mask: ask the full (B, H, Lq, Lk) mask.
    full = attention_mask(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask)
    full = mask if full is None else full & mask
    sees = jnp.any(jnp.broadcast_to(full, full.shape[:-1] + (k_len,)), axis=(1, -1))  # (B|1, Lq)
  return sees


def attend(query: jax.Array, key: jax.Array, value: jax.Array, *, parts, params, causal: bool = False,
           key_mask: jax.Array | None = None, mask: jax.Array | None = None, q_offset=0, q_positions=None,
           k_positions=None, position_bias=None, implementation=None,
           debug_checks: bool = False, features=None) -> jax.Array:
  """Multi-head attention with the position terms of `parts`.

  Args:
    query: (B, Lq, H, D), already rotated if a part is rotary (see `position_terms.rotate`).
    key, value: (B, Lk, H, D).
    parts, params: the attention parts (`position_terms.attention_parts`) and one params pytree each.
    causal: query i (index q_offset + i among the keys) sees keys j <= q_offset + i only.
    key_mask: (B, Lk) bool, True = a real key (padding mask, or the filled part of a cache).
    mask: any further bool mask broadcastable to (B, H, Lq, Lk), True = attend.
    q_offset: query i is key index q_offset + i (cached decoding): the causal mask, and with contiguous
      positions also the positions (queries at q_offset + i, keys at j). Int or int32 scalar.
    q_positions, k_positions: explicit int positions (B, Lq), (B, Lk) for the position terms, or both None
      (contiguous).
    position_bias: a precomputed scalar bias (H or B, H, Lq, Lk), e.g. shared across layers; replaces
      the scalar parts' own bias.
    implementation: None (dot_product_attention on accelerators, einsum on CPU) | 'xla' | 'cudnn' |
      'einsum'.
    debug_checks: check the realised bias of Toeplitz encoders with `checks.assert_toeplitz`.
    features: per part, the contextual parts' token features of the keys (B, Lk, F) or None
      (`content_terms.token_features` of the layer input; the cached ones in decoding).

  Returns:
    (B, Lq, H, D) in value's dtype. Queries that see no key at all output zeros.
  """
  check_implementation(implementation)
  checks.assert_qkv_shapes(query, key, value)
  if (q_positions is None) != (k_positions is None):
    raise ValueError('attend: give both q_positions and k_positions, or neither (contiguous positions).')
  b, q_len, num_heads, head_dim = query.shape
  k_len = key.shape[1]
  scale = 1.0 / np.sqrt(head_dim)
  contiguous = q_positions is None
  if key_mask is not None:
    key_mask = jnp.asarray(key_mask, bool)
    if key_mask.shape != (b, k_len):
      raise ValueError(f'padding/key mask must be (batch, {k_len}) = {(b, k_len)} bool, got shape '
                       f'{key_mask.shape}.')

  bias = position_bias
  if bias is None:
    bias = position_terms.scalar_bias(parts, params, q_len, k_len, q_offset=q_offset,
                                      q_positions=q_positions, k_positions=k_positions)
  if bias is not None:
    checks.assert_bias_shape(bias, q_len=q_len, k_len=k_len, num_heads=num_heads)
    bias = jnp.asarray(bias, jnp.float32)
    if debug_checks and contiguous and position_terms.toeplitz_parts(parts):
      debug_check_bias(parts, params, bias, q_len, k_len, q_offset)
    if bias.ndim == 3:
      bias = bias[None]

  vector_parts = [(part, p) for part, p in zip(parts, params) if part.kind is Kind.VECTOR_RELATIVE]
  content_kind = content_terms.has_content_kind(parts)

  use_dot_product_attention = implementation in ('xla', 'cudnn') or (
      implementation is None and jax.default_backend() != 'cpu')
  if not vector_parts and not content_kind and use_dot_product_attention:
    # A plain causal square lets the kernel skip the masked half (cuDNN) instead of reading a mask.
    native_causal = causal and q_len == k_len and _is_static_zero(q_offset)
    dpa_mask = attention_mask(q_len, k_len, causal=causal and not native_causal, q_offset=q_offset,
                              key_mask=key_mask)
    if mask is not None:
      dpa_mask = mask if dpa_mask is None else dpa_mask & mask
    # cuDNN takes the bias in the inputs' dtype; XLA adds it to float32 logits as it is.
    dpa_bias = bias.astype(query.dtype) if (bias is not None and implementation == 'cudnn') else bias
    out = jax.nn.dot_product_attention(query, key, value, bias=dpa_bias, mask=dpa_mask, scale=scale,
                                       is_causal=native_causal, implementation=implementation)
  else:
    full_mask = attention_mask(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask)
    if mask is not None:
      full_mask = mask if full_mask is None else full_mask & mask
    ctx = replaced = None
    if content_kind:
      q_index = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)
      ctx = content_terms.context(
          query.astype(jnp.float32), key.astype(jnp.float32), None,
          full_mask if full_mask is not None else jnp.ones((1, 1, q_len, k_len), bool),
          key_mask if key_mask is not None else jnp.ones((b, k_len), bool), q_index, scale)
      features = content_terms.check_features(parts, features, b, k_len)
      replaced = content_terms.content_logits(parts, params, features, ctx)
    content_query = query
    u = position_terms.query_biases(parts, params)
    if u is not None:
      content_query = query.astype(jnp.float32) + u
      key = key.astype(jnp.float32)
    if replaced is not None:  # PaTH: q_i^T H_i ... H_{j+1} k_j instead of q_i . k_j
      scores = replaced
    else:
      scores = jnp.einsum('bihd,bjhd->bhij', content_query, key, preferred_element_type=jnp.float32)
    tables = []
    for part, p in vector_parts:
      table = position_terms.relative_table(part, q_len, k_len, q_offset=q_offset, causal=causal,
                                            q_positions=q_positions, k_positions=k_positions)
      tables.append(table)
      scores = scores + position_terms.vector_scores(part, p, query, table)
    scores = scores * np.float32(scale)
    if bias is not None:
      scores = scores + bias
    remainder = None
    if content_kind:
      scores = content_terms.add_contextual(parts, params, features, ctx, scores)
      scores = content_terms.transform_scores(parts, params, scores, full_mask, q_len, k_len, q_offset=q_offset,
                                              q_positions=q_positions, k_positions=k_positions)
      scores = content_terms.apply_temperature(parts, params, scores, full_mask, ctx.q_index)
    if full_mask is not None:
      scores = jnp.where(full_mask, scores, _LARGE_NEGATIVE)
    normalizer = content_terms.normalizer(parts, params)
    if normalizer is not None:
      weights, remainder = normalizer[0].weights(normalizer[1], scores, ctx)
    else:
      weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum('bhij,bjhd->bihd', weights.astype(value.dtype), value,
                     preferred_element_type=jnp.float32)
    if remainder is not None:  # stick-breaking: what the keys leave goes to the query's own value
      own = jnp.take(value, ctx.q_index, axis=1).astype(jnp.float32)  # (B, Lq, H, D)
      out = out + jnp.moveaxis(remainder, 1, 2)[..., None] * own
    for (part, p), table in zip(vector_parts, tables):
      extra = position_terms.vector_values(part, p, weights, table)
      if extra is not None:
        out = out + extra
    out = out.astype(value.dtype)

  sees = _rows_seeing_a_key(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask)
  if sees is not None:
    # A query that sees no key (padding under a causal mask) outputs zero on every path, not an average.
    out = out * sees[:, :, None, None].astype(out.dtype)
  return out
