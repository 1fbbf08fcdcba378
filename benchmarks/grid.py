"""Measurement 4m-4n: blockwise attention on a grid (2-D positions), against the explicit path and plain attention.

Every contender is the layer's grid attention core (what `relpos_jax.nn.attention.self_attention_inputs` hands
`functional.attend` for a static `grid_shape`, between the projections): a grid rotary encoder rotates q and k at
the grid's coordinates in raster order; a grid bias encoder is handed to attend with `positions=call.Grid(shape)`,
whose Term (`terms.grid.GridTableBias`) evaluates it on the (2H - 1)(2W - 1) distinct offsets only (its `prepare`;
fire2d: `GridPairBias`, per pair), then

  explicit              implementation 'einsum': the one tile of every pair gathers the (H, L, L) bias from the
                        table: (B, H, L, L) scores.
  blockwise             implementation 'blockwise': each tile gathers its (H, bq, bk) block from the (H, P) table at
                        its flattened indices, or (fire2d, no table: its normaliser reads |p_i|) evaluates the
                        encoder on its own pairs (what the layer does).
  blockwise (L x L)     'blockwise' given the (H, L, L) matrix, sliced per tile: the layer's path before the
                        per-tile gather, for the memory column only.

  memory   XLA's buffer assignment of the compiled forward and forward+backward at `MEMORY_SHAPE` (compiled
           only, never run). Target: blockwise <= 5% of explicit, both.
  time     fwd+bwd at `SHAPE` (or each of the grids of `python -m benchmarks.run --grid-sides`) on this machine;
           ratios to the explicit path and to `plain`
           (jax.nn.dot_product_attention, no position term, not causal: an image).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import grid as grid_lib
from relpos_jax.encoders import contract
from relpos_jax.nn import blockwise as blockwise_lib
from relpos_jax.nn import call
from relpos_jax.nn import functional, terms
from benchmarks import attention_kinds, measure, report

SHAPE, QUICK_SHAPE = (32, 32), (16, 16)
MEMORY_SHAPE, QUICK_MEMORY_SHAPE = (128, 128), (32, 32)
BLOCK_SIZE = None  # the library default

# (row, grid encoder spec, kind, memory target)
ENCODERS = (
    ('alibi2d', 'alibi2d', 'grid scalar bias', 0.05),
    ('swin_v2_cpb', 'swin_v2_cpb', 'grid scalar bias (MLP on the offsets)', 0.05),
    ('rope_axial', 'rope_axial', 'grid rotary', 0.05),
    ('fire2d', 'fire2d', 'grid scalar bias (query-dependent: MLP per pair)', 0.05),
)


def plain_attention(q, k, v, params):
  del params
  return jax.nn.dot_product_attention(q, k, v)


def core(encoder, shape, implementation, bias_form='table'):
  """(q, k, v, params) -> out: the layer's grid core for one grid encoder over `shape` (see the docstring)."""

  where = call.Grid(tuple(shape))
  n = where.num_tokens

  def fn(q, k, v, params):
    b = q.shape[0]
    parts, part_params, bias = (encoder,), [params], None
    if encoder.kind is contract.Kind.ROTARY:
      coords = jnp.broadcast_to(grid_lib.grid_positions(shape), (b, n, len(shape)))
      q = encoder.rotate_queries(params, q, coords)
      k = encoder.rotate_keys(params, k, coords)
      parts, part_params = (), []
    elif bias_form == 'dense':  # the (H, L, L) expansion, traced, handed to attend as a precomputed bias
      bias = terms.parts.scalar_bias(parts, part_params, n, n, where=where)
      parts, part_params = (), []
    return functional.attend(
        call.AttentionInputs.checked(q, k, v, where if parts else None, bias=bias),
        parts,
        part_params,
        call.AttentionSettings.checked(
            implementation=implementation, block_size=BLOCK_SIZE if implementation == 'blockwise' else None
        ),
    )

  return fn


def encoder_params(encoder):
  """The grid encoder's parameters at the benchmarks' head shape."""
  return encoder.init(
      jax.random.PRNGKey(1),
      num_heads=attention_kinds.NUM_HEADS,
      head_dim=attention_kinds.HEAD_DIM,
      model_dim=attention_kinds.NUM_HEADS * attention_kinds.HEAD_DIM,
  )


def _encoder(encoder_spec):
  encoder = grid_lib.from_spec(encoder_spec)
  return encoder, encoder_params(encoder)


def _shapes(length):
  shape = jax.ShapeDtypeStruct(
      (attention_kinds.BATCH, length, attention_kinds.NUM_HEADS, attention_kinds.HEAD_DIM), jnp.float32
  )
  return shape, shape, shape, shape


CONTENDERS = (('explicit', 'einsum', 'table'), ('blockwise', 'blockwise', 'table'), ('dense', 'blockwise', 'dense'))


def memory_rows(shape, rows):
  """{(row, contender, 'fwd'|'bwd'): MemoryUse} from compiling (never running) over the grid `shape`."""
  q, k, v, cotangent = _shapes(int(np.prod(shape)))
  out = {}
  for row, encoder_spec, *_ in rows:
    encoder, params = _encoder(encoder_spec)
    for name, impl, form in CONTENDERS:
      if name == 'dense' and encoder.kind is contract.Kind.ROTARY:
        continue  # no bias to realise
      fn = core(encoder, shape, impl, form)
      out[(row, name, 'fwd')] = measure.compiled_memory(fn, (q, k, v, params))
      out[(row, name, 'bwd')] = measure.compiled_memory(attention_kinds.with_backward(fn), (q, k, v, params, cotangent))
  return out


