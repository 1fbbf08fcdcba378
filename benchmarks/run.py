"""Runs the benchmarks and writes one markdown page (`python -m benchmarks.run`, options below).

    python -m benchmarks.run --out docs/benchmarks.md          # everything, full sizes (minutes on 2 cores)
    python -m benchmarks.run --quick --only attention_kinds    # smaller sizes, one measurement
    python -m benchmarks.run --length 64 --repeats 1           # tiny: does every script still run?
    python -m benchmarks.run --only attention_kinds --contextual  # plain vs the content-dependent kinds only
    python -m benchmarks.run --only grid --grid-sides 32,64      # the grid's time rows at 32x32 and 64x64

Run it on a quiet machine: the contenders are interleaved so noise hits all alike, but a busy machine still
widens the spread of every median. Each section says exactly what its timed function contains.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Callable

from benchmarks import attention_kinds, bias_construction, blockwise, fire_pieces, grid, irpe_buckets, report, train_step


def _bias_construction(opts) -> report.Section:
  lengths = bias_construction.QUICK_LENGTHS if opts.quick else bias_construction.LENGTHS
  return bias_construction.run(
      lengths=(opts.length,) if opts.length else lengths, repeats=opts.repeats, warmup=opts.warmup
  )


def _attention_kinds(opts) -> report.Section:
  length = attention_kinds.QUICK_LENGTH if opts.quick else attention_kinds.LENGTH
  naive_length = attention_kinds.QUICK_NAIVE_LENGTH if opts.quick else attention_kinds.NAIVE_LENGTH
  if opts.length:
    length = naive_length = opts.length
  if opts.contextual:
    naive_length = 0
  return attention_kinds.run(
      length=length,
      naive_length=naive_length,
      repeats=opts.repeats,
      warmup=opts.warmup,
      rows=attention_kinds.CONTEXTUAL_ROWS if opts.contextual else None,
  )


def _train_step(opts) -> report.Section:
  lengths = train_step.QUICK_LENGTHS if opts.quick else train_step.LENGTHS
  return train_step.run(lengths=(opts.length,) if opts.length else lengths, repeats=opts.repeats, warmup=opts.warmup)


def _blockwise(opts) -> list[report.Section]:
  length = blockwise.QUICK_LENGTH if opts.quick else blockwise.LENGTH
  memory_length = blockwise.QUICK_MEMORY_LENGTH if opts.quick else blockwise.MEMORY_LENGTH
  if opts.length:
    length = memory_length = opts.length
  return blockwise.run(length=length, memory_length=memory_length, repeats=opts.repeats, warmup=opts.warmup)


def _grid(opts) -> list[report.Section]:
  shape = grid.QUICK_SHAPE if opts.quick else grid.SHAPE
  memory_shape = grid.QUICK_MEMORY_SHAPE if opts.quick else grid.MEMORY_SHAPE
  if opts.length:  # a square grid of about that many tokens
    side = max(1, int(round(opts.length**0.5)))
    shape = memory_shape = (side, side)
  time_shapes = [(n, n) for n in opts.grid_sides] or None  # --grid-sides: the time rows' square grids
  return grid.run(
      shape=shape, memory_shape=memory_shape, repeats=opts.repeats, warmup=opts.warmup, time_shapes=time_shapes
  )


def _fire_pieces(opts) -> report.Section:
  length = fire_pieces.QUICK_LENGTH if opts.quick else fire_pieces.LENGTH
  return fire_pieces.run(length=opts.length or length, repeats=opts.repeats, warmup=opts.warmup)


def _irpe_buckets(opts) -> report.Section:
  side = irpe_buckets.QUICK_SIDE if opts.quick else irpe_buckets.SIDE
  if opts.length:  # a square grid of about that many tokens
    side = max(1, int(round(opts.length**0.5)))
  return irpe_buckets.run(side=side, repeats=opts.repeats, warmup=opts.warmup)


BENCHMARKS: dict[str, Callable] = {
    'bias_construction': _bias_construction,
    'attention_kinds': _attention_kinds,
    'train_step': _train_step,
    'blockwise': _blockwise,
    'grid': _grid,
    'fire_pieces': _fire_pieces,
    'irpe_buckets': _irpe_buckets,
}


def parse(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.run', description=__doc__.split('\n')[0])
  parser.add_argument('--only', default='', help=f'comma-separated subset of {",".join(BENCHMARKS)}')
  parser.add_argument('--quick', action='store_true', help='smaller sizes (development; not the table)')
  parser.add_argument(
      '--length', type=int, default=0, help='one sequence length for every measurement (e.g. 64 for a smoke run)'
  )
  parser.add_argument('--repeats', type=int, default=7, help='timed rounds (>= 5 for a table; the median is reported)')
  parser.add_argument('--warmup', type=int, default=1, help='untimed runs of each contender first')
  parser.add_argument(
      '--contextual',
      action='store_true',
      help='attention_kinds: only the content-dependent kinds (cope, fox, path, stick_breaking, dape, ssmax, logn)',
  )
  parser.add_argument(
      '--grid-sides',
      default='',
      help='grid: the time rows at these square grids, comma-separated sides (e.g. 32,64; default: 32, or 16 with '
      '--quick); the memory rows stay at 128x128',
  )
  parser.add_argument('--out', default='', help='write the markdown page here (e.g. docs/benchmarks.md)')
  opts = parser.parse_args(argv)
  only = [name for name in opts.only.split(',') if name]
  unknown = sorted(set(only) - set(BENCHMARKS))
  if unknown:
    parser.error(f'--only: unknown benchmark(s) {unknown}; allowed: {", ".join(BENCHMARKS)}.')
  opts.only = only or list(BENCHMARKS)
  try:
    opts.grid_sides = [int(n) for n in opts.grid_sides.split(',') if n.strip()]
  except ValueError:
    parser.error(f'--grid-sides={opts.grid_sides!r}: comma-separated ints >= 1 (square grid sides), e.g. 32,64.')
  if any(n < 1 for n in opts.grid_sides):
    parser.error(f'--grid-sides={opts.grid_sides}: every side must be >= 1.')
  if opts.repeats < 1 or opts.warmup < 0 or opts.length < 0:
    parser.error(
        f'--repeats={opts.repeats} must be >= 1, --warmup={opts.warmup} >= 0 and '
        f'--length={opts.length} >= 1 when given.'
    )
  return opts


def main(argv: list[str] | None = None) -> str:
  """Runs the chosen benchmarks, prints each section as it completes, and returns the page."""
  argv = sys.argv[1:] if argv is None else argv
  opts = parse(argv)
  sections = []
  for name in opts.only:
    result = BENCHMARKS[name](opts)
    for section in result if isinstance(result, list) else [result]:
      print(section.markdown(), flush=True)
      sections.append(section)
  command = ' '.join(['python -m benchmarks.run'] + [shlex.quote(a) for a in argv])
  page = report.document(sections, command=command)
  if opts.out:
    os.makedirs(os.path.dirname(os.path.abspath(opts.out)), exist_ok=True)
    with open(opts.out, 'w') as f:
      f.write(page)
    print(f'wrote {opts.out}')
  return page


if __name__ == '__main__':
  main()
