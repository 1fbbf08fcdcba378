"""The resolution-extrapolation study: train each grid encoder at one grid side, evaluate it at 1x-4x that side.

    results = run_resolution_study(config, workdir)            # config: configs/studies/resolution*.py
    results = run_resolution_study(config, workdir, model_fn=my_factory)   # any model with the ViT's interface

The 2-D form of the length-generalization study (relpos_jax.study.runner), with its protocol standards (issue
33): for every task of `config.tasks`, every encoder of `config.encoders` and every seed of `config.seeds`, a
model is trained at `config.train_side` tokens per side and evaluated at every side of `config.eval_sides` on
the TEST split, the same test examples for every encoder and seed (drawn from the stream of
`config.data_seed`), so differences between encoders per seed are paired (`relpos_jax.study.stats`).

Sides are in tokens per side: the task's grid is side x task.patch_size pixels (1 for the synthetic tasks of
relpos_jax.data.grid_tasks, 4 for Fashion-MNIST, whose 28 x 28 image is 7 x 7 patches).

Learning rate per (task, encoder), at equal budget: with `config.lr_grid` every rate of the grid trains at the
first seed, the lowest validation loss at the training side wins ('grid'; ties: the first rate of the grid)
and the other seeds train with it; `config.lr_grid=None` trains every run at `config.learning_rate` ('fixed').
Validation is its own seed stream (`data_seed`), never the test examples.
Training uses the LM studies' optimizer and update (`optimizer_spec`, `step.make_model_train_step`): this module
owns only its data, model and loss. A non-finite update is skipped and stops the run, recorded as diverged. (The
committed round-1 runs, docs/resolution_study, were trained by this module's own AdamW before issue 51 made it the
shared one: the peak rate injected into a unit schedule, decay on every parameter, a stop at the first non-finite
loss. They re-report unchanged. Retrained fresh, a run differs from its record as it already did on another machine
with the old optimizer: 8 committed direction and life runs retrained on 2026-12-06 moved by up to 0.051 test
accuracy at some side with the old optimizer, and by up to 0.045 more with the shared one: float rounding,
amplified over training, as large as either change.) Issue 49's protocol
(configs/studies/resolution_round2.py): with `config.selection_seed` the grid trains at that seed instead, outside
the reported seeds, and its runs score validation only (`selection_only` in their record); `config.edge_rates`
trains rates past the grid's top there for a row that chose the top (`edge_check_row`: the page says whether the
edge holds); `config.extra_pools` adds rows '<label>@<pool>' (a class token beside mean pooling) on the
classification tasks; `config.family_tasks` makes the Holm family the comparisons on those tasks less degenerate
pairs and duplicates of shared runs (`holm_family`, stated on the page); the page then prints each accuracy's
binomial standard error beside its seed spread.

Reported per task and encoder, at each side: test accuracy (per cell for per-cell tasks, which also report
the per-board exact match), the test loss, and the mean attention entropy per layer (the model's
`return_entropy=True`): the published explanation of rotary's resolution failure is attention that spreads
(entropy growing) or collapses at unseen grids; the uniform attention's entropy log N (N tokens) is given
beside it. `config.comparisons` ('A vs B' at every side, or 'A vs B at <side>'): paired differences of the
accuracy over seeds with 95% t intervals. Cells are mean ± sample std over seeds (ddof 1).

Resumable: each (task, encoder, lr, seed) run writes `<workdir>/runs/<task>/<label>/lr<lr>/seed<s>/result.json`
atomically when it has finished (train and every evaluation); a rerun in the same workdir reuses finished
runs (an unfinished one trains again from the start: runs take seconds to minutes here), and refuses, naming
the directory, one whose recorded run config differs from this config's, or whose recorded data fingerprint
(Fashion-MNIST: a digest of the images and labels it trained on, `GridTask.data_fingerprint`) differs from that
of `config.data_dir`'s files (runs recorded without one, as the committed study's, are not checked). Run
directories name the rate exactly (`plan.rate_name`). The workdir is locked for one writer
(relpos_jax.train.workdir_lock). Outputs: results.json and results.md, rewritten after each (task, encoder), and
at the end results.png (accuracy against grid side, one panel per task) and results_entropy.png (entropy per
layer against grid side). `finished_only=True` trains nothing, writes nothing and takes no lock: it reports the
runs finished so far (a (task, encoder) row appears once its learning-rate grid has finished, with the seeds
that have; the study's own process may be writing the same workdir meanwhile). It needs no data set: where
`config.data_dir` does not exist, a Fashion-MNIST task is re-reported as its runs recorded it, its majority
baseline (which needs the test labels) left out and the task marked 'data_absent'.

Checked before anything trains (each error names its key): the config's types and bounds (seeds < 2^32, sides
<= MAX_SIDE, batch sizes, test examples <= MAX_EVAL_EXAMPLES), every task at every side, and every (task, encoder)
model, built abstractly (`nnx.eval_shape`) and traced at the training side and, as evaluation calls it, at the
largest evaluation side, with a memory estimate (`check_memory`, a lower bound) refused when it cannot fit.

The model: `model_fn(*, encoder, num_classes, patch_size, in_channels, pool, rngs, **config.model)` returns a
flax NNX module called as `model(images float[B, H, W, C], train=..., rng=..., return_entropy=...)` -> logits
[B, num_classes] (pool 'mean' / 'cls') or [B, H/p, W/p, num_classes] (pool 'none': per-cell tasks); in training
`rng` is a key per step (what an encoder that augments its coordinates in training, `augment_coords`, draws from;
the others ignore it, so their runs are what they were without it). The
default, `vit_model`, builds `relpos_jax.nn.vit.ViT`, imported when it is first called (not at this module's
import), so this module and its tests run with any stand-in model.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import json
import math
import os
import time
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging
from flax import nnx

from relpos_jax import files
from relpos_jax import grid as grid_lib
from relpos_jax.data import grid_tasks, idx
from relpos_jax.encoders import contract as encoder_contract
from relpos_jax.nn import vit
from relpos_jax.study import engine, grid_claims, record, report, stats
from relpos_jax.study.plan import Entry, check_selection_seed_key, parse_entries, rate_name
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files, schema, streams
from relpos_jax.train import state as state_lib
from relpos_jax.train import step as step_lib
from relpos_jax.train.optim import OptimizerSpec
from relpos_jax.train import workdir_lock

ConfigError = config_lib.ConfigError
key = schema.key
RESULT_FILE = record.RESULT_FILE  # a run's record (`record.RunRecord`, GRID_LAYOUT)
DATA_FINGERPRINT = 'data_fingerprint'  # a run's record: the data it trained on (`GridTask.data_fingerprint`)
FASHION_MNIST_TASKS = {
    'fashion_mnist_canvas': 'canvas',
    'fashion_mnist_upsample': 'upsample',
    'fashion_mnist_tiles': 'tiles',
}
TASK_NAMES = grid_tasks.grid_task_names() + tuple(FASHION_MNIST_TASKS)
POOLS = ('mean', 'cls')
# config.lr_grid values that ask for the fixed rate (config.learning_rate for every run): None in a file, and
# from the command line, where a tuple key cannot become None, '()' or 'None' (which ml_collections reads as
# the tuple (None,)).
FIXED_RATE = (None, (), [], (None,), [None])
# Upper bounds checked before anything is built (the run's own bounds, relpos_jax.train.config, for the model
# and batch sizes). A side of 1,024 tokens is a million tokens per image, far past any resolution study (ViT's
# 14 to 64); what fits under it but not in memory is refused by `check_memory` with its estimate. The test
# examples are labelled once per side before training (`majority_baseline`): 2^20 of them take seconds, the
# published protocols score 10,000 (Fashion-MNIST's test file).
MAX_SIDE = 1024
MAX_EVAL_EXAMPLES = 2**20


@dataclasses.dataclass(frozen=True)
class Model:
  """`config.model`: the model's size (passed to model_fn); pool for the classification tasks (per-cell: 'none')."""

  model_dim: int = key(64, ge=1, le=config_lib.MAX_MODEL_DIM)
  num_heads: int = key(4, ge=1, le=config_lib.MAX_MODEL_DIM)
  num_layers: int = key(2, ge=1, le=config_lib.MAX_LAYERS)
  mlp_ratio: int = key(4, ge=1, le=config_lib.MAX_MLP_RATIO)
  pool: str = key('mean', choices=POOLS)


