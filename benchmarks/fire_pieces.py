"""Measurement 4p: FIRE's MLP evaluated as its linear pieces, against the same MLP evaluated unit by unit.

FIRE (1-D) and 2-D FIRE read the query's own position, so they have no table of distinct offsets: the blockwise
path evaluates their MLP, Linear(1, 32) -> ReLU -> Linear(32, H), on every (query, key) pair of every tile, in
the forward and again in the backward's recompute. An MLP of one scalar is piecewise linear
(`relpos_jax.encoders.mlp.apply_scalar_mlp`): each pair then costs a search among 32 kinks and one
multiply-add per head instead of 32 x (H + 2) operations.

  plain       jax.nn.dot_product_attention, no position term (causal for the 1-D row, not for the grid)
  by units    the layer's blockwise path with the encoder's pair bias computed by `mlp.apply_mlp` (the MLP's
              (bq, bk, 32) hidden layer per tile): the library's 1-D FIRE, and 2-D FIRE before this section
  by pieces   the same path with the MLP as its pieces (`apply_scalar_mlp`): the library's 2-D FIRE

Timed: fwd+bwd (gradients w.r.t. q, k, v and the encoder's parameters), interleaved rounds (section 2's method).
"""

from __future__ import annotations

import dataclasses


from relpos_jax import encoders, grid as grid_lib
from relpos_jax.encoders import mlp
from relpos_jax.encoders.fire import FIRE
from relpos_jax.grid.encoders.fire import FIRE2D
from relpos_jax.nn import terms
from benchmarks import attention_kinds, blockwise, grid, measure, report

LENGTH, QUICK_LENGTH = 4096, 256
TARGET = 1.1  # the time target for a grid bias kind against plain attention
ROWS = ('fire', 'fire2d')


@dataclasses.dataclass(frozen=True)
class _FIREByPieces(FIRE):

  def pair_bias(self, params, q_pos, k_pos):
    return mlp.apply_scalar_mlp(params['mlp'], self.normalized_distance(params, q_pos, k_pos))


@dataclasses.dataclass(frozen=True)
class _FIRE2DByUnits(FIRE2D):

  def query_bias(self, params, q_pos, k_pos):
    return mlp.apply_mlp(params['mlp'], self.normalized_distance(params, q_pos, k_pos)[..., None])


def _one_d(encoder):
  parts = terms.parts.attention_parts(encoder)
  return blockwise.core(parts, 'blockwise'), attention_kinds.encoder_params(parts)


def _grid(encoder, shape):
  return grid.core(encoder, shape, 'blockwise'), grid.encoder_params(encoder)


def contenders(row: str, length: int) -> dict:
  """name -> (fwd+bwd fn, args) for 'plain', 'units' and 'pieces' on row 'fire' (1-D, L = length) or 'fire2d'
  (the square grid of about `length` tokens)."""
  side = max(1, int(round(length**0.5)))
  if row == 'fire':
    n, units, pieces = length, _one_d(encoders.make('fire')), _one_d(_FIREByPieces())
  else:
    shape = (side, side)
    n, units, pieces = side * side, _grid(_FIRE2DByUnits(), shape), _grid(grid_lib.make('fire2d'), shape)
  q, k, v, cotangent = attention_kinds.inputs(n)
  plain = attention_kinds.plain_attention if row == 'fire' else grid.plain_attention  # causal; an image is not
  out = {'plain': (attention_kinds.with_backward(plain), (q, k, v, [], cotangent))}
  for name, (fn, params) in (('units', units), ('pieces', pieces)):
    out[name] = (attention_kinds.with_backward(fn), (q, k, v, params, cotangent))
  return out


def run(length: int = LENGTH, repeats: int = 5, warmup: int = 1, rows=ROWS) -> report.Section:
  side = max(1, int(round(length**0.5)))
  section = report.Section(
      title="4p. FIRE's MLP as its linear pieces: fwd+bwd time",
      timed=(
          f'Timed: fwd+bwd of the blockwise attention core (q, k, v (1, L, {attention_kinds.NUM_HEADS}, '
          f'{attention_kinds.HEAD_DIM}) float32 and the encoder params; gradients w.r.t. all of them) for 1-D FIRE '
          f'(causal, L = {length}) and 2-D FIRE (a {side}x{side} grid, not causal), its MLP evaluated unit by unit '
          "(`apply_mlp`: the library's 1-D FIRE) or as its linear pieces (`apply_scalar_mlp`: the library's 2-D "
          'FIRE); `plain` = jax.nn.dot_product_attention with no position term, causal as its row. Ratios are medians of '
          "per-round ratios (section 2's method)."
      ),
      columns=[
          'encoder (L)',
          'plain fwd+bwd ms',
          'by units fwd+bwd ms',
          'by pieces fwd+bwd ms',
          'pieces / units',
          'pieces / plain',
          'pieces / plain (CPU time)',
          'units / plain',
          'library',
          'target vs plain (library)',
      ],
  )
  spreads = []
  for row in rows:
    fns = contenders(row, length)
    n = fns['plain'][1][0].shape[1]
    timings = measure.time_contenders(fns, repeats=repeats, warmup=warmup)
    spreads += [t.spread for t in timings.values()]
    plain_t, units, pieces = timings['plain'], timings['units'], timings['pieces']
    ratios = (
        pieces.ratio_to(units),
        pieces.ratio_to(plain_t),
        pieces.cpu_ratio_to(plain_t),
        units.ratio_to(plain_t),
    )
    library = 'pieces' if row == 'fire2d' else 'units'
    verdict = report.verdict(pieces.ratio_to(plain_t), TARGET) if row == 'fire2d' else '- (no target set)'
    times = [report.ms(t.median) for t in (plain_t, units, pieces)]
    section.add_row(f'{row} ({n})', *times, *map(report.ratio, ratios), library, verdict)
  section.notes.append(report.noise_note(spreads, repeats))
  return section
