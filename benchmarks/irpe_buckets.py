"""Measurement 4q: iRPE's contextual mode on a static grid, its buckets read from the grid's offsets.

iRPE's contextual terms (relpos_jax.grid.encoders.irpe, `terms.grid.GridScores`) need each pair's bucket: per
tile, every (query, key) pair's offset goes through the piecewise index function (a logarithm, a rounding and a
clip per axis), in the forward and again in the backward's recompute. On a static grid (the layer given
`grid_shape`) every offset is one of the (2H - 1)(2W - 1) the grid holds, so the layer buckets those once
(`IRPE.offset_buckets`) and a tile reads each pair's bucket with one integer index and a gather.

  plain          jax.nn.dot_product_attention, no position term (not causal: an image)
  per pair       functional.attend, blockwise, the part's params with the tokens' coordinates only (what the
                 layer does at explicit coordinates, and did on a grid before this section)
  offset table   the same with the grid's offset buckets (`with_coordinates(..., offset_buckets=...)`: what the
                 layer does given grid_shape)

Timed: fwd+bwd (gradients w.r.t. q, k, v and the encoder's tables), interleaved rounds (section 2's method).
"""

from __future__ import annotations

import jax.numpy as jnp

from relpos_jax import grid as grid_lib
from relpos_jax.nn import functional, terms
from relpos_jax.nn import call
from benchmarks import attention_kinds, grid, measure, report

SIDE, QUICK_SIDE = 32, 8
# (row, spec): the reference's default (a table on the keys) and its three-place setting.
ROWS = (
    ('irpe ctx (k)', "irpe(mode='contextual')"),
    ('irpe ctx (qkv)', "irpe(mode='contextual', rpe_on='qkv')"),
)


def contenders(spec: str, side: int) -> dict:
  """name -> (fwd+bwd fn, args) for 'plain', 'per pair' and 'offset table' over a side x side grid + class token."""
  encoder = grid_lib.from_spec(spec)
  shape = (side, side)
  n = side * side + 1
  coords = jnp.broadcast_to(grid_lib.grid_positions(shape, class_token=True), (attention_kinds.BATCH, n, 2))
  params = grid.encoder_params(encoder)

  def core(q, k, v, theta):
    return functional.attend(
        call.AttentionInputs.checked(q, k, v),
        (encoder,),
        [theta],
        call.AttentionSettings.checked(implementation='blockwise'),
    )

  q, k, v, cotangent = attention_kinds.inputs(n)
  out = {'plain': (attention_kinds.with_backward(grid.plain_attention), (q, k, v, [], cotangent))}
  for name, table in (('per pair', None), ('offset table', encoder.offset_buckets(shape))):
    theta = terms.grid.with_coordinates(params, coords, coords, offset_buckets=table)
    out[name] = (attention_kinds.with_backward(core), (q, k, v, theta, cotangent))
  return out


def run(side: int = SIDE, repeats: int = 5, warmup: int = 1, rows=ROWS) -> report.Section:
  section = report.Section(
      title="4q. iRPE's contextual mode on a grid: buckets per pair or from the grid's offsets, fwd+bwd time",
      timed=(
          f'Timed: fwd+bwd of the blockwise attention core (q, k, v (1, L, {attention_kinds.NUM_HEADS}, '
          f'{attention_kinds.HEAD_DIM}) float32 over a {side}x{side} grid and a class token, not causal, and the '
          "encoder's tables; gradients w.r.t. all of them), each pair's bucket computed from its coordinates "
          "(`per pair`) or read from the grid's offset buckets (`offset table`, the layer's path given grid_shape); "
          '`plain` = jax.nn.dot_product_attention with no position term. Ratios are medians of per-round ratios '
          "(section 2's method)."
      ),
      columns=[
          'encoder (L)',
          'plain fwd+bwd ms',
          'per pair fwd+bwd ms',
          'offset table fwd+bwd ms',
          'offset table / per pair',
          'offset table / per pair (CPU time)',
          'offset table / plain',
      ],
  )
  spreads = []
  for row, spec in rows:
    fns = contenders(spec, side)
    n = fns['plain'][1][0].shape[1]
    timings = measure.time_contenders(fns, repeats=repeats, warmup=warmup)
    spreads += [t.spread for t in timings.values()]
    plain_t, per_pair, table = timings['plain'], timings['per pair'], timings['offset table']
    ratios = (table.ratio_to(per_pair), table.cpu_ratio_to(per_pair), table.ratio_to(plain_t))
    times = [report.ms(t.median) for t in (plain_t, per_pair, table)]
    section.add_row(f'{row} ({n})', *times, *map(report.ratio, ratios))
  section.notes.append(report.noise_note(spreads, repeats))
  return section