@dataclasses.dataclass(frozen=True)
class Settings:
  """The top-level keys of a resolution-study config (configs/studies/resolution.py documents each)."""

  encoders: tuple[str, ...] = key()
  tasks: tuple[str, ...] = key()
  model: Model = key()
  title: str = key('Resolution extrapolation')
  description: str = key('')
  task_kwargs: dict | None = key(None)  # {task name: {parameter: value}}
  data_dir: str = key(idx.DEFAULT_DIRECTORY)
  train_side: int = key(7, ge=2, le=MAX_SIDE)
  eval_sides: tuple[int, ...] = key((7, 14, 21, 28), ge=2, le=MAX_SIDE)
  steps: int = key(300, ge=1)
  batch_size: int = key(32, ge=1, le=config_lib.MAX_BATCH)
  learning_rate: float = key(1e-3, gt=0)
  lr_grid: tuple[float, ...] | None = key(None, gt=0)
  warmup_steps: int = key(0, ge=0)
  weight_decay: float = key(0.0, ge=0)
  grad_clip_norm: float | None = key(1.0, gt=0)
  # Below 2^32, as every seed of a run (config_lib.SEED_LIMIT): jax.random.key(2**32) is key(0).
  seeds: tuple[int, ...] = key((0,), ge=0, lt=config_lib.SEED_LIMIT)
  data_seed: int = key(0, ge=0, lt=config_lib.SEED_LIMIT)
  eval_examples: int = key(256, ge=1, le=MAX_EVAL_EXAMPLES)
  eval_batch_size: int = key(64, ge=1, le=config_lib.MAX_BATCH)
  entropy_examples: int = key(32, ge=1, le=MAX_EVAL_EXAMPLES)
  comparisons: tuple[str, ...] = key(())
  # The protocol of issue 49 (configs/studies/resolution_round2.py); each None / () keeps the committed study's.
  # The rate grid trains at selection_seed, outside the reported seeds, scored on validation only; edge_rates
  # are rates past the grid's top, trained there where a row chose the top; extra_pools {pool: labels} adds rows
  # '<label>@<pool>' on the classification tasks; family_tasks: the tasks whose comparisons form the Holm family.
  selection_seed: int | None = key(None, ge=0, lt=config_lib.SEED_LIMIT)
  edge_rates: tuple[float, ...] = key((), gt=0)
  extra_pools: dict | None = key(None)
  family_tasks: tuple[str, ...] | None = key(None)


def parse_config(config) -> Settings:
  """The config's keys, types and bounds checked (each error names its key); the tasks made."""
  node = config_files.as_dict(config)
  model_node = node.get('model')
  if model_node is None:
    raise ConfigError('missing key config.model (model_dim, num_heads, num_layers, mlp_ratio, pool).')
  model = schema.parse_section(Model, 'model', model_node)
  if node.get('lr_grid') in FIXED_RATE:
    node = {**node, 'lr_grid': None}
  settings = schema.parse_section(Settings, '', node, model=model)
  parse_encoders(settings)
  if not settings.tasks or len(set(settings.tasks)) != len(settings.tasks):
    raise ConfigError(f'config.tasks={settings.tasks!r} is invalid: allowed: a non-empty tuple of distinct task names.')
  for name in settings.tasks:
    if name not in TASK_NAMES:
      raise ConfigError(f'config.tasks entry {name!r} is unknown: allowed: {TASK_NAMES}.')
  for name in settings.task_kwargs or {}:
    if name not in settings.tasks:
      raise ConfigError(f'config.task_kwargs.{name} names no task of config.tasks {settings.tasks}.')
  for k in ('seeds', 'eval_sides'):
    values = getattr(settings, k)
    if not values or len(set(values)) != len(values):
      raise ConfigError(f'config.{k}={values!r} is invalid: allowed: a non-empty tuple of distinct ints.')
  if settings.lr_grid is not None and len(set(settings.lr_grid)) != len(settings.lr_grid):
    raise ConfigError(
        f'config.lr_grid={settings.lr_grid!r} is invalid: allowed: a tuple of distinct rates > 0, or None, () or '
        "(on the command line) --config.lr_grid=None or '()' for the fixed rate."
    )
  if settings.warmup_steps >= settings.steps:
    raise ConfigError(
        f'config.warmup_steps={settings.warmup_steps} is invalid with config.steps={settings.steps}: allowed: '
        'fewer warmup steps than steps.'
    )
  check_protocol(settings)
  parse_comparisons(settings)
  return settings


def check_protocol(settings: Settings) -> None:
  """The keys of the selection-seed protocol (issue 49), each refused by name with what is allowed."""
  seeds = tuple(settings.seeds)
  check_selection_seed_key(
      'config.', settings.selection_seed, seeds, None if settings.lr_grid is not None else 'config.lr_grid'
  )
  if settings.edge_rates:
    top = max(settings.lr_grid) if settings.lr_grid else None
    if settings.selection_seed is None or top is None:
      raise ConfigError(
          f'config.edge_rates={settings.edge_rates!r} is invalid without config.selection_seed and config.lr_grid: '
          'the edge runs train at the selection seed, past the grid; allowed: () or a selection seed and a grid.'
      )
    if len(set(settings.edge_rates)) != len(settings.edge_rates) or min(settings.edge_rates) <= top:
      raise ConfigError(
          f'config.edge_rates={settings.edge_rates!r} is invalid: allowed: distinct rates above the top of '
          f'config.lr_grid ({top:g}).'
      )
  labels = [e.label for e in parse_encoders(settings)]
  for pool, chosen in (settings.extra_pools or {}).items():
    if pool not in POOLS or pool == settings.model.pool:
      raise ConfigError(
          f'config.extra_pools.{pool} is invalid: allowed: a pool of {POOLS} other than config.model.pool='
          f'{settings.model.pool!r}.'
      )
    if isinstance(chosen, str) or not chosen or len(set(chosen)) != len(chosen) or set(chosen) - set(labels):
      raise ConfigError(
          f'config.extra_pools.{pool}={chosen!r} is invalid: allowed: a non-empty tuple of distinct labels of '
          f'config.encoders {labels}.'
      )
  if settings.family_tasks is not None:
    family = tuple(settings.family_tasks)
    if not family or len(set(family)) != len(family) or set(family) - set(settings.tasks):
      raise ConfigError(
          f'config.family_tasks={family!r} is invalid: allowed: None (every comparison of the page) or a non-empty '
          f'tuple of distinct tasks of config.tasks {tuple(settings.tasks)}.'
      )
  for entry in parse_encoders(settings):
    check_draw_range(settings, entry)


def check_draw_range(settings: Settings, entry: Entry) -> None:
  """An encoder that draws its training coordinates from a larger grid (grid randomize_coords) covers the training
  side and, as Ruoss et al.'s L covers the test lengths, every evaluation side; refused naming the entry."""
  try:
    encoder = grid_lib.from_spec(entry.spec)
  except ValueError:
    return  # not a grid spec alone (a 1-D or a stand-in's): the model's own check reads it
  need = max((settings.train_side,) + tuple(settings.eval_sides))
  for node in encoder_contract.walk(encoder):
    side = getattr(node, 'max_side', None)
    if getattr(node, 'check_train_grid', None) is not None and side is not None and side < need:
      raise ConfigError(
          f'config.encoders entry {entry.label!r} ({entry.spec}) draws training coordinates from [0, max_side={side}) '
          f'per axis: a grid side it must cover (config.train_side={settings.train_side}, and config.eval_sides '
          f"{tuple(settings.eval_sides)}, as Ruoss et al.'s range covers the test lengths) is larger; allowed: "
          f'max_side >= {need}.'
      )


def pool_rows(settings: Settings, task, entries: Sequence[Entry]) -> list[tuple[Entry, str | None]]:
  """The rows of a task: every entry at config.model.pool (None: the model's), then, on a classification task,
  the entries of config.extra_pools at their pool, labelled '<label>@<pool>' (a per-cell task pools nothing)."""
  rows = [(entry, None) for entry in entries]
  if task is not None and getattr(task, 'per_cell', False):
    return rows
  for pool, labels in (settings.extra_pools or {}).items():
    rows += [(dataclasses.replace(e, label=f'{e.label}@{pool}'), pool) for e in entries if e.label in labels]
  return rows