def time_rows(shape, rows, repeats: int, warmup: int):
  q, k, v, cotangent = attention_kinds.inputs(int(np.prod(shape)))
  contenders = {('plain', 'bwd'): (attention_kinds.with_backward(plain_attention), (q, k, v, [], cotangent))}
  for row, encoder_spec, *_ in rows:
    encoder, params = _encoder(encoder_spec)
    for name, impl, form in CONTENDERS[:2]:
      fn = core(encoder, shape, impl, form)
      contenders[(row, name, 'bwd')] = (attention_kinds.with_backward(fn), (q, k, v, params, cotangent))
  thunks = {key: measure.compiled_call(fn, args) for key, (fn, args) in contenders.items()}
  return measure.time_interleaved(thunks, repeats=repeats, warmup=warmup)


def run(shape=SHAPE, memory_shape=MEMORY_SHAPE, repeats: int = 5, warmup: int = 1, rows=ENCODERS, time_shapes=None):
  """[memory section at `memory_shape`, time section]: the time rows at each of `time_shapes` (None: `shape`
  alone), each grid timed in its own interleaved rounds with its own `plain` row."""
  side = lambda s: 'x'.join(map(str, s))
  time_shapes = [tuple(shape)] if time_shapes is None else [tuple(s) for s in time_shapes]
  tiles = side(blockwise_lib.block_sizes(BLOCK_SIZE))
  memory_length = int(np.prod(memory_shape))
  memory_section = report.Section(
      title='4m. Blockwise attention on a grid: compiled memory',
      timed=(
          f'Compiled (not run): the grid attention core (q, k, v (1, L, {attention_kinds.NUM_HEADS}, '
          f'{attention_kinds.HEAD_DIM}) float32 and the encoder params -> output, not causal) over a '
          f'{side(memory_shape)} grid (L = {memory_length}), with implementation `einsum` (explicit, the (H, L, L) '
          f'bias) and `blockwise` (tiles {tiles}; each tile gathers its bias block from the (heads, (2H-1)(2W-1)) '
          "table of distinct offsets, or evaluates fire2d's MLP on its own (bq, bk) pairs: its normaliser reads the "
          "query's |p_i|, so it has no table). `blockwise, L x L bias` = blockwise given the (H, L, L) matrix sliced "
          'per tile (the path before the per-tile form). Memory = XLA total (argument + output - alias + temp) in MiB; '
          'fwd+bwd = the VJP, gradients w.r.t. q, k, v and the params. Ratio = blockwise / explicit.'
      ),
      columns=[
          'grid (L)',
          'position term',
          'kind',
          'explicit fwd MiB',
          'blockwise fwd MiB',
          'fwd ratio',
          'explicit fwd+bwd MiB',
          'blockwise fwd+bwd MiB',
          'fwd+bwd ratio',
          'blockwise, L x L bias fwd+bwd MiB',
          'target',
      ],
  )
  memory = memory_rows(memory_shape, rows)
  mib = lambda m: f'{measure.mib(m.total):.0f}' + ('' if m.complete else ' (incomplete)')
  for row, _, kind, target in rows:
    e_f, b_f = memory[(row, 'explicit', 'fwd')], memory[(row, 'blockwise', 'fwd')]
    e_b, b_b = memory[(row, 'explicit', 'bwd')], memory[(row, 'blockwise', 'bwd')]
    dense = memory.get((row, 'dense', 'bwd'))
    worst = max(b_f.total / e_f.total, b_b.total / e_b.total)
    memory_section.add_row(
        f'{side(memory_shape)} ({memory_length})',
        row,
        kind,
        mib(e_f),
        mib(b_f),
        f'{b_f.total / e_f.total:.2%}',
        mib(e_b),
        mib(b_b),
        f'{b_b.total / e_b.total:.2%}',
        '-' if dense is None else mib(dense),
        f'met (<= {target:.0%})' if worst <= target else f'**missed** (> {target:.0%})',
    )
  if memory_shape != MEMORY_SHAPE:
    memory_section.notes.append(f'The target is stated for {side(MEMORY_SHAPE)}; this run used {side(memory_shape)}.')

  lengths = ', '.join(f'{side(s)} (L = {int(np.prod(s))})' for s in time_shapes)
  time_section = report.Section(
      title='4n. Blockwise attention on a grid: fwd+bwd time',
      timed=(
          f'Timed: the same functions over a {lengths} grid, forward+backward. `plain` = '
          'jax.nn.dot_product_attention with no position term (not causal). Ratios are medians of per-round '
          "ratios (section 2's method); each grid is timed in its own rounds."
      ),
      columns=[
          'grid (L)',
          'position term',
          'plain fwd+bwd ms',
          'explicit fwd+bwd ms',
          'blockwise fwd+bwd ms',
          'blockwise / explicit',
          'blockwise / plain',
          'blockwise / plain (CPU time)',
      ],
  )
  spreads = []
  for time_shape in time_shapes:
    length = int(np.prod(time_shape))
    timings = time_rows(time_shape, rows, repeats, warmup)
    spreads += [t.spread for t in timings.values()]
    plain = timings[('plain', 'bwd')]
    for row, *_ in rows:
      e_b, b_b = timings[(row, 'explicit', 'bwd')], timings[(row, 'blockwise', 'bwd')]
      time_section.add_row(
          f'{side(time_shape)} ({length})',
          row,
          report.ms(plain.median),
          report.ms(e_b.median),
          report.ms(b_b.median),
          report.ratio(b_b.ratio_to(e_b)),
          report.ratio(b_b.ratio_to(plain)),
          report.ratio(b_b.cpu_ratio_to(plain)),
      )
  time_section.notes.append(report.noise_note(spreads, repeats))
  return [memory_section, time_section]
