"""The attention core as a pure function: projected q, k, v plus position terms -> per-head outputs.

Both the NNX layer and its Linen twin call `attend`, so given the same weights they compute the same thing.
Which path runs is decided by what the parts' Terms declare (`terms.base.Term`: `dot_product_form`, `tiles`);
every path but dot_product_attention asks the same Terms (prepare, the tile's share, scores, biases,
transform, value term), chosen per kind in one place (`terms.select`):

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

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import checks, validation
from relpos_jax.encoders import contract
from relpos_jax.nn import blockwise, explicit, terms

IMPLEMENTATIONS = (None, 'xla', 'cudnn', 'einsum', 'blockwise', 'pallas')
# The implementations that run in tiles and take a `block_size`.
TILED_IMPLEMENTATIONS = ('blockwise', 'pallas')

_LARGE_NEGATIVE = blockwise.LARGE_NEGATIVE


def check_implementation(implementation) -> None:
  validation.choice('attention', 'implementation', implementation, IMPLEMENTATIONS)


def check_block_size(implementation, block_size) -> None:
  """block_size is None, or valid for a tiled implementation (ValueError otherwise)."""
  if block_size is None:
    return
  if implementation not in TILED_IMPLEMENTATIONS:
    raise ValueError(
        f'block_size={block_size!r} is only used by the tiled attention implementations '
        f'{TILED_IMPLEMENTATIONS}; implementation={implementation!r} has no tiles (drop block_size).'
    )
  blockwise.block_sizes(block_size)


def default_is_tiled(parts, query, value) -> bool:
  """implementation=None on a CPU: the blockwise path once queries and keys span more than one default tile (measured
  faster than the explicit path at L = 2,048 for every kind, docs/benchmarks.md 4b-4h, and O(L) memory), the
  explicit path below (one tile either way, without the recomputing backward). Not for a part with no per-tile
  form or q, k and v of different head sizes (PoPE); on accelerators None keeps dot_product_attention or the
  explicit path."""
  return (
      jax.default_backend() == 'cpu'
      and query.shape[1] > blockwise.DEFAULT_BLOCK_SIZE[0]
      and value.shape[1] > blockwise.DEFAULT_BLOCK_SIZE[1]
      and query.shape[-1] == value.shape[-1]
      and all(terms.select.term_for(part).tiles for part in parts)
  )


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


def attend(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    *,
    parts,
    params,
    causal: bool = False,
    key_mask: jax.Array | None = None,
    mask: jax.Array | None = None,
    q_offset=0,
    q_positions=None,
    k_positions=None,
    position_bias=None,
    implementation=None,
    block_size=None,
    debug_checks: bool = False,
    window: int | None = None,
    features=None,
    q_segment_ids=None,
    k_segment_ids=None,
) -> jax.Array:
  """Multi-head attention with the position terms of `parts`.

  Args:
    query: (B, Lq, H, D), already rotated if a part is rotary (see `terms.parts.rotate`).
    key, value: (B, Lk, H, D).
    parts, params: the attention parts (`terms.parts.attention_parts`) and one params pytree each.
    causal: query i (index q_offset + i among the keys) sees keys j <= q_offset + i only.
    key_mask: (B, Lk) bool, True = a real key (padding mask, or the filled part of a cache).
    mask: any further bool mask broadcastable to (B, H, Lq, Lk), True = attend.
    q_offset: query i is key index q_offset + i (cached decoding): the causal mask, and with contiguous
      positions also the positions (queries at q_offset + i, keys at j). Int or int32 scalar.
    q_positions, k_positions: explicit int positions (B, Lq), (B, Lk) for the position terms, or both None
      (contiguous).
    position_bias: a precomputed scalar bias (H or B, H, Lq, Lk), e.g. shared across layers; replaces
      the scalar parts' own bias. Or a grid bias by its distinct offsets (`terms.GridTable`, the attention
      layer's grid path): 'blockwise' gathers each tile's block from it, the other paths take its `dense()`.
    implementation: None (dot_product_attention on accelerators, einsum on CPU) | 'xla' | 'cudnn' |
      'einsum' | 'blockwise' | 'pallas'.
    block_size: the tiles of 'blockwise' / 'pallas': None (default), an int or (block_q, block_k).
    debug_checks: check the realised bias of Toeplitz encoders with `checks.assert_toeplitz` (not with
      the tiled paths, whose Toeplitz biases are built from their distinct values and never realised).
    window: sliding-window (local) attention: a query sees keys at distance i - j < window only, or
      |i - j| < window when not causal (a bidirectional window is symmetric; None: global). Distances are
      positions' (explicit ones when given), like the position terms. On the tiled paths it is an arbitrary
      mask ('blockwise' only).
    features: per part, the contextual parts' token features of the keys (B, Lk, F) or None
      (`terms.parts.token_features` of the layer input; the cached ones in decoding). 'blockwise' tiles
      every content kind, 'pallas' none of them: a ValueError naming the encoder and its kind.
    q_segment_ids, k_segment_ids: (B, Lq), (B, Lk) int document ids of packed sequences, both or neither: query
      i sees key j only when their ids are equal (a document mask, on top of the causal and padding masks).
      The untiled paths (explicit, dot_product_attention / cuDNN) take it as part of `mask`; 'blockwise' compares
      each tile's query and key ids (`terms.tile_mask`, O(L) memory, no (Lq, Lk) array, unless a sliding
      window's mask is realised anyway); 'pallas' refuses it.

  Returns:
    (B, Lq, H, D) in value's dtype. Queries that see no key at all output zeros.
  """
  check_implementation(implementation)
  check_block_size(implementation, block_size)
  checks.assert_qkv_shapes(query, key, value)
  b, q_len, num_heads, head_dim = query.shape
  k_len = key.shape[1]
  validation.require(
      (q_positions is None) == (k_positions is None),
      'attend',
      'k_positions',
      '<given>' if q_positions is None else None,
      'both q_positions and k_positions, or neither (contiguous positions)',
  )
  q_offset = validation.offset('attend', q_offset)
  validation.require(
      (q_segment_ids is None) == (k_segment_ids is None),
      'attend',
      'k_segment_ids',
      '<given>' if q_segment_ids is None else None,
      'both q_segment_ids and k_segment_ids (packed documents), or neither',
  )
  if q_segment_ids is not None:
    q_segment_ids = validation.positions('attend', q_segment_ids, (b, q_len), 'q_segment_ids')
    k_segment_ids = validation.positions('attend', k_segment_ids, (b, k_len), 'k_segment_ids')
    validation.require(
        implementation != 'pallas',
        'attend',
        'implementation',
        implementation,
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
  if q_positions is not None:
    q_positions = validation.positions('attend', q_positions, (b, q_len), 'q_positions')
    k_positions = validation.positions('attend', k_positions, (b, k_len), 'k_positions')
  scale = 1.0 / np.sqrt(head_dim)
  contiguous = q_positions is None
  if key_mask is not None:
    key_mask = validation.mask('attend', key_mask, (b, k_len), 'key_mask')
  if window is not None:
    window = validation.positive_int('attend', 'window', window)
    # Folded into the mask before the non-finite keys are sanitized: a key beyond the window is masked.
    window_mask = sliding_window_mask(
        q_len, k_len, window, q_offset=q_offset, q_positions=q_positions, k_positions=k_positions, symmetric=not causal
    )
    mask = window_mask if mask is None else mask & window_mask
  if implementation is None and default_is_tiled(parts, query, value):
    implementation = 'blockwise'
  segments = {}
  if q_segment_ids is not None:
    if implementation == 'blockwise' and mask is None:  # tiles compare ids: no (Lq, Lk) mask is built
      segments = dict(q_segment_ids=q_segment_ids, k_segment_ids=k_segment_ids)
    else:  # the untiled paths hold (Lq, Lk) scores anyway; a window's mask is realised already
      same = (q_segment_ids[:, :, None] == k_segment_ids[:, None, :])[:, None]  # (B, 1, Lq, Lk)
      mask = same if mask is None else mask & same
  sees_nonfinite, sees = None, None
  if segments:
    key, value, sees_nonfinite, sees = _without_nonfinite_keys_segmented(
        key,
        value,
        causal=causal,
        q_offset=q_offset,
        key_mask=key_mask,
        chunk=blockwise.block_sizes(block_size)[1],
        **segments,
    )
  elif causal or key_mask is not None or mask is not None:
    key, value, sees_nonfinite = _without_nonfinite_keys(
        key, value, q_len, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask
    )
  if isinstance(position_bias, terms.grid.GridTable):
    position_bias = _check_grid_table(position_bias, q_len, k_len, num_heads, q_offset, q_positions)
    if implementation != 'blockwise':  # only the blockwise kernel gathers per tile; the others take every pair
      position_bias = position_bias.dense()
  if position_bias is not None and not isinstance(position_bias, terms.grid.GridTable):
    checks.assert_bias_shape(position_bias, q_len=q_len, k_len=k_len, num_heads=num_heads)
  if terms.parts.reads_content(parts):
    features = terms.content.check_features(parts, features, b, k_len)
  # What every path reads: the parts, their params, the masks and positions.
  common = dict(
      parts=parts,
      params=params,
      causal=causal,
      scale=scale,
      key_mask=key_mask,
      mask=mask,
      q_offset=q_offset,
      q_positions=q_positions,
      k_positions=k_positions,
      position_bias=position_bias,
  )
  if implementation in TILED_IMPLEMENTATIONS:
    validation.require(
        query.shape[-1] == value.shape[-1],
        'attend',
        'implementation',
        implementation,
        f'"einsum" or None when queries and keys (head size {query.shape[-1]}) and values '
        f"(head size {value.shape[-1]}) differ in size (pope's polar q and k): the tiled paths "
        f"accumulate in the query's size",
    )
    if implementation == 'pallas':
      from relpos_jax.nn import pallas_attention  # Local: jax.experimental.pallas only when asked for.

      tiled = pallas_attention.attend
    else:
      tiled = blockwise.attend
    out = tiled(query, key, value, block_size=block_size, features=features, **common, **segments)
    return _finish(
        out, sees_nonfinite, q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask, sees=sees
    )

  if debug_checks and contiguous and terms.parts.toeplitz_parts(parts):  # the realised bias: untiled only
    realised = terms.parts.scalar_bias(parts, params, q_len, k_len, q_offset=q_offset)
    if realised is not None:
      debug_check_bias(parts, params, jnp.asarray(realised, jnp.float32), q_len, k_len, q_offset)
  use_dot_product_attention = implementation in ('xla', 'cudnn') or (
      implementation is None and jax.default_backend() != 'cpu'
  )
  # dot_product_attention takes a scalar bias and a mask only, and one head size for q, k and v (PoPE's polar
  # q and k are twice v's).
  plain = all(terms.select.term_for(part).dot_product_form for part in parts)
  if plain and query.shape[-1] == value.shape[-1] and use_dot_product_attention:
    out = _dot_product_attention(query, key, value, implementation=implementation, **common)
  else:
    # The explicit path: the tiled path's Terms on one tile holding every query and key.
    out = explicit.attend(query, key, value, features=features, **common)
  return _finish(out, sees_nonfinite, q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask)


def _check_grid_table(table, q_len, k_len, num_heads, q_offset, q_positions):
  """A `terms.grid.GridTable` bias: (num_heads, prod(2n - 1) [+ 1]) values (or None) and pair parts of num_heads
  heads (their params' dims), for queries and keys that are the grid's tokens in raster order (no offset, no
  explicit positions). Else ValueError naming what differs."""
  n = table.num_tokens
  p = int(np.prod([2 * side - 1 for side in table.shape])) + int(table.class_token)
  validation.require(
      table.values is not None or table.pair_parts,
      'attend',
      'position_bias',
      f'<GridTable over {tuple(table.shape)}>',
      'a table of values, pair parts, or both (this one has neither)',
  )
  if table.values is not None:
    values = jnp.asarray(table.values)
    validation.require(
        values.shape == (num_heads, p),
        'attend',
        'position_bias',
        f'<GridTable values {tuple(values.shape)}>',
        f'values (num_heads, prod(2n - 1){" + 1" if table.class_token else ""}) = ({num_heads}, {p}) for the grid '
        f'{tuple(table.shape)}',
    )
  validation.require(
      len(table.pair_parts) == len(table.pair_params),
      'attend',
      'position_bias',
      f'<GridTable with {len(table.pair_parts)} pair parts and {len(table.pair_params)} params>',
      'one params pytree per pair part',
  )
  for part, params in zip(table.pair_parts, table.pair_params):
    heads = contract.dims(params).num_heads
    validation.require(
        heads == num_heads,
        'attend',
        'position_bias',
        f'<GridTable pair part {part.name!r} of {heads} heads>',
        f'pair parts of num_heads = {num_heads} heads',
    )
  validation.require(
      q_len == k_len == n and q_positions is None and _is_static_zero(q_offset),
      'attend',
      'position_bias',
      f'<GridTable over {tuple(table.shape)}>',
      f'queries and keys that are the {n} tokens of the grid in raster order (got Lq={q_len}, Lk={k_len}), '
      'contiguous positions and q_offset 0',
  )
  return table


def _dot_product_attention(
    query,
    key,
    value,
    *,
    parts,
    params,
    causal,
    key_mask,
    mask,
    q_offset,
    q_positions,
    k_positions,
    position_bias,
    implementation,
    scale,
):
  """jax.nn.dot_product_attention with the scalar parts' bias realised (XLA's or cuDNN's fused kernel)."""
  q_len, k_len = query.shape[1], key.shape[1]
  bias = position_bias
  if bias is None:
    bias = terms.parts.scalar_bias(
        parts, params, q_len, k_len, q_offset=q_offset, q_positions=q_positions, k_positions=k_positions
    )
  if bias is not None:
    checks.assert_bias_shape(bias, q_len=q_len, k_len=k_len, num_heads=query.shape[2])
    bias = jnp.asarray(bias, jnp.float32)
    if bias.ndim == 3:
      bias = bias[None]
  # A plain causal square lets the kernel skip the masked half (cuDNN) instead of reading a mask.
  native_causal = causal and q_len == k_len and _is_static_zero(q_offset)
  dpa_mask = _attention_mask(q_len, k_len, causal=causal and not native_causal, q_offset=q_offset, key_mask=key_mask)
  if mask is not None:
    dpa_mask = mask if dpa_mask is None else dpa_mask & mask
  # cuDNN takes the bias in the inputs' dtype; XLA adds it to float32 logits as it is.
  dpa_bias = bias.astype(query.dtype) if (bias is not None and implementation == 'cudnn') else bias
  return jax.nn.dot_product_attention(
      query,
      key,
      value,
      bias=dpa_bias,
      mask=dpa_mask,
      scale=scale,
      is_causal=native_causal,
      implementation=implementation,
  )


def _finish(out, sees_nonfinite, q_len, k_len, *, causal, q_offset, key_mask, mask, sees=None):
  """Zeroes the rows that see no key and poisons those that see a non-finite one. `sees`: (B, Lq) bool when
  known already (the document mask's, `_without_nonfinite_keys_segmented`), else derived from the masks."""
  if sees is None:
    sees = _rows_seeing_a_key(q_len, k_len, causal=causal, q_offset=q_offset, key_mask=key_mask, mask=mask)
  if sees is not None:
    # A query that sees no key (padding under a causal mask) outputs zero on every path, not an average.
    out = jnp.where(sees[:, :, None, None], out, jnp.zeros((), out.dtype))
  if sees_nonfinite is not None:
    # Masked keys were zeroed before any path ran; a row that sees a non-finite key stays visibly NaN.
    out = jnp.where(sees_nonfinite[..., None], jnp.asarray(jnp.nan, out.dtype), out)
  return out
