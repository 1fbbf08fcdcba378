"""The explicit path: every part's Term on one tile that holds every query and key ((B, H, Lq, Lk) scores), a
plain softmax (or the normalizer's weights), differentiated by plain autodiff.

`functional.attend` takes it for the kinds dot_product_attention does not cover, and for
`implementation='einsum'`. It is the blockwise kernel's one-tile case: the same preparation
(`blockwise.prepare` with `one_tile=True`), the same fold of the Terms into the logits (`blockwise.tile_logits`)
and the same value terms (`blockwise.tile_values`), so the two paths agree by construction. PaTH's replaced
logit (`terms.content.ReplacedContent`) is built whole here by its chunked scan (tiled, it carries each query
across the key tiles instead).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.nn import blockwise, terms


def attend(inputs, parts, params, settings) -> jax.Array:
  """`functional.attend`'s contract on the explicit path (arguments as `blockwise.prepare`): (B, Lq, H, D) in
  value's dtype. The caller (functional.attend) has checked the inputs and zeroes the queries that see no key."""
  p = blockwise.prepare(inputs, parts, params, settings, one_tile=True)
  value = inputs.value
  cfg = p.cfg
  tile = terms.base.tile_at(cfg, p.aux, jnp.int32(0), jnp.int32(0))
  local = blockwise.tile_locals(cfg, p.theta, tile, p.k, p.aux)
  s = blockwise.tile_logits(cfg, p.aux, tile, p.q, p.k, local)
  if cfg.normalizer is None:
    return blockwise.tile_values(cfg, tile, jax.nn.softmax(s, axis=-1), p.v, local)[:, : p.q_len].astype(value.dtype)
  normalizer = cfg.parts[cfg.normalizer]
  b, _, h, _ = p.q.shape
  carry = normalizer.initial_carry((b, h, cfg.bq))
  weights, _ = normalizer.tile_weights(s, blockwise.allowed_pairs(cfg, p.aux, tile, normalizer), carry)
  out = blockwise.tile_values(cfg, tile, weights, p.v, local)
  return blockwise.with_remainder(p, value, out, jnp.sum(weights, axis=-1))


def weights(inputs, parts, params, settings) -> jax.Array:
  """The attention distribution (B, H, Lq, Lk) float32 of the explicit path: the softmax of the one tile's masked
  logits (every score and bias of the parts' Terms; a value term is no weight). For `attention_weights`; the inputs
  as `functional.attend` takes them (a window is not folded in; a query that sees no key gets uniform weights).
  A part that reads positions and whose Term the weights do not hold (`Term.weights_form`) is refused by name."""
  other = [
      p.name for p in parts if p.reads_positions and not terms.select.term_for(p, where=inputs.positions).weights_form
  ]
  validation.require(
      not other,
      'attention_weights',
      'encoder',
      [p.name for p in parts],
      f'rotary, scalar-bias or position-free parts only (the weights are rebuilt explicitly); {other} are not',
  )
  p = blockwise.prepare(inputs, parts, params, settings, one_tile=True)
  tile = terms.base.tile_at(p.cfg, p.aux, jnp.int32(0), jnp.int32(0))
  local = blockwise.tile_locals(p.cfg, p.theta, tile, p.k, p.aux)
  s = blockwise.tile_logits(p.cfg, p.aux, tile, p.q, p.k, local)
  return jax.nn.softmax(s, axis=-1)
