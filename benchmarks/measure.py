"""Timing and memory of compiled JAX functions, measured the same way for every contender.

Timing (`time_interleaved`): every contender is compiled ahead of time (`compiled_call`: jax.jit(fn).lower(
*args).compile()), so neither tracing nor compilation is timed, run `warmup` times, then timed in `repeats`
rounds. Each round runs every contender once, in a fresh random order (seeded, so a run is repeatable):
a burst of machine noise hits all contenders alike, and no contender always runs right after the same
neighbour (a plain rotation A B C, B C A, ... keeps the neighbours: found when the contender that always
followed the biggest program of the section, freeing gigabytes, came out 1.8x slower than it is). One sample is the wall time from the call to `jax.block_until_ready` of its outputs. We report
medians of the samples, and ratios as medians of the per-round ratios (`Timing.ratio_to`).

Memory (`compiled_memory`): XLA's own buffer assignment of the compiled program,
`compiled.memory_analysis()`, never a guess. We report

    total = argument + output - alias + temp      (bytes the executable holds at its peak)

where temp is the size of XLA's scratch arena, already the peak of the temporaries live at once (the heap
simulation reuses buffers). `peak_memory_in_bytes` is not used: on the CPU backend it is not the peak of
this program (it can be smaller than temp).

One CPU caveat, found while writing these benchmarks: the default XLA:CPU pipeline hands whole
subgraphs (dots and the elementwise ops around them) to YNNPACK as custom fusions, and the intermediates
inside such a fusion are invisible to the buffer assignment (a jitted exp(x @ x) @ x reports temp = 0). So
on CPU the memory is taken from a second compilation with those fusions switched off (`xla_cpu_experimental_ynn_fusion_type=''`):
the same program, every intermediate an XLA buffer. Timing always uses the default pipeline.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

import jax

# Per backend: compiler options under which XLA's buffer assignment sees every intermediate buffer.
_MEMORY_COMPILER_OPTIONS = {'cpu': {'xla_cpu_experimental_ynn_fusion_type': ''}}
_OPAQUE_FUSION_MARKERS = ('__ynn_fusion', '__xnn_fusion', '__onednn_fusion')


@dataclasses.dataclass(frozen=True)
class Timing:
  """Wall-clock samples of one contender, in seconds, and the process CPU time of each sample.

  CPU time (every thread of this process, `time.process_time`) does not count the time other processes
  held the cores, so on a shared machine its ratios are a steadier cross-check of the wall-clock ones.
  """

  samples: tuple[float, ...]
  cpu_samples: tuple[float, ...] = ()

  @property
  def median(self) -> float:
    return statistics.median(self.samples)

  @property
  def spread(self) -> float:
    """(max - min) / median: how noisy the samples were (0.05 = 5 %)."""
    return (max(self.samples) - min(self.samples)) / self.median if self.median > 0 else 0.0

  def ratio_to(self, base: 'Timing') -> float:
    """Median over rounds of self / base, each round's pair having run back to back (`time_interleaved`).

    Load that comes and goes between rounds cancels in each pair, so this is steadier than a ratio of
    medians on a shared machine; on a quiet one the two agree.
    """
    if len(self.samples) != len(base.samples):
      raise ValueError(
          f'ratio_to: {len(self.samples)} samples against {len(base.samples)}; time both in '
          'one time_interleaved call.'
      )
    return statistics.median(a / b for a, b in zip(self.samples, base.samples))

  def cpu_ratio_to(self, base: 'Timing') -> float:
    """As `ratio_to`, on the CPU-time samples."""
    return Timing(self.cpu_samples).ratio_to(Timing(base.cpu_samples))


@dataclasses.dataclass(frozen=True)
class MemoryUse:
  """XLA's buffer assignment of one compiled program, in bytes."""

  argument: int
  output: int
  alias: int
  temp: int
  # False when the program still contains opaque library fusions whose scratch XLA cannot see.
  complete: bool = True

  @property
  def total(self) -> int:
    return self.argument + self.output - self.alias + self.temp


def compile_fn(fn: Callable, args: Sequence[Any], compiler_options: Mapping[str, Any] | None = None):
  """`fn` compiled for `args` ahead of time (later calls neither trace nor compile).

  A function that is already jitted (it has `.lower`) keeps its own shardings and donated arguments.
  """
  jitted = fn if hasattr(fn, 'lower') else jax.jit(fn)
  return jitted.lower(*args).compile(compiler_options=dict(compiler_options or {}) or None)


def compiled_call(fn: Callable, args: Sequence[Any]) -> Callable[[], Any]:
  """A thunk running `fn(*args)` from its ahead-of-time compiled executable (compiled now, not when timed)."""
  executable, args = compile_fn(fn, args), tuple(args)
  return lambda: executable(*args)


def compiled_memory(fn: Callable, args: Sequence[Any]) -> MemoryUse:
  """XLA's memory analysis of `fn` compiled for `args` (see the module docstring for which compilation)."""
  options = _MEMORY_COMPILER_OPTIONS.get(jax.default_backend(), {})
  try:
    compiled = compile_fn(fn, args, options)
  except RuntimeError as e:  # An XLA without this option: the default pipeline, flagged `complete=False`.
    if 'No such compile option' not in str(e):
      raise
    compiled = compile_fn(fn, args)
  stats = compiled.memory_analysis()
  if stats is None:
    raise RuntimeError(f'the {jax.default_backend()} backend gives no memory analysis for compiled programs.')
  text = compiled.as_text() or ''
  return MemoryUse(
      argument=int(stats.argument_size_in_bytes),
      output=int(stats.output_size_in_bytes),
      alias=int(stats.alias_size_in_bytes),
      temp=int(stats.temp_size_in_bytes),
      complete=not any(marker in text for marker in _OPAQUE_FUSION_MARKERS),
  )


def time_interleaved(
    contenders: Mapping[str, Callable[[], Any]], *, repeats: int = 5, warmup: int = 1
) -> dict[str, Timing]:
  """Wall times of each `name: thunk` (see `compiled_call`), warmed up, then timed in shuffled rounds.

  A sample is the time from calling the thunk to `jax.block_until_ready` of what it returns. Thunks that
  carry state (a train step feeding its donated state back) do so themselves.
  """
  if repeats < 1 or warmup < 0:
    raise ValueError(f'time_interleaved: repeats={repeats!r} must be >= 1 and warmup={warmup!r} >= 0.')
  names = list(contenders)
  for _ in range(warmup):
    for name in names:
      jax.block_until_ready(contenders[name]())
  samples = {name: [] for name in names}
  cpu_samples = {name: [] for name in names}
  order_rng = random.Random(0)
  for _ in range(repeats):
    order = list(names)
    order_rng.shuffle(order)
    for name in order:
      start, cpu_start = time.perf_counter(), time.process_time()
      jax.block_until_ready(contenders[name]())
      samples[name].append(time.perf_counter() - start)
      cpu_samples[name].append(time.process_time() - cpu_start)
  return {name: Timing(tuple(samples[name]), tuple(cpu_samples[name])) for name in names}


def mib(num_bytes: float) -> float:
  return num_bytes / 2**20


def time_contenders(
    contenders: Mapping[str, tuple[Callable, Sequence[Any]]], *, repeats: int = 5, warmup: int = 1
) -> dict[str, Timing]:
  """`time_interleaved` of `name: (fn, args)` contenders, each compiled ahead of time (`compiled_call`)."""
  thunks = {name: compiled_call(fn, args) for name, (fn, args) in contenders.items()}
  return time_interleaved(thunks, repeats=repeats, warmup=warmup)