def parse_encoders(settings: Settings) -> list[Entry]:
  """`config.encoders` as entries: 'label: spec' or a bare spec, unique labels (the LM study's rule, its messages
  naming this study's key). 'X -> Y' (train X, evaluate Y: the LM study's re-evaluation of X's runs) is refused:
  a run here is trained and evaluated in one go, without the checkpoint another encoder would be evaluated from,
  so it would train and report X under Y's label."""
  try:
    parsed = parse_entries(settings.encoders)
  except ConfigError as e:
    raise ConfigError(str(e).replace('config.study.encoders', 'config.encoders')) from None
  for entry in parsed:
    if entry.eval_spec is not None:
      raise ConfigError(
          f'config.encoders entry {entry.label!r} ({entry.spec} -> {entry.eval_spec}) is invalid: the resolution '
          "study trains and evaluates each encoder in one run, it cannot evaluate another; allowed: 'label: spec' "
          'or a bare spec.'
      )
  return parsed


def parse_comparisons(settings: Settings) -> list[dict]:
  """'A vs B' (every evaluation side) or 'A vs B at <side>' as [{'a', 'b', 'sides'}]."""
  labels = [e.label for e, _ in pool_rows(settings, None, parse_encoders(settings))]
  allowed = (
      f"allowed: 'A vs B' or 'A vs B at S', A and B labels of config.encoders {labels}, S one of "
      f'config.eval_sides {settings.eval_sides}'
  )
  parsed = []
  for item in settings.comparisons:
    words = str(item).split()
    ok = len(words) in (3, 5) and words[1] == 'vs' and (len(words) == 3 or words[3] == 'at')
    if not ok or words[0] not in labels or words[2] not in labels or words[0] == words[2]:
      raise ConfigError(f'config.comparisons entry {item!r} is invalid: {allowed}.')
    sides = list(settings.eval_sides)
    if len(words) == 5:
      if not words[4].isdigit() or int(words[4]) not in settings.eval_sides:
        raise ConfigError(f'config.comparisons entry {item!r} has side {words[4]!r}: {allowed}.')
      sides = [int(words[4])]
    parsed.append({'a': words[0], 'b': words[2], 'sides': sides})
  return parsed


def make_task(
    settings: Settings, name: str, fashion_mnist_cache: dict | None = None, records: str | None = None
) -> grid_tasks.GridTask:
  """The task `name` with its `config.task_kwargs`; Fashion-MNIST loaded from `config.data_dir` once.

  records: a workdir to re-report (finished_only): where `config.data_dir` does not exist, a Fashion-MNIST task
  is the one its finished runs recorded (`RecordedFashionMnist`), so committed runs are re-reported on a machine
  without the data set; the majority baseline, which needs the test labels, is then not computed."""
  kwargs = dict((settings.task_kwargs or {}).get(name) or {})
  try:
    if name in FASHION_MNIST_TASKS:
      cache = {} if fashion_mnist_cache is None else fashion_mnist_cache
      num_validation = kwargs.pop('num_validation', 5000)
      if records is not None and not os.path.isdir(settings.data_dir):
        recorded = RecordedFashionMnist.from_records(records, name, settings.data_dir, num_validation, **kwargs)
        if recorded is not None:
          return recorded
      if (settings.data_dir, num_validation) not in cache:
        cache[(settings.data_dir, num_validation)] = idx.load_fashion_mnist(settings.data_dir, num_validation)
      return idx.FashionMnist(cache[(settings.data_dir, num_validation)], protocol=FASHION_MNIST_TASKS[name], **kwargs)
    return grid_tasks.make_grid_task(name, **kwargs)
  except idx.IdxError as e:
    raise ConfigError(f'config.data_dir={settings.data_dir!r} (task {name!r}): {e}') from None
  except (TypeError, ValueError) as e:
    raise ConfigError(f'config.task_kwargs.{name}={kwargs!r} is invalid: {e}') from None


@dataclasses.dataclass(frozen=True, eq=False)
class RecordedFashionMnist(idx.FashionMnist):
  """A Fashion-MNIST task whose files are absent, as its finished runs recorded it: enough to re-report them.

  Its description is the one the runs recorded (each run's record is still compared with it in full, so the
  runs must agree), checked against what the config asks (name, protocol, patch size, validation size); the
  train and test sizes cannot be checked without the files. It has no examples: `batch` refuses, naming the
  directory, and nothing trains (only finished_only builds it)."""

  recorded: dict = dataclasses.field(default=None, kw_only=True)
  data_dir: str = dataclasses.field(default='', kw_only=True)

  @classmethod
  def from_records(cls, workdir: str, name: str, data_dir: str, num_validation, **kwargs):
    """The task as the first finished run of `name` under `workdir` recorded it (None: no run has finished)."""
    paths = sorted(glob.glob(os.path.join(glob.escape(workdir), 'runs', glob.escape(name), '*', '*', '*', RESULT_FILE)))
    if not paths:
      return None
    saved = read_result(paths[0]).to_json()
    task = cls(None, protocol=FASHION_MNIST_TASKS[name], data_dir=data_dir, **kwargs)
    recorded = (saved.get('run_config') or {}).get('task')
    expected = {
        'name': name,
        'protocol': task.protocol,
        'patch_size': task.patch_size,
        'num_classes': task.num_classes,
        'per_cell': False,
    }
    if (
        not isinstance(recorded, dict)
        or {k: recorded.get(k) for k in expected} != expected
        or ((recorded.get('split_sizes') or {}).get('validation') != num_validation)
    ):
      raise ConfigError(
          f"{paths[0]} records task {recorded!r}, not the config's {name!r} ({expected}, {num_validation} "
          'validation images): it cannot be re-reported without the Fashion-MNIST files; use the workdir of '
          'this config.'
      )
    return dataclasses.replace(task, recorded=recorded)

  def describe(self) -> dict:
    return dict(self.recorded)

  def data_fingerprint(self) -> None:
    """None: without the files there is nothing to digest (each run's recorded fingerprint goes unchecked)."""
    return None

  def batch(self, side: int, batch_size: int, seed: int, split: str, step: int) -> dict[str, np.ndarray]:
    raise ConfigError(
        f'config.data_dir={self.data_dir!r} does not exist: task {self.recorded["name"]!r} is known only from its '
        f'recorded runs and has no examples. Install the files with `{idx.INSTALL_COMMAND}`.'
    )


def check_sides(settings: Settings, task: grid_tasks.GridTask, name: str) -> None:
  """Every side (in tokens) is a grid the task is defined at (in pixels: side x patch_size)."""
  for k, sides in (('train_side', [settings.train_side]), ('eval_sides', settings.eval_sides)):
    for side in sides:
      try:
        task.check_side(side * task.patch_size, key='side')
      except ValueError as e:
        raise ConfigError(
            f'config.{k}={getattr(settings, k)!r} is invalid for task {name!r} (side {side} tokens = '
            f'{side * task.patch_size} pixels at patch size {task.patch_size}): {e}'
        ) from None


# ------------------------------------------------------------------------------------------------ the model
def vit_model(*, encoder: str, num_classes: int, patch_size: int, in_channels: int, pool: str, rngs, **model):
  """The default model_fn: relpos_jax.nn.vit.ViT (any model of the same interface can be passed as model_fn)."""
  return vit.ViT(
      encoder=encoder,
      num_classes=num_classes,
      patch_size=patch_size,
      in_channels=in_channels,
      pool=pool,
      rngs=rngs,
      **model,
  )


def _pool(settings: Settings, task, pool: str | None) -> str:
  return 'none' if task.per_cell else (pool or settings.model.pool)


def _build(model_fn, settings: Settings, task: grid_tasks.GridTask, spec: str, seed: int, pool: str | None = None):
  return model_fn(
      encoder=spec,
      num_classes=task.num_classes,
      patch_size=task.patch_size,
      in_channels=task.in_channels,
      pool=_pool(settings, task, pool),
      rngs=nnx.Rngs(seed),
      model_dim=settings.model.model_dim,
      num_heads=settings.model.num_heads,
      num_layers=settings.model.num_layers,
      mlp_ratio=settings.model.mlp_ratio,
  )


