"""The one loop of every study over (entry, seed): choose the entry's learning rate, then obtain each seed's run.

    choice = engine.choose_rate(lr_grid, lambda rate: obtain(grid_seed, rate), selection_loss)
    per_seed = engine.seed_runs(seeds, lambda seed: obtain(seed, choice.value), choice, grid_seed)
    record = engine.obtain_run(path, layout, reuse, compute)     # inside `obtain`: read back, or compute

How a run is obtained is the study's: trained and evaluated, read back from its record, or a trained run evaluated
anew (`relpos_jax.study.runner` trains or reads back, `relpos_jax.study.reevaluate` re-evaluates or reads back, the
grid study `relpos_jax.study.resolution` trains or reads back; `finished_only` is reading back alone). `obtain`
returns the run's record (a `RunRecord.to_json()` object) or None where the run has not finished and may not be
computed now; `obtain_run` is the part every way shares: a saved record is read back (and reused where the study
accepts it), else the run is computed and its record written. What is the study's own stays with it: its data, model and metric, and what a seed's record holds.

The rules shared here, once: on a learning-rate grid every rate trains at the grid's seed and the lowest selection
loss wins (ties: the first rate of the grid; a diverged run's loss is infinite), and where the grid's seed is one
of the reported seeds, the chosen rate's grid run is that seed's run (it is not trained twice).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Callable, Mapping, Sequence

from relpos_jax.study.plan import rate_name
from relpos_jax.study.record import RecordLayout, RunRecord


@dataclasses.dataclass(frozen=True)
class RateChoice:
  """An entry's peak learning rate, how it was chosen ('fixed', 'committed', 'grid', ...), and the grid's runs at
  the grid's seed by rate (`trials`, empty where no grid was trained)."""

  value: float
  how: str
  trials: Mapping[float, dict] = dataclasses.field(default_factory=dict)


def choose_rate(
    grid: Sequence[float], obtain: Callable[[float], dict | None], selection_loss: Callable[[dict], float]
) -> RateChoice | None:
  """The grid's rate whose run (`obtain(rate)`, at the grid's seed) has the lowest `selection_loss` (ties: the
  first rate of the grid); None while one of the grid's runs has not finished (finished_only)."""
  trials = {value: obtain(value) for value in grid}
  if any(run is None for run in trials.values()):
    return None
  best = min(trials, key=lambda value: selection_loss(trials[value]))
  return RateChoice(best, 'grid', trials)


def grid_losses(trials: Mapping[float, dict], selection_loss: Callable[[dict], float]) -> dict[str, float | None]:
  """{rate name: selection loss} of a grid's runs, as results.json records it (None: a diverged run)."""
  losses = {value: selection_loss(run) for value, run in trials.items()}
  return {rate_name(value): (None if math.isinf(loss) else loss) for value, loss in losses.items()}


def seed_runs(
    seeds: Sequence[int], obtain: Callable[[int], dict | None], choice: RateChoice | None = None, grid_seed=None
) -> list[dict | None]:
  """Each seed's run, in the order of `seeds` (None: not finished): the chosen rate's grid run where the seed is
  the grid's (`grid_seed`: the first reported seed, or None where the grid trained at a selection seed outside
  them), else `obtain(seed)`."""
  reused = {} if choice is None or choice.value not in choice.trials else {grid_seed: choice.trials[choice.value]}
  return [reused[seed] if seed in reused else obtain(seed) for seed in seeds]


def obtain_run(
    path: str,
    layout: RecordLayout,
    reuse: Callable[[RunRecord], dict | None],
    compute: Callable[[], RunRecord] | None,
) -> dict | None:
  """One run's record: the one saved at `path` where `reuse` accepts it (`reuse(saved)` returns the record to
  report, None to compute it anew, or raises to refuse the workdir), else `compute()`'s (training, or a
  re-evaluation of a trained run), written to `path` atomically. `compute` None (finished_only: read back only):
  None where nothing reusable is saved."""
  if os.path.exists(path):
    reused = reuse(RunRecord.read(path, layout))
    if reused is not None:
      return reused
  if compute is None:
    return None
  computed = compute()
  os.makedirs(os.path.dirname(path), exist_ok=True)
  computed.write(path)
  return computed.to_json()
