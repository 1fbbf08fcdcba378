"""`implementation='pallas'`: a Pallas flash-attention forward kernel that builds Toeplitz biases in-kernel.

What no library does (tokamax and jax.nn.dot_product_attention take a bias only as an (H, L, L) array): the
kernel reads the q_len + k_len - 1 distinct values b_h(rel) of the summed Toeplitz scalar biases (evaluated
once by `blockwise.prepare`, O(L H)) and expands, for each (bq, bk) tile, the bq + bk - 1 values it needs
into the tile's bias, next to the causal / padding mask, inside the online-softmax loop. Grid (B, H, query
tiles); each program loops over the key tiles its queries can see (a causal mask skips the rest).

Backward: `blockwise`'s recomputing backward (XLA loops over the same tiles, the position data's gradient
included), from the kernel's outputs and log-sum-exp, so gradients equal the other paths'.

Kinds: no position term, rotary (applied before attention) and Toeplitz scalar biases at contiguous
positions (ALiBi, T5, KERPLE, Shaw's scalar table, ...). A query-dependent bias (FIRE), explicit positions,
vector-relative terms, a precomputed bias or an arbitrary mask are a ValueError pointing to 'blockwise'.

`interpret`: None runs Pallas' interpreter on CPU (the tests; slow, for correctness only) and compiles the
kernel (Triton on GPU, Mosaic on TPU) elsewhere. GPU/TPU timings: not measured (no accelerator was lent).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from relpos_jax.nn import blockwise


def _check_supported(prepared: blockwise.Prepared) -> None:
  cfg = prepared.cfg
  for part, term in zip(cfg.parts, cfg.part_terms):
    if not term.kernel_form:
      raise ValueError(
          f'attention implementation "pallas": encoder {part.name or type(part).__name__!r} of '
          f'kind {part.kind.value!r} needs {type(term).__name__} per tile (query-dependent '
          'bias, explicit positions or vector terms); the Pallas kernel builds Toeplitz scalar '
          'biases only. Use implementation "blockwise".'
      )
  if cfg.given_bias or cfg.has_mask:
    raise ValueError(
        'attention implementation "pallas": a precomputed position_bias or an arbitrary mask is '
        'not supported (only causal and padding masks); use implementation "blockwise".'
    )


def _kernel(*refs, cfg, has_bias):
  # The refs in pallas_call's order: the offset, q, k, v, the bias's distinct values, the valid keys; the outputs.
  offset_ref, q_ref, k_ref, v_ref, values_ref, valid_ref, out_ref, lse_ref = refs
  bq, bk = cfg.bq, cfg.bk
  qs = pl.program_id(2) * bq
  q_offset = offset_ref[0]
  q = q_ref[...].astype(jnp.float32)  # (bq, D)
  rows = jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
  cols = jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
  padded_q = cfg.num_q_tiles * bq

  def key_tile(n, carry):
    m, l, acc = carry
    ks = n * bk
    k = k_ref[pl.ds(ks, bk), :].astype(jnp.float32)
    v = v_ref[pl.ds(ks, bk), :]
    s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    s = s * np.float32(cfg.scale)
    if has_bias:
      # The tile's bq + bk - 1 distinct values, expanded: entry (i, j) reads rel = ks + j - (q_offset + qs + i).
      start = ks - qs + (padded_q - 1) - (bq - 1)
      diagonals = values_ref[pl.ds(start, bq + bk - 1)]
      s = s + jnp.take(diagonals, cols - rows + (bq - 1), axis=0)
    valid = valid_ref[pl.ds(ks, bk)][None, :] > 0
    if cfg.causal:
      valid = valid & (ks + cols <= q_offset + qs + rows)
    s = jnp.where(valid, s, blockwise.LARGE_NEGATIVE)
    m_new = jnp.maximum(m, jnp.max(s, axis=-1))
    p = jnp.exp(s - m_new[:, None])
    correction = jnp.exp(m - m_new)
    l = correction * l + jnp.sum(p, axis=-1)
    pv = jax.lax.dot_general(p.astype(v.dtype), v, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
    return m_new, l, acc * correction[:, None] + pv

  hi = cfg.num_k_tiles
  if cfg.causal:
    hi = jnp.clip((qs + bq - 1 + q_offset) // bk + 1, 0, cfg.num_k_tiles)
  init = (jnp.full((bq,), -jnp.inf, jnp.float32), jnp.zeros((bq,), jnp.float32), jnp.zeros(q.shape, jnp.float32))
  m, l, acc = jax.lax.fori_loop(0, hi, key_tile, init)
  seen = l > 0
  safe_l = jnp.where(seen, l, 1.0)
  out_ref[...] = (acc / safe_l[:, None]).astype(out_ref.dtype)
  lse_ref[...] = jnp.where(seen, m + jnp.log(safe_l), -jnp.inf)


def _forward(cfg, q, k, v, theta, aux, interpret):
  b, padded_q, h, d = q.shape
  padded_k = k.shape[1]
  has_bias = bool(theta['parts'])
  values = sum(theta['parts']) if has_bias else jnp.zeros((h, padded_q + padded_k - 1), jnp.float32)
  valid = jnp.arange(padded_k, dtype=jnp.int32)[None] < cfg.k_len
  if cfg.has_key_mask:
    valid = valid & aux['key_mask']
  valid = jnp.broadcast_to(valid, (b, padded_k)).astype(jnp.int32)
  heads_first = lambda x: jnp.moveaxis(x, 2, 1)  # (B, L, H, D) -> (B, H, L, D)
  offset = jnp.reshape(aux['q_offset'], (1,))
  out, lse = pl.pallas_call(
      functools.partial(_kernel, cfg=cfg, has_bias=has_bias),
      grid=(b, h, cfg.num_q_tiles),
      in_specs=[
          pl.BlockSpec((1,), lambda bi, hi, ti: (0,)),
          pl.BlockSpec((None, None, cfg.bq, d), lambda bi, hi, ti: (bi, hi, ti, 0)),
          pl.BlockSpec((None, None, padded_k, d), lambda bi, hi, ti: (bi, hi, 0, 0)),
          pl.BlockSpec((None, None, padded_k, d), lambda bi, hi, ti: (bi, hi, 0, 0)),
          pl.BlockSpec((None, padded_q + padded_k - 1), lambda bi, hi, ti: (hi, 0)),
          pl.BlockSpec((None, padded_k), lambda bi, hi, ti: (bi, 0)),
      ],
      out_specs=[
          pl.BlockSpec((None, None, cfg.bq, d), lambda bi, hi, ti: (bi, hi, ti, 0)),
          pl.BlockSpec((None, None, cfg.bq), lambda bi, hi, ti: (bi, hi, ti)),
      ],
      out_shape=[
          jax.ShapeDtypeStruct((b, h, padded_q, d), v.dtype),
          jax.ShapeDtypeStruct((b, h, padded_q), jnp.float32),
      ],
      interpret=interpret,
  )(offset, heads_first(q), heads_first(k), heads_first(v), values, valid)
  return jnp.moveaxis(out, 1, 2), lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 6))
def _attention(cfg, q, k, v, theta, aux, interpret):
  return _forward(cfg, q, k, v, theta, aux, interpret)[0]


def _attention_fwd(cfg, q, k, v, theta, aux, interpret):
  out, lse = _forward(cfg, q, k, v, theta, aux, interpret)
  return out, (q, k, v, theta, aux, out, lse)


def _attention_bwd(cfg, interpret, residuals, d_out):
  del interpret
  return blockwise.attention_bwd(cfg, residuals, d_out)


_attention.defvjp(_attention_fwd, _attention_bwd)


def attend(inputs, parts, params, settings, interpret=None) -> jax.Array:
  """`functional.attend`'s contract with the Pallas kernel (arguments as `blockwise.prepare`; `interpret` None:
  Pallas's interpreter on a CPU)."""
  prepared = blockwise.prepare(inputs, parts, params, settings)
  _check_supported(prepared)
  if interpret is None:
    interpret = jax.default_backend() == 'cpu'
  p = prepared
  return _attention(p.cfg, p.q, p.k, p.v, p.theta, p.aux, bool(interpret))[:, : p.q_len]