def check_models(settings: Settings, tasks: dict, entries: Sequence[Entry], model_fn) -> None:
  """Builds every (task, encoder) model abstractly (`nnx.eval_shape`: shapes only, no parameter allocated),
  checks its memory (`check_memory`) and traces it on one example at the training side, as training calls it,
  and at the largest evaluation side, as evaluation calls it (`return_entropy=True`): an unknown encoder spec, a
  model the size keys cannot make, or one that cannot be evaluated at a side (a learned2d table smaller than
  it, an encoder without attention entropy) fails in seconds, before any training, naming the key."""
  for name, task in tasks.items():
    for entry, pool in pool_rows(settings, task, entries):
      where = (
          f'config.encoders entry {entry.label!r} (encoder {entry.spec!r}, task {name!r}, config.model '
          f'{dataclasses.asdict(settings.model)})'
      )
      try:
        abstract = nnx.eval_shape(functools.partial(_build, model_fn, settings, task, entry.spec, 0, pool))
      except ConfigError:
        raise
      except Exception as e:  # pylint: disable=broad-except
        raise ConfigError(f'{where}: the model cannot be built: {type(e).__name__}: {e}') from None
      graphdef, state = nnx.split(abstract)
      check_memory(settings, task, name, sum(x.size for x in jax.tree.leaves(nnx.state(abstract, nnx.Param))))
      largest = max(settings.eval_sides)
      for k, side, entropy in (('train_side', settings.train_side, False), ('eval_sides', largest, True)):
        pixels = side * task.patch_size
        images = jax.ShapeDtypeStruct((1, pixels, pixels, task.in_channels), jnp.float32)

        def call(state, x, entropy=entropy):
          out = nnx.merge(graphdef, state)(x, train=False, return_entropy=entropy)
          return out[0] if entropy else out

        try:
          logits = jax.eval_shape(call, state, images)  # traced only
        except ConfigError:
          raise
        except Exception as e:  # pylint: disable=broad-except
          raise ConfigError(
              f'{where}: the model cannot be {"evaluated" if entropy else "trained"} at config.{k} side {side} '
              f'({pixels} pixels): {type(e).__name__}: {e}'
          ) from None
        want = (1, side, side, task.num_classes) if task.per_cell else (1, task.num_classes)
        if tuple(logits.shape) != want:
          raise ConfigError(
              f'config.encoders entry {entry.label!r} on task {name!r}: the model returns logits of shape '
              f'{tuple(logits.shape)} at side {side}, the task needs {want}.'
          )


def memory_estimate(settings: Settings, task: grid_tasks.GridTask, num_params: int) -> dict[str, tuple[int, str]]:
  """A lower bound of what one run holds at once, per part: {what: (bytes, the keys that set it)}, as the LM
  runs' `relpos_jax.train.config.memory_estimate` counts: the parameters with their gradient and Adam's two
  moments (16 bytes per float32 parameter); a training batch's MLP activations and residual stream of every
  layer (kept for the backward pass), float32, and one layer's (B, heads, N, N) attention scores at N =
  train_side^2 tokens; an evaluation batch's attention weights, which the entropy rebuilds explicitly
  (`return_entropy`), at the largest evaluation side. Left out: everything smaller or harder to bound."""
  m = settings.model
  hidden = m.mlp_ratio * m.model_dim
  train_tokens, eval_tokens = settings.train_side**2, max(settings.eval_sides) ** 2
  model_keys = f'config.model {dataclasses.asdict(m)}'
  return {
      'parameters and optimizer state': (16 * num_params, model_keys),
      'activations of one training batch': (
          4
          * settings.batch_size
          * train_tokens
          * ((hidden + 2 * m.model_dim) * m.num_layers + m.num_heads * train_tokens),
          f'config.batch_size={settings.batch_size}, config.train_side={settings.train_side}, {model_keys}',
      ),
      'attention weights of one evaluation batch': (
          4 * settings.eval_batch_size * m.num_heads * eval_tokens * eval_tokens,
          f'config.eval_batch_size={settings.eval_batch_size}, config.eval_sides={settings.eval_sides} (the '
          f'largest, {max(settings.eval_sides)}: {eval_tokens} tokens), config.model.num_heads={m.num_heads}',
      ),
  }


def check_memory(settings: Settings, task: grid_tasks.GridTask, name: str, num_params: int) -> None:
  """Refuses a run whose `memory_estimate` (a lower bound) exceeds the device's memory, with the estimate,
  before anything is allocated (rather than an out-of-memory error after training)."""
  available = config_lib.available_memory(1)
  if available is None:
    return
  found = memory_estimate(settings, task, num_params)
  what, (need, keys) = max(found.items(), key=lambda item: item[1][0])
  total = found['parameters and optimizer state'][0] + (need if what != 'parameters and optimizer state' else 0)
  if total > available:
    gib = config_lib.GIB
    raise ConfigError(
        f'task {name!r}: a run needs at least {total / gib:,.1f} GiB ({what}: {need / gib:,.1f} GiB, set by '
        f'{keys}; parameters and optimizer state included) but the device has {available / gib:,.1f} GiB; '
        'allowed: a run that fits: a smaller model, batch or side.'
    )


# ---------------------------------------------------------------------------------------- one run
def _loss_and_predictions(logits, labels):
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
  return losses, jnp.argmax(logits, axis=-1)


def optimizer_spec(settings: Settings, lr: float) -> OptimizerSpec:
  """The run's optimizer, the LM studies' own (relpos_jax.train.optim): global-norm clipping, then AdamW with
  optax's defaults (b1 0.9, b2 0.999, eps 1e-8) on a (linear warmup then) cosine schedule from `lr` to 0 at
  `steps`, weight decay on matrices only. (Issue 51: the grid study had its own AdamW until 2026-12-06; the
  committed round-1 runs were trained with it: the module docstring says what changed.)"""
  return OptimizerSpec(
      learning_rate=float(lr),
      schedule='warmup_cosine',
      warmup_steps=settings.warmup_steps,
      end_lr_fraction=0.0,
      weight_decay=settings.weight_decay,
      b1=0.9,
      b2=0.999,
      eps=1e-8,
      grad_clip_norm=settings.grad_clip_norm,
      total_steps=settings.steps,
  )


def classification_loss(model, batch, key):
  """The grid study's training objective (`step.make_model_train_step`'s `loss`): mean cross-entropy of the
  model's logits (per example or per cell) on `batch['images']`; `key` is the step's draw for an encoder that
  augments its coordinates in training."""
  losses, _ = _loss_and_predictions(model(batch['images'], train=True, rng=key), batch['labels'])
  return losses.mean(), {}


@nnx.jit(static_argnums=3)
def _eval_step(model, images, labels, entropy):
  if entropy:
    logits, ent = model(images, train=False, return_entropy=True)
  else:
    logits, ent = model(images, train=False), None
  losses, pred = _loss_and_predictions(logits, labels)
  return losses, pred, ent


def _evaluate(model, eval_fn, task, pixels: int, settings: Settings, split: str, entropy: bool) -> dict:
  """Loss, accuracy (per cell for per-cell tasks) and exact match on the first `eval_examples` examples of the
  (data_seed, split) stream at `pixels` per side; with `entropy`, the mean attention entropy per layer on the
  first evaluation batches that cover `entropy_examples` of them (the model rebuilds its attention weights
  explicitly for it, which doubles a batch's cost)."""
  n, bs = settings.eval_examples, settings.eval_batch_size
  losses, right, boards, entropies, weights = [], [], [], [], []
  for step in range(math.ceil(n / bs)):
    batch = task.batch(pixels, bs, settings.data_seed, split, step)
    keep = min(bs, n - step * bs)
    with_entropy = entropy and step * bs < settings.entropy_examples  # the first batches only: it costs twice
    loss, pred, ent = eval_fn(model, jnp.asarray(batch['images']), jnp.asarray(batch['labels']), with_entropy)
    loss, pred, labels = np.asarray(loss)[:keep], np.asarray(pred)[:keep], batch['labels'][:keep]
    losses.append(loss.reshape(keep, -1).mean(axis=1))
    ok = (pred == labels).reshape(keep, -1)
    right.append(ok.mean(axis=1))
    boards.append(ok.all(axis=1))
    if ent is not None:
      entropies.append(np.asarray(ent, np.float64))
      weights.append(keep)
  out = {
      'loss': float(np.concatenate(losses).mean()),
      'accuracy': float(np.concatenate(right).mean()),
      'num_examples': n,
  }
  if task.per_cell:
    out['exact_match'] = float(np.concatenate(boards).mean())
  if entropies:
    out['entropy'] = [float(x) for x in np.average(np.stack(entropies), axis=0, weights=weights)]
    out['entropy_examples'] = int(sum(weights))
  return out


def majority_baseline(settings: Settings, task, pixels: int, split: str = 'test') -> float:
  """The accuracy of always answering the most frequent label of the scored examples (per cell for per-cell
  tasks): the floor a row must beat (life's dead cells are most of a board; count's classes are uniform)."""
  n, bs = settings.eval_examples, settings.eval_batch_size
  labels = np.concatenate(
      [task.batch(pixels, bs, settings.data_seed, split, step)['labels'] for step in range(math.ceil(n / bs))]
  )[:n]
  counts = np.bincount(labels.ravel(), minlength=task.num_classes)
  return float(counts.max() / counts.sum())


