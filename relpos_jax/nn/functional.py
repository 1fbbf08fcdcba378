"""The attention core as a pure function: projected q, k, v plus position terms -> per-head outputs.

    out = attend(call.AttentionInputs.checked(q, k, v, call.Positions(...), key_mask=...), parts, params,
                 call.AttentionSettings.checked(implementation=..., causal=...))

Both the NNX layer and its Linen twin call `attend`, so given the same weights they compute the same thing.
Which path runs is chosen in one place, `call.AttentionSettings.path`, from the settings and what the parts'
Terms declare (`terms.base.Term`: `dot_product_form`, `tiles`); every path but dot_product_attention asks the
same Terms (prepare, the tile's share, scores, biases, transform, value term), chosen per kind in one place
(`terms.select`):

  no position term, scalar bias, rotary  ->  `jax.nn.dot_product_attention(q, k, v, bias, mask,
                                             implementation=...)`, so cuDNN flash attention can be chosen on
                                             GPU (`implementation='cudnn'`)
  every kind (vector relative, remaps,   ->  the explicit path: `explicit.attend`, the Terms on one
  content kinds, PaTH)                       tile that holds every query and key ((B, H, Lq, Lk) scores), a
                                             plain softmax or normalizer, plain autodiff
  implementation='blockwise'             ->  `blockwise.attend`: query and key tiles, an online softmax (or
                                             stick-breaking's fold), every term built per tile; O(L) memory,
                                             training included. Every kind (PaTH by a per-row carry across
                                             key tiles; beside DAPE v2's halo refused by name)
  Toeplitz biases, rotary, none, 'pallas' ->  `pallas_attention.attend`: the same as a Pallas kernel (interpret
                                             mode on CPU), the bias built in-kernel from its distinct values

`implementation='einsum'` forces the explicit path for every kind (tests compare the two). The default
(`None`) takes dot_product_attention on accelerators; on CPU, where XLA's dot_product_attention measured about
8% slower per train step at our shapes (docs/benchmarks.md), the explicit path up to one default tile and the
blockwise path beyond (`default_is_tiled`: faster for every kind at 2,048, and O(L) memory). A causal square
(no cache offset) goes to dot_product_attention as `is_causal=True` rather than as a mask, so the cuDNN
kernel can skip the masked half; padding and cache masks go in `mask`.

Numerics: scores, position terms and softmax are float32 whatever the input dtype; masked scores take a
large finite negative value, and query rows with no visible key (padding queries under a causal mask) give
exactly zero output instead of a uniform average, identically on both paths.

Masked keys contribute nothing, whatever they hold: a masked weight is exactly zero, but 0 * NaN is NaN, so
a NaN or inf in a padded key, an unfilled cache slot or a future key under the causal mask would otherwise
reach every query row. When anything is masked, non-finite keys and values are replaced by zeros (a
select) before either path runs, and the rows that do see one are set to NaN afterwards, as a NaN in a
visible key makes them. Finite inputs pass through the selects unchanged (bit for bit).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import checks, validation
from relpos_jax.nn import blockwise, call, explicit, terms
from relpos_jax.nn.call import AttentionInputs, AttentionSettings

# The settings' names, read here by the layers and the models' configs (they live with the settings, `call`).
IMPLEMENTATIONS = call.IMPLEMENTATIONS
TILED_IMPLEMENTATIONS = call.TILED_IMPLEMENTATIONS
check_implementation = call.check_implementation
check_block_size = call.check_block_size
default_is_tiled = call.default_is_tiled

_LARGE_NEGATIVE = blockwise.LARGE_NEGATIVE


def attention_mask(
    q_len: int,
    k_len: int,
    *,
    causal: bool,
    q_offset=0,
    key_mask: jax.Array | None = None,
    q_segment_ids: jax.Array | None = None,
    k_segment_ids: jax.Array | None = None,
) -> jax.Array | None:
  """Bool (B or 1, 1, q_len, k_len), True = may attend; None when nothing is masked.

  Causality is by index: query i (at index q_offset + i among the keys) sees keys j <= q_offset + i.
  `key_mask` (B, k_len) bool marks real keys (padding_mask of the keys, or the filled part of a cache).
  `q_segment_ids` (B, q_len), `k_segment_ids` (B, k_len) int, both or neither: packed documents, a query sees
  the keys of its own document (equal ids) only.
  """
  q_len = validation.positive_int('attention_mask', 'q_len', q_len)
  k_len = validation.positive_int('attention_mask', 'k_len', k_len)
  if key_mask is not None:
    key_mask = validation.mask('attention_mask', key_mask, (np.shape(key_mask)[0], k_len), 'key_mask')
  mask = _attention_mask(
      q_len, k_len, causal=causal, q_offset=validation.offset('attention_mask', q_offset), key_mask=key_mask
  )
  validation.require(
      (q_segment_ids is None) == (k_segment_ids is None),
      'attention_mask',
      'k_segment_ids',
      '<given>' if q_segment_ids is None else None,
      'both q_segment_ids and k_segment_ids, or neither',
  )
  if q_segment_ids is None:
    return mask
  batch = np.shape(q_segment_ids)[0]
  q_seg = validation.positions('attention_mask', q_segment_ids, (batch, q_len), 'q_segment_ids')
  k_seg = validation.positions('attention_mask', k_segment_ids, (batch, k_len), 'k_segment_ids')
  same = (q_seg[:, :, None] == k_seg[:, None, :])[:, None]
  return same if mask is None else mask & same


def _attention_mask(q_len, k_len, *, causal, q_offset, key_mask):
  mask = None
  if causal:
    q_index = jnp.arange(q_len, dtype=jnp.int32)[:, None] + jnp.asarray(q_offset, jnp.int32)
    mask = (jnp.arange(k_len, dtype=jnp.int32)[None, :] <= q_index)[None, None]
  if key_mask is not None:
    km = key_mask[:, None, None, :]
    mask = km if mask is None else mask & km
  return mask


def sliding_window_mask(
    q_len: int, k_len: int, window: int, *, q_offset=0, q_positions=None, k_positions=None, symmetric=False
) -> jax.Array:
  """Bool (B or 1, 1, Lq, Lk): True where the key is less than `window` positions before the query
  (keys ahead are left to the causal mask), or, `symmetric` (a bidirectional model), |i - j| < window."""
  if q_positions is None:
    q_pos = (jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32))[None]
    k_pos = jnp.arange(k_len, dtype=jnp.int32)[None]
  else:
    q_pos, k_pos = jnp.asarray(q_positions, jnp.int32), jnp.asarray(k_positions, jnp.int32)
  distance = q_pos[:, :, None] - k_pos[:, None, :]
  return ((jnp.abs(distance) if symmetric else distance) < window)[:, None]


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
    if terms.select.term_for(part).toeplitz:
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
    full = _attention_mask(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask)
    full = mask if full is None else full & mask
    sees = jnp.any(jnp.broadcast_to(full, full.shape[:-1] + (k_len,)), axis=(1, -1))  # (B|1, Lq)
  return sees


def _zero_nonfinite(key, value):
  """(key, value with every (token, head) holding a non-finite entry zeroed, (B, Lk, H) bool: finite)."""
  finite = jnp.all(jnp.isfinite(key), axis=-1) & jnp.all(jnp.isfinite(value), axis=-1)
  key = jnp.where(finite[..., None], key, jnp.zeros((), key.dtype))
  value = jnp.where(finite[..., None], value, jnp.zeros((), value.dtype))
  return key, value, finite


def _without_nonfinite_keys(key, value, q_len, *, causal, q_offset, key_mask, mask):
  """(key, value with non-finite entries zeroed, (B, Lq, H) bool: rows that see a non-finite key or value)."""
  k_len = key.shape[1]
  key, value, finite = _zero_nonfinite(key, value)
  bad = ~finite
  if key_mask is not None:
    bad = bad & key_mask[:, :, None]
  if mask is not None:  # An arbitrary mask: ask the full (B, H, Lq, Lk) mask.
    full = attention_mask(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask)
    full = mask if full is None else full & mask
    seen = jnp.any(full & jnp.moveaxis(bad, 1, -1)[:, :, None, :], axis=-1)  # (B, H, Lq)
    return key, value, jnp.moveaxis(seen, 1, -1)
  if causal:
    # Query i sees keys j <= q_offset + i: does it see the first non-finite one?
    index = jnp.arange(k_len, dtype=jnp.int32)[None, :, None]
    first = jnp.min(jnp.where(bad, index, k_len), axis=1)  # (B, H)
    q_index = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)
    return key, value, first[:, None, :] <= q_index[None, :, None]
  return key, value, jnp.broadcast_to(jnp.any(bad, axis=1)[:, None, :], (bad.shape[0], q_len, bad.shape[2]))


def _without_nonfinite_keys_segmented(
    key, value, *, causal, q_offset, key_mask, q_segment_ids, k_segment_ids, chunk=blockwise.SEGMENT_CHUNK
):
  """`_without_nonfinite_keys` under a document mask, in O(L) memory (`blockwise.segment_visibility`): (key, value
  with non-finite entries zeroed, (B, Lq, H) rows that see a non-finite key or value, (B, Lq) rows that see a key)."""
  key, value, finite = _zero_nonfinite(key, value)
  counts, seen = blockwise.segment_visibility(
      q_segment_ids, k_segment_ids, causal=causal, q_offset=q_offset, key_mask=key_mask, bad=~finite, chunk=chunk
  )
  return key, value, seen, counts > 0


def attend(inputs: AttentionInputs, parts, params, settings: AttentionSettings | None = None) -> jax.Array:
  """Multi-head attention with the position terms of `parts` (`call`: the inputs and settings, each checked
  where built).

  Args:
    inputs: `call.AttentionInputs.checked(query, key, value, positions, key_mask, mask, features, bias)`: query
      (B, Lq, H, D) already rotated if a part is rotary (`terms.parts.rotate`), key and value (B, Lk, H, D);
      `positions` a `call.Positions`: its offset places query i at key index offset + i (cached decoding: the
      causal mask, and with contiguous positions also the positions), its explicit positions are what the
      position terms read, its segment ids a document mask (query i sees key j only when their ids are equal:
      the untiled paths take it as part of `mask`, 'blockwise' compares each tile's ids, O(L) memory, unless a
      sliding window's mask is realised anyway; 'pallas' refuses it); or a `call.Grid` / `call.Coordinates` of
      self-attention, which the grid parts' Terms read (`terms.select.term_for`: on a Grid a bias gathers each
      tile's block from its table of distinct offsets). `bias` replaces the scalar parts' own bias. `features`: per part,
      the contextual parts' token features of the keys; 'blockwise' tiles every content kind, 'pallas' none
      of them (a ValueError naming the encoder and its kind).
    parts, params: the attention parts (`terms.parts.attention_parts`) and one params pytree each.
    settings: `call.AttentionSettings.checked(implementation, block_size, window, causal, debug_checks)`
      (None: the defaults). The kernel is `settings.path(...)`; `debug_checks` check the realised bias of
      Toeplitz encoders (not on the tiled paths, whose Toeplitz biases are never realised); a window is an
      arbitrary mask on the tiled paths ('blockwise' only), its distances the positions' (explicit when given).

  Returns:
    (B, Lq, H, D) in value's dtype. Queries that see no key at all output zeros.
  """
  settings = AttentionSettings() if settings is None else settings
  pos, causal = inputs.positions, settings.causal
  q_len, k_len = inputs.q_len, inputs.k_len
  if pos.segmented:
    validation.require(
        settings.implementation != 'pallas',
        'attend',
        'implementation',
        settings.implementation,
        'not "pallas" with segment ids (its kernel masks causally and by padding only); "blockwise" tiles the '
        'document mask, None, "einsum", "xla" and "cudnn" take it whole',
    )
    replaced = [part.name for part in parts if getattr(part, 'replaces_content', False)]  # PaTH's logit
    validation.require(
        not replaced,
        'attend',
        'q_segment_ids',
        '<given>',
        f'None with {replaced}: its logit replaces q . k with a scan over every token between key and query, '
        'which does not take a document mask (a packed document scores differently from the document alone)',
    )
  mask = inputs.mask
  if settings.window is not None:
    # Folded into the mask before the non-finite keys are sanitized: a key beyond the window is masked.
    window_mask = sliding_window_mask(
        q_len,
        k_len,
        settings.window,
        q_offset=pos.offset,
        q_positions=pos.query,
        k_positions=pos.key,
        symmetric=not causal,
    )
    mask = window_mask if mask is None else mask & window_mask
  path = settings.path(parts, inputs.query, inputs.value)
  if pos.segmented and not (path == 'blockwise' and mask is None):
    # The untiled paths hold (Lq, Lk) scores anyway, and a window's mask is realised already; only the blockwise
    # tiles compare ids without an (Lq, Lk) mask.
    same = (pos.query_segments[:, :, None] == pos.key_segments[:, None, :])[:, None]  # (B, 1, Lq, Lk)
    mask = same if mask is None else mask & same
    pos = pos.without_segments()
  key, value, key_mask = inputs.key, inputs.value, inputs.key_mask
  sees_nonfinite, sees = None, None
  if pos.segmented:
    key, value, sees_nonfinite, sees = _without_nonfinite_keys_segmented(
        key,
        value,
        causal=causal,
        q_offset=pos.offset,
        key_mask=key_mask,
        q_segment_ids=pos.query_segments,
        k_segment_ids=pos.key_segments,
        chunk=blockwise.block_sizes(settings.block_size)[1],
    )
  elif causal or key_mask is not None or mask is not None:
    key, value, sees_nonfinite = _without_nonfinite_keys(
        key, value, q_len, causal=causal, q_offset=pos.offset, key_mask=key_mask, mask=mask
    )
  features = inputs.features
  if terms.parts.reads_content(parts):
    features = terms.content.check_features(parts, features, inputs.query.shape[0], k_len)
  # What every path reads: the masks folded, the masked keys sanitized.
  ready = dataclasses.replace(inputs, key=key, value=value, positions=pos, mask=mask, features=features)
  if settings.debug_checks:  # a grid table's own check (block-Toeplitz), on every path
    terms.parts.check_realised(parts, params, pos)
  if path in call.TILED_IMPLEMENTATIONS:
    if path == 'pallas':
      from relpos_jax.nn import pallas_attention  # Local: jax.experimental.pallas only when asked for.

      tiled = pallas_attention.attend
    else:
      tiled = blockwise.attend
    return _finish(tiled(ready, parts, params, settings), ready, settings, sees_nonfinite, sees)

  if settings.debug_checks and pos.contiguous and terms.parts.toeplitz_parts(parts):  # the realised bias: untiled
    realised = terms.parts.scalar_bias(parts, params, q_len, k_len, q_offset=pos.offset)
    if realised is not None:
      debug_check_bias(parts, params, jnp.asarray(realised, jnp.float32), q_len, k_len, pos.offset)
  if path == 'dot_product':
    out = _dot_product_attention(ready, parts, params, settings)
  else:
    # The explicit path: the tiled path's Terms on one tile holding every query and key.
    out = explicit.attend(ready, parts, params, settings)
  return _finish(out, ready, settings, sees_nonfinite)


def _dot_product_attention(inputs: AttentionInputs, parts, params, settings: AttentionSettings):
  """jax.nn.dot_product_attention with the scalar parts' bias realised (XLA's or cuDNN's fused kernel)."""
  query, key, value, pos = inputs.query, inputs.key, inputs.value, inputs.positions
  causal, q_offset, implementation = settings.causal, pos.offset, settings.implementation
  q_len, k_len = query.shape[1], key.shape[1]
  bias = inputs.bias
  if bias is None:
    bias = terms.parts.scalar_bias(parts, params, q_len, k_len, where=pos)
  if bias is not None:
    checks.assert_bias_shape(bias, q_len=q_len, k_len=k_len, num_heads=query.shape[2])
    bias = jnp.asarray(bias, jnp.float32)
    if bias.ndim == 3:
      bias = bias[None]
  # A plain causal square lets the kernel skip the masked half (cuDNN) instead of reading a mask.
  native_causal = causal and q_len == k_len and _is_static_zero(q_offset)
  dpa_mask = _attention_mask(
      q_len, k_len, causal=causal and not native_causal, q_offset=q_offset, key_mask=inputs.key_mask
  )
  if inputs.mask is not None:
    dpa_mask = inputs.mask if dpa_mask is None else dpa_mask & inputs.mask
  # cuDNN takes the bias in the inputs' dtype; XLA adds it to float32 logits as it is.
  dpa_bias = bias.astype(query.dtype) if (bias is not None and implementation == 'cudnn') else bias
  return jax.nn.dot_product_attention(
      query,
      key,
      value,
      bias=dpa_bias,
      mask=dpa_mask,
      scale=1.0 / np.sqrt(query.shape[-1]),
      is_causal=native_causal,
      implementation=implementation,
  )


def _finish(out, inputs: AttentionInputs, settings: AttentionSettings, sees_nonfinite, sees=None):
  """Zeroes the rows that see no key and poisons those that see a non-finite one. `sees`: (B, Lq) bool when
  known already (the document mask's, `_without_nonfinite_keys_segmented`), else derived from the masks."""
  if sees is None:
    sees = _rows_seeing_a_key(
        inputs.q_len,
        inputs.k_len,
        causal=settings.causal,
        q_offset=inputs.positions.offset,
        key_mask=inputs.key_mask,
        mask=inputs.mask,
    )
  if sees is not None:
    # A query that sees no key (padding under a causal mask) outputs zero on every path, not an average.
    out = jnp.where(sees[:, :, None, None], out, jnp.zeros((), out.dtype))
  if sees_nonfinite is not None:
    # Masked keys were zeroed before any path ran; a row that sees a non-finite key stays visibly NaN.
    out = jnp.where(sees_nonfinite[..., None], jnp.asarray(jnp.nan, out.dtype), out)
  return out