def run_config(
    settings: Settings,
    task: grid_tasks.GridTask,
    entry: Entry,
    seed: int,
    lr: float,
    pool: str | None = None,
    selection_only: bool = False,
) -> dict:
  """What one run computes (recorded in its result; a saved result is reused only for an equal one). A selection
  run (at config.selection_seed) is scored on validation only, and says so; a row of config.extra_pools records
  its pool in its model."""
  extra = {'selection_only': True} if selection_only else {}
  return {
      'task': task.describe(),
      'encoder': entry.spec,
      'seed': seed,
      'learning_rate': lr,
      'model': {**dataclasses.asdict(settings.model), **({'pool': pool} if pool else {})},
      **extra,
      **{
          k: getattr(settings, k)
          for k in ('train_side', 'steps', 'batch_size', 'warmup_steps', 'weight_decay', 'grad_clip_norm')
      },
      'eval_sides': list(settings.eval_sides),
      'eval_examples': settings.eval_examples,
      'entropy_examples': settings.entropy_examples,
      'data_seed': settings.data_seed,
  }


def train_and_evaluate(
    settings: Settings, task, entry: Entry, seed: int, lr: float, model_fn, pool=None, selection_only=False
) -> dict:
  """Trains one model (seed: the initialisation and the training stream) and evaluates it (selection_only: on
  validation at the training side only, what the rate is chosen on; no test example is scored)."""
  parts, params = state_lib.split_model(_build(model_fn, settings, task, entry.spec, seed, pool))
  num_params = state_lib.count_params(params)
  optimizer = optimizer_spec(settings, lr)
  state = state_lib.init_train_state(params, optimizer.build())
  train_step = step_lib.make_model_train_step(parts.graphdef, optimizer, classification_loss)
  key = jax.random.fold_in(jax.random.key(seed), streams.KEY_AUGMENT)  # the step folds in its index

  pixels = settings.train_side * task.patch_size
  started = time.perf_counter()
  train_losses = []
  for step in range(settings.steps):
    batch = task.batch(pixels, settings.batch_size, seed, 'train', step)
    batch = {'images': jnp.asarray(batch['images']), 'labels': jnp.asarray(batch['labels'])}
    state, metrics = train_step(state, parts.rest, batch, key)
    loss = float(metrics['loss'])
    if not bool(metrics['finite']):  # the update was skipped (step.guarded_update); the run stops here
      return {
          'diverged': {
              'step': step,
              'message': f'non-finite update at step {step} (training loss {loss}, '
              f'gradient norm {float(metrics["grad_norm"])})',
          },
          'train_seconds': round(time.perf_counter() - started, 2),
          'num_params': num_params,
      }
    train_losses.append(loss)
  train_seconds = time.perf_counter() - started
  model, eval_step = state_lib.model_from(parts, state.params), _eval_step
  started = time.perf_counter()
  validation = _evaluate(model, eval_step, task, pixels, settings, 'validation', entropy=False)
  by_side = {}
  for side in [] if selection_only else settings.eval_sides:
    by_side[str(side)] = _evaluate(model, eval_step, task, side * task.patch_size, settings, 'test', entropy=True)
  tail = train_losses[-max(1, len(train_losses) // 10) :]
  return {
      'validation': validation,
      **({} if selection_only else {'test': by_side}),
      'train_loss': float(np.mean(tail)),
      'num_params': num_params,
      'train_seconds': round(train_seconds, 2),
      'eval_seconds': round(time.perf_counter() - started, 2),
  }


def run_dir(workdir: str, task_name: str, label: str, lr: float, seed: int) -> str:
  return os.path.join(workdir, 'runs', task_name, label, f'lr{rate_name(lr)}', f'seed{seed}')


def _run(
    settings,
    workdir,
    task_name,
    task,
    entry,
    seed,
    lr,
    model_fn,
    counter,
    finished_only=False,
    pool=None,
    selection_only=False,
) -> dict | None:
  """The saved result of one run, or the run trained, evaluated and saved (finished_only: None instead)."""
  directory = run_dir(workdir, task_name, entry.label, lr, seed)
  path = os.path.join(directory, RESULT_FILE)
  config = run_config(settings, task, entry, seed, lr, pool, selection_only)
  fingerprint = task.data_fingerprint()

  def reuse(saved: record.RunRecord) -> dict:
    if saved.config != json.loads(json.dumps(config)):
      raise ConfigError(
          f'{directory} holds a finished run of another config (task, encoder, sizes or protocol changed); use '
          'a new workdir or remove that directory.'
      )
    check_entropy_coverage(settings, saved.values, directory)
    # Checked where both sides have one: runs recorded before fingerprints (the committed study's) cannot be
    # checked, and a task whose data is not loaded has none to compare.
    recorded = saved.values.get(DATA_FINGERPRINT)
    if fingerprint is not None and recorded is not None and recorded != fingerprint:
      raise ConfigError(
          f'{directory} holds a run trained on other data ({DATA_FINGERPRINT} {recorded}) than config.data_dir='
          f'{settings.data_dir!r} holds ({fingerprint}); allowed: the data it trained on, or a new workdir.'
      )
    counter['reused'] += 1
    counter['run_seconds'] += saved.cost
    return saved.to_json()

  def train() -> record.RunRecord:
    logging.info('resolution study: %s / %s / lr %g / seed %d', task_name, entry.label, lr, seed)
    measured = train_and_evaluate(settings, task, entry, seed, lr, model_fn, pool=pool, selection_only=selection_only)
    named = {name: measured.pop(name, None) for name in ('train_seconds', 'num_params', 'eval_seconds', 'diverged')}
    if fingerprint is not None:
      measured[DATA_FINGERPRINT] = fingerprint
    result = record.RunRecord(record.GRID_LAYOUT, seed, config, values=measured, **named)
    counter['trained'] += 1
    counter['run_seconds'] += result.cost
    return result

  return engine.obtain_run(path, record.GRID_LAYOUT, reuse, None if finished_only else train)


def entropy_coverage(settings: Settings) -> int:
  """The test examples the attention entropy is measured on, per side: the first evaluation batches that cover
  `entropy_examples`, whole batches of `eval_batch_size` (`_evaluate`), at most `eval_examples`."""
  batches = -(-settings.entropy_examples // settings.eval_batch_size)
  return min(settings.eval_examples, batches * settings.eval_batch_size)


def check_entropy_coverage(settings: Settings, saved: dict, directory: str) -> None:
  """A finished run is reused only where its entropy covers the examples this config's would: eval_batch_size is
  not in the run config (it changes no loss or accuracy) but it rounds the entropy's examples up to whole
  batches, so a resume with another one would mix entropies of different examples in one table."""
  covered = sorted(
      {side['entropy_examples'] for side in (saved.get('test') or {}).values() if 'entropy_examples' in side}
  )
  if covered and covered != [entropy_coverage(settings)]:
    raise ConfigError(
        f'config.eval_batch_size={settings.eval_batch_size} is invalid for the finished run in {directory}: its '
        f'attention entropy covers {", ".join(map(str, covered))} test examples per side, batches of '
        f'{settings.eval_batch_size} cover {entropy_coverage(settings)} (config.entropy_examples='
        f'{settings.entropy_examples}); allowed: the eval_batch_size it ran with, or a new workdir.'
    )


def read_result(path: str) -> record.RunRecord:
  """A run's saved result.json (`record.RunRecord` in the grid layout); ConfigError naming it when it is
  truncated or is no run's record, so that a damaged file is removed and its run trained again."""
  return record.RunRecord.read(path, record.GRID_LAYOUT)


def _selection_loss(result: dict) -> float:
  return math.inf if result.get('diverged') else float(result['validation']['loss'])


def merge_seeds(settings: Settings, entry: Entry, per_seed: Sequence[dict], lr: float, how: str, grid) -> dict:
  """One (task, encoder) row: per-side means over the seeds that did not diverge, and every seed's value."""
  finite = [r for r in per_seed if not r.get('diverged')]
  sides = [str(s) for s in settings.eval_sides]
  seeds = [r['run_config']['seed'] for r in per_seed]
  row = {
      'name': entry.label,
      'spec': entry.spec,
      'seeds': seeds,
      'learning_rate': lr,
      'lr_choice': how,
      'num_params': per_seed[0].get('num_params'),
      'train_seconds': round(sum(r.get('train_seconds', 0) for r in per_seed), 1),
      'eval_seconds': round(sum(r.get('eval_seconds', 0) for r in per_seed), 1),
      'validation_loss': stats.mean([r['validation']['loss'] for r in finite]),
  }
  for metric in ('accuracy', 'loss', 'exact_match'):
    if finite and metric not in finite[0]['test'][sides[0]]:
      continue
    row[metric], row[f'{metric}_per_seed'] = record.seed_columns(
        per_seed, sides, lambda r, side: None if r.get('diverged') else r['test'][side][metric]
    )
  if finite and 'entropy' in finite[0]['test'][sides[0]]:
    row['entropy'] = {
        s: [stats.mean(layer) for layer in zip(*[r['test'][s]['entropy'] for r in finite])] for s in sides
    }
    row['entropy_per_seed'] = {
        s: [None if r.get('diverged') else r['test'][s]['entropy'] for r in per_seed] for s in sides
    }
  if grid:
    row['lr_grid'] = engine.grid_losses(grid, _selection_loss)
  diverged = record.diverged_seeds(seeds, per_seed)
  if diverged:
    row['diverged_seeds'] = diverged
  return row


def edge_check_row(settings: Settings, grid: dict, lr: float, edge: dict) -> dict:
  """A row's selection: its seed, and where it chose the grid's top, the edge rates' validation losses at that
  seed (None: diverged; not yet run under finished_only) and whether one of them is lower (the edge binds: the
  grid's choice is reported, marked)."""
  out = {'selection_seed': settings.selection_seed, 'edge': None, 'edge_binds': None}
  if not settings.edge_rates or lr != max(settings.lr_grid):
    return out
  losses = {r: (None if r_result is None else _selection_loss(r_result)) for r, r_result in edge.items()}
  out['edge'] = {rate_name(r): (None if v is None or math.isinf(v) else v) for r, v in losses.items()}
  chosen = _selection_loss(grid[lr])
  finished = [v for v in losses.values() if v is not None]
  out['edge_binds'] = None if len(finished) < len(losses) else any(v < chosen for v in finished)
  return out


def binomial_se(accuracy: float | None, n: int) -> float | None:
  """sqrt(p (1 - p) / n): the standard error of an accuracy p measured on n independent test examples (per-cell
  accuracy: n boards, a bound that treats a board as one trial)."""
  if accuracy is None or n < 1:
    return None
  return math.sqrt(max(accuracy * (1 - accuracy), 0.0) / n)


def comparisons(results: dict, task_name: str) -> list[dict]:
  """The paired differences of test accuracy asked for in `config.comparisons`, on one task."""
  rows = {r['name']: r for r in results['tasks'][task_name]['runs']}
  out = []
  for request in results['comparison_requests']:
    a, b = rows.get(request['a']), rows.get(request['b'])
    if a is None or b is None:
      continue
    for side in request['sides']:
      va, vb, seeds = grid_claims.paired_accuracies(a, b, side)
      out.append(
          {
              'a': a['name'],
              'b': b['name'],
              'side': side,
              'seeds': seeds,
              'a_mean': stats.mean(va),
              'b_mean': stats.mean(vb),
              **stats.paired_difference(va, vb),
              'p_value': stats.paired_p_value(va, vb),
          }
      )
  return out


def holm_family(results: dict) -> list[tuple[dict, str | None]]:
  """Every comparison of the page, each with why it is left out of the Holm family (None: a member), in order:

    'task outside the family'  its task is not in protocol.family_tasks (e.g. the canvas, whose fall with size
                               measures the mean pool's dilution by blank tokens, not position);
    'degenerate'               A and B scored the same at every seed (bit-identical runs, e.g. two encoders the
                               task cannot tell apart): a difference of exactly 0, the same test as no test;
    'duplicate of <task> ...'  its per-seed values of A and B are those of a member already counted (shared runs:
                               two protocols whose training side is the same images), so counting it again would
                               count one test twice;
    'no p-value'               fewer than two seeds.

  Without protocol.family_tasks (the committed study) every comparison with a p-value is a member."""
  family_tasks = results['protocol'].get('family_tasks')
  rows = [(name, c) for name, task in _tasks_in_order(results) for c in task['comparisons']]
  if family_tasks is None:
    return [(c, None if c.get('p_value') is not None else 'no p-value') for _, c in rows]
  out, seen = [], {}
  for name, c in rows:
    task = results['tasks'][name]
    by_name = {r['name']: r for r in task['runs']}
    s = str(c['side'])
    values = tuple(
        tuple(by_name[x]['accuracy_per_seed'][s][by_name[x]['seeds'].index(seed)] for seed in c['seeds'])
        for x in (c['a'], c['b'])
    )
    if name not in family_tasks:
      why = 'task outside the family'
    elif values[0] == values[1]:
      why = 'degenerate (A and B identical at every seed)'
    elif (c['a'], c['b'], values) in seen:
      why = f'duplicate of {seen[(c["a"], c["b"], values)]} (the same runs)'
    elif c.get('p_value') is None:
      why = 'no p-value'
    else:
      why = None
      seen[(c['a'], c['b'], values)] = f'{name} at {s}'
    out.append((c, why))
  return out


def adjust_over_page(results: dict) -> dict:
  """Holm over every comparison of the page (every task, every side): sets each comparison's `p_holm` and
  `resolved_holm`, and `protocol.holm_family` (m). A claim that reads one comparison among the page's many is a
  multiple test; the page is the family, as in the LM study's reports (relpos_jax.study.report). With
  protocol.family_tasks (issue 49) the family is `holm_family`'s members: each comparison records `family` (None:
  a member; else why not), the others get p_holm None."""
  if results['protocol'].get('family_tasks') is not None:
    members = holm_family(results)
    adjusted = stats.holm([c.get('p_value') if why is None else None for c, why in members])
    for (c, why), p, resolved in zip(members, adjusted['adjusted'], adjusted['resolved']):
      c['family'], c['p_holm'], c['resolved_holm'] = why, p, bool(resolved)
    results['protocol']['holm_family'] = adjusted['m']
    return results
  rows = [c for task in results['tasks'].values() for c in task['comparisons']]
  family = stats.holm([c.get('p_value') for c in rows])
  for c, adjusted, resolved in zip(rows, family['adjusted'], family['resolved']):
    c['p_holm'], c['resolved_holm'] = adjusted, resolved
  results['protocol']['holm_family'] = family['m']
  return results


def environment() -> dict:
  """The study record's environment (`record.environment`) and the CPU count (a run's cost is read with it)."""
  return {**record.environment(), 'cpu_count': os.cpu_count()}


def run_resolution_study(
    config,
    workdir: str | os.PathLike,
    *,
    model_fn: Callable | None = None,
    on_result: Callable | None = None,
    finished_only: bool = False,
) -> dict:
  """Runs (or resumes) the study of `config` in `workdir`; returns the results dict (module docstring).

  model_fn: the model factory (default `vit_model`); on_result: called with the results after each
  (task, encoder), e.g. to re-plot in a notebook; finished_only: train and write nothing, report the runs
  finished so far (results['unfinished'] lists the (task, encoder) rows left out or short of seeds)."""
  config_json = config_files.as_dict(config)  # The user's config (a ConfigDict), recorded as it was given.
  settings = parse_config(config_json)
  model_fn = vit_model if model_fn is None else model_fn
  entries = parse_encoders(settings)
  cache: dict = {}
  workdir = os.fspath(workdir)
  records = workdir if finished_only else None
  tasks = {name: make_task(settings, name, cache, records) for name in settings.tasks}
  for name, task in tasks.items():
    check_sides(settings, task, name)
  check_models(settings, tasks, entries, model_fn)
  # Every check above runs before the lock: a refused config leaves no trace.
  with workdir_lock.held(workdir, enabled=not finished_only):
    return _run_study(settings, config_json, tasks, entries, workdir, model_fn, on_result, finished_only)


def _task_summary(settings: Settings, task) -> dict:
  """A task's entry of the results before its runs: its description and majority baseline (None, with the
  reason under 'data_absent', for a task known only from its records: the baseline needs the test labels)."""
  summary = {'task': task.describe(), 'runs': [], 'comparisons': []}
  if isinstance(task, RecordedFashionMnist):
    summary['majority_baseline'] = None
    summary['data_absent'] = (
        f'config.data_dir={task.data_dir!r} does not exist: the task and its runs are as recorded; the majority '
        'baseline is not computed'
    )
  else:
    summary['majority_baseline'] = {
        str(side): majority_baseline(settings, task, side * task.patch_size) for side in settings.eval_sides
    }
  return summary


def _run_study(settings, config_json: dict, tasks, entries, workdir, model_fn, on_result, finished_only) -> dict:
  started = time.perf_counter()
  counter = {'trained': 0, 'reused': 0, 'run_seconds': 0.0}
  results = {
      'title': settings.title,
      'description': settings.description,
      'metric': 'accuracy',
      'split': 'test',
      'train_side': settings.train_side,
      'eval_sides': list(settings.eval_sides),
      'seeds': list(settings.seeds),
      'task_order': list(tasks),  # results.json sorts its keys; the report keeps the config's order
      'comparison_requests': parse_comparisons(settings),
      'protocol': {
          'split': 'test',
          'selection': f'validation loss at the training side {settings.train_side}' if settings.lr_grid else None,
          'lr_grid': list(settings.lr_grid) if settings.lr_grid else None,
          'same_test_examples': (
              f'the first {settings.eval_examples} of the test stream of data_seed {settings.data_seed}'
          ),
          'sides': "tokens per side (pixels = side x the task's patch_size)",
          'plus_minus': stats.PLUS_MINUS,
      },
      'tasks': {name: _task_summary(settings, task) for name, task in tasks.items()},
      'meta': {'config': json.loads(json.dumps(config_json, default=str)), **environment()},
  }
  selection = settings.selection_seed
  if selection is not None:  # the protocol of issue 49, stated on the page; absent from the committed study's
    results['protocol'].update(
        selection_seed=selection,
        selection=(f'validation loss at the training side {settings.train_side}, at seed {selection} (not reported)'),
        edge_rates=list(settings.edge_rates),
        eval_examples=settings.eval_examples,
    )
  if settings.extra_pools:
    results['protocol']['extra_pools'] = {k: list(v) for k, v in settings.extra_pools.items()}
  if settings.family_tasks is not None:
    results['protocol']['family_tasks'] = list(settings.family_tasks)
  if finished_only:
    results['unfinished'] = []
  seeds = list(settings.seeds)
  run = functools.partial(_run, settings, workdir, model_fn=model_fn, counter=counter, finished_only=finished_only)
  grid_seed = seeds[0] if selection is None else int(selection)
  for name, task in tasks.items():
    for entry, pool in pool_rows(settings, task, entries):
      edge = {}
      chosen_only = selection is not None  # selection runs are scored on validation alone
      if settings.lr_grid is not None:
        choice = engine.choose_rate(
            settings.lr_grid,
            lambda lr: run(name, task, entry, grid_seed, lr, pool=pool, selection_only=chosen_only),
            _selection_loss,
        )
        if choice is None:  # finished_only: the rate is not chosen yet
          results['unfinished'].append({'task': name, 'encoder': entry.label, 'finished_seeds': []})
          continue
        if settings.edge_rates and choice.value == max(settings.lr_grid):  # the choice at the top: checked past it
          edge = {r: run(name, task, entry, grid_seed, r, pool=pool, selection_only=True) for r in settings.edge_rates}
      else:
        choice = engine.RateChoice(settings.learning_rate, 'fixed')
      lr, how, grid = choice.value, choice.how, choice.trials
      per_seed = engine.seed_runs(seeds, lambda seed: run(name, task, entry, seed, lr, pool=pool), choice, grid_seed)
      finished = [r for r in per_seed if r is not None]
      if len(finished) < len(per_seed):
        results['unfinished'].append(
            {'task': name, 'encoder': entry.label, 'finished_seeds': [r['run_config']['seed'] for r in finished]}
        )
      if not finished:
        continue
      row = merge_seeds(settings, entry, finished, lr, how, grid)
      if selection is not None:
        row.update(edge_check_row(settings, grid, lr, edge))
      if pool is not None:
        row['pool'] = pool
      results['tasks'][name]['runs'].append(row)
      results['tasks'][name]['comparisons'] = comparisons(results, name)
      adjust_over_page(results)
      results['meta'].update(counter, wall_seconds=round(time.perf_counter() - started, 1))
      if not finished_only:
        write_outputs(results, workdir, plots=False)  # the tables after each encoder, the plots at the end
      if on_result is not None:
        on_result(results)
  if not finished_only:
    write_outputs(results, workdir)
  return results


# ------------------------------------------------------------------------------------------------ report
def _cell(mean, values, digits=3) -> str:
  if mean is None:
    return 'diverged'
  spread = stats.std(values)
  return f'{mean:.{digits}f}' + (f' ± {spread:.{digits}f}' if spread is not None else '')


def _tasks_in_order(results: dict) -> list[tuple[str, dict]]:
  """(name, task) in the config's order (results.json sorts its keys; older results have no order: theirs)."""
  return [(name, results['tasks'][name]) for name in results.get('task_order', list(results['tasks']))]


def _p(p: float | None) -> str:
  return 'n/a' if p is None else f'{p:.2g}'


def _seeds_note(row: dict, results: dict) -> str:
  return '' if row['seeds'] == results['seeds'] else f' [seeds {", ".join(map(str, row["seeds"]))}]'


def _se(accuracy, n_test) -> str:
  se = binomial_se(accuracy, n_test) if n_test is not None else None
  return '' if se is None else f' (SE {se:.3f})'


def _edge_note(row: dict) -> str:
  if row.get('edge') is None:
    return ''
  if row.get('edge_binds') is None:
    return '; edge not yet checked'
  return '; edge binds' if row['edge_binds'] else '; edge holds'


def family_statement(results: dict) -> str:
  """The Holm family in words: its tasks, its size, and every comparison left out with why (`holm_family`)."""
  members = holm_family(results)
  family = results['protocol']['family_tasks']
  out = [
      f'**The Holm family** ({sum(why is None for _, why in members)} comparisons): the paired comparisons of '
      f'config.comparisons on {", ".join(family)}, every side, less those that test nothing or test again what a '
      'member tests.'
  ]
  where = {id(c): name for name, task in results['tasks'].items() for c in task['comparisons']}
  left = {}
  for c, why in members:
    if why is not None:
      reason = why.split(' (')[0] if why.startswith(('degenerate', 'duplicate')) else why
      left.setdefault(reason, []).append(f'{c["a"]} vs {c["b"]} on {where.get(id(c))} at {c["side"]}')
  for why, cs in left.items():
    out.append(f'Left out, {why}: {len(cs)} ({"; ".join(cs)}).')
  return ' '.join(out)


def markdown(results: dict) -> str:
  """results.md: per task, accuracy (and exact match) by side, entropy per layer by side, the comparisons."""
  sides = [str(s) for s in results['eval_sides']]
  head = ' | '.join(f'{s}×{s}' for s in sides)
  lines = [f'# {results["title"]}', '']
  if results.get('description'):
    lines += [results['description'], '']
  protocol = results['protocol']
  grid = protocol['lr_grid']
  rate = f'chosen per encoder on validation loss at the training side from {grid}' if grid else 'fixed'
  if protocol.get('selection_seed') is not None:
    rate = (
        f'chosen per encoder on validation loss at the training side, at seed {protocol["selection_seed"]} (not '
        f'reported; its runs score no test example), from {grid}'
    )
    if protocol.get('edge_rates'):
      rate += (
          f'; a row that chose the top, {max(grid):g}, was also trained at {protocol["edge_rates"]} at that seed (the '
          'edge check: "edge holds" where none of them has a lower validation loss, "edge binds" where one has)'
      )
  lines += [
      f'Trained at {results["train_side"]}×{results["train_side"]} tokens, evaluated on the test split at '
      f'{", ".join(f"{s}×{s}" for s in sides)} tokens; seeds {results["seeds"]}; cells: {stats.PLUS_MINUS}. '
      f'Learning rate: {rate}.',
      '',
  ]
  n_test = protocol.get('eval_examples')
  if n_test is not None:
    lines += [
        f'Every side scores the same {n_test:,} test examples for every encoder and seed; a cell\'s "(SE x)" is the '
        'binomial standard error sqrt(p (1 - p) / n) of its mean accuracy p on those n examples (per-cell tasks: '
        'n boards, treating a board as one trial), to read beside the seed spread.',
        '',
    ]
  if protocol.get('extra_pools'):
    pools = '; '.join(
        f'{", ".join(v)} also pooled by {k} (rows <label>@{k})' for k, v in protocol['extra_pools'].items()
    )
    lines += [f'Pooling: {pools}, on the classification tasks (per-cell tasks pool nothing).', '']
  if protocol.get('family_tasks') is not None:
    lines += [family_statement(results), '']
  if results.get('unfinished'):
    rows = ', '.join(
        f'{u["task"]} / {u["encoder"]} ({len(u["finished_seeds"])} of {len(results["seeds"])} seeds)'
        for u in results['unfinished']
    )
    lines += [f'**Partial: runs finished so far.** Not finished: {rows}.', '']
  for name, task in _tasks_in_order(results):
    runs = task['runs']
    if not runs:
      continue
    per_cell = task['task'].get('per_cell')
    lines += [f'## {name}', '', f'Task: `{json.dumps(task["task"], sort_keys=True)}`', '']
    if task.get('data_absent'):
      lines += [f'**Data absent**: {task["data_absent"]}.', '']
    metrics = [('accuracy', 'per-cell accuracy' if per_cell else 'accuracy')] + (
        [('exact_match', 'exact match per board')] if per_cell else []
    )
    for metric, title in metrics:
      lines += [f'Test {title}:', '', f'| encoder | {head} | lr |', '|---|' + '---|' * len(sides) + '---|']
      if metric == 'accuracy' and task.get('majority_baseline'):
        base = ' | '.join(_cell(task['majority_baseline'][s], []) for s in sides)
        lines.append(f'| majority class (the floor) | {base} | |')
      elif metric == 'accuracy' and task.get('data_absent'):
        lines.append(f'| majority class (the floor) | {" | ".join("n/a" for _ in sides)} | |')
      for row in runs:
        cells = ' | '.join(
            _cell(row[metric][s], row[f'{metric}_per_seed'][s]) + _se(row[metric][s], n_test) for s in sides
        )
        lr = f'{row["learning_rate"]:g} ({row["lr_choice"]}{_edge_note(row)})'
        lines.append(f'| {row["name"]} (`{row["spec"]}`){_seeds_note(row, results)} | {cells} | {lr} |')
      lines.append('')
    if any('entropy' in row for row in runs):
      ns = [int(s) ** 2 for s in sides]
      lines += [
          'Mean attention entropy per layer (nats; layer 1 / layer 2 / ...), mean over seeds; uniform attention '
          'over N tokens has log N:',
          '',
          f'| encoder | {head} |',
          '|---|' + '---|' * len(sides),
          '| uniform (log N) | ' + ' | '.join(f'{math.log(n):.2f}' for n in ns) + ' |',
      ]
      for row in runs:
        if 'entropy' in row:
          cells = ' | '.join(' / '.join(f'{x:.2f}' for x in row['entropy'][s]) for s in sides)
          lines.append(f'| {row["name"]} | {cells} |')
      lines.append('')
    if task['comparisons']:
      family = results['protocol'].get('holm_family')
      lines += [
          'Paired differences of test accuracy over seeds (95% t interval; resolved: the interval excludes 0; '
          f"p (Holm): adjusted over the page's {family} comparisons, every task and side, resolved below 0.05):",
          '',
          '| A | B | side | seeds | A | B | A − B | 95% interval | resolved | p | p (Holm) |',
          '|---|---|---|---|---|---|---|---|---|---|---|',
      ]
      for c in task['comparisons']:
        interval = f'[{c["low"]:+.3f}, {c["high"]:+.3f}]' if c['low'] is not None else 'n/a (< 2 seeds)'
        diff = f'{c["mean"]:+.3f}' if c['mean'] is not None else 'n/a'
        holm = f'{_p(c.get("p_holm"))}{" (resolved)" if c.get("resolved_holm") else ""}'
        if c.get('family'):  # issue 49's family: out of it, and why
          holm = f'not in the family: {c["family"]}'
        lines.append(
            f'| {c["a"]} | {c["b"]} | {c["side"]} | {c["n"]} | {_cell(c["a_mean"], [])} | {_cell(c["b_mean"], [])} | '
            f'{diff} | {interval} | {"yes" if c["resolved"] else "no"} | {_p(c.get("p_value"))} | {holm} |'
        )
      lines.append('')
  meta = results['meta']
  runs = meta.get('trained', 0) + meta.get('reused', 0)
  cost = (
      f'; the {runs} runs (the rate grid included) took {meta["run_seconds"] / 60:,.0f} minutes summed (training '
      'and evaluation, as each recorded them)'
      if meta.get('run_seconds')
      else ''
  )
  wall = f'; this report\'s wall {meta["wall_seconds"]} s' if meta.get('wall_seconds') is not None else ''
  lines.append(
      f'Runs trained {meta.get("trained", 0)}, reused {meta.get("reused", 0)}{cost}{wall}; on {meta.get("device")} '
      f'({meta.get("cpu_count")} CPUs visible).'
  )
  return '\n'.join(lines) + '\n'


def plot(results: dict, path: str) -> str:
  """Test accuracy against grid side, one panel per task (mean, ± std band over seeds)."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  tasks = [(n, t) for n, t in _tasks_in_order(results) if t['runs']]
  fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4.5 * max(1, len(tasks)), 3.6), squeeze=False)
  sides = results['eval_sides']
  for ax, (name, task) in zip(axes[0], tasks):
    for row in task['runs']:
      means = [row['accuracy'][str(s)] for s in sides]
      spread = [stats.std(row['accuracy_per_seed'][str(s)]) or 0.0 for s in sides]
      if any(m is None for m in means):
        continue
      line = ax.plot(sides, means, marker='o', label=row['name'])[0]
      ax.fill_between(sides, np.subtract(means, spread), np.add(means, spread), color=line.get_color(), alpha=0.15)
    if task.get('majority_baseline'):
      floor = [task['majority_baseline'][str(s)] for s in sides]
      ax.plot(sides, floor, color='grey', ls='--', lw=0.8, label='majority class')
    ax.axvline(results['train_side'], color='grey', lw=0.8, ls=':')
    ax.set_title(name)
    ax.set_xlabel('grid side (tokens)')
    ax.set_xticks(sides)
    ax.set_ylabel('test accuracy' + (' (per cell)' if task['task'].get('per_cell') else ''))
  axes[0][-1].legend(fontsize=7, loc='best')
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def plot_entropy(results: dict, path: str) -> str | None:
  """Mean attention entropy against grid side: one row of panels per task, one panel per layer."""
  tasks = [(n, t) for n, t in _tasks_in_order(results) if any('entropy' in r for r in t['runs'])]
  if not tasks:
    return None
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  sides = results['eval_sides']
  layers = max(len(r['entropy'][str(sides[0])]) for _, t in tasks for r in t['runs'] if 'entropy' in r)
  fig, axes = plt.subplots(len(tasks), layers, figsize=(4 * layers, 3.2 * len(tasks)), squeeze=False)
  for i, (name, task) in enumerate(tasks):
    for layer in range(layers):
      ax = axes[i][layer]
      ax.plot(sides, [math.log(s * s) for s in sides], color='grey', ls='--', lw=0.8, label='uniform (log N)')
      for row in task['runs']:
        if 'entropy' in row and layer < len(row['entropy'][str(sides[0])]):
          ax.plot(sides, [row['entropy'][str(s)][layer] for s in sides], marker='o', label=row['name'])
      ax.set_title(f'{name}: layer {layer + 1}')
      ax.set_xlabel('grid side (tokens)')
      ax.set_xticks(sides)
      ax.set_ylabel('attention entropy (nats)')
  axes[0][-1].legend(fontsize=7, loc='best')
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def write_outputs(results: dict, workdir: str, plots: bool = True) -> dict[str, str]:
  """results.json, results.md, claims.md (the published claims and best against runner-up by
  `grid_claims`' rule) and (plots) results.png and results_entropy.png in `workdir`."""
  os.makedirs(workdir, exist_ok=True)
  paths = {'json': os.path.join(workdir, 'results.json'), 'markdown': os.path.join(workdir, 'results.md')}
  report.write_json(results, paths['json'], indent=record.GRID_LAYOUT.indent)
  files.write_text_atomic(paths['markdown'], markdown(results))
  paths['claims'] = grid_claims.write_results(results, workdir)[0]
  if not plots:
    return paths
  paths['plot'] = plot(results, os.path.join(workdir, 'results.png'))
  entropy = plot_entropy(results, os.path.join(workdir, 'results_entropy.png'))
  if entropy:
    paths['entropy_plot'] = entropy
  return paths
