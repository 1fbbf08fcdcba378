"""Training from a config, for the command line, a notebook and the length-generalization study alike.

    result = train(config, workdir='/tmp/run')     # or workdir=None: nothing written, nothing resumed
    result.model                                   # the trained NNX model
    result.final_metrics['eval/128/bits_per_char']
    evaluate_lengths(result.model, result.data, [64, 128, 256])

With a workdir the run writes `config.json`, `data.json` (what the data was: the corpus fingerprint, or
the task's description), `metrics.jsonl` and `checkpoints/<step>/`, and a second call with the same config
resumes from the latest checkpoint. Because the data, the dropout masks and the
randomized positions of update `s` are functions of (seed, s) only, a run killed at any point and
restarted ends with the parameters an uninterrupted run ends with (bit for bit on the same devices).

Resuming is refused (ConfigError, nothing written) when the trajectory cannot be verified: checkpoints
without `config.json` or `data.json`, a config that differs in a key that changes what the run computes
(TRAJECTORY_KEYS), or other data (another corpus fingerprint). The records are written only once the
checks and the restore have passed, so a refused resume leaves the directory as it was. A latest
checkpoint that cannot be read is moved aside with a warning and the newest intact one is used (see
`relpos_jax.train.checkpoint`); a torn last line of metrics.jsonl is dropped with a warning.

Divergence: an update with a non-finite loss, gradient norm or new state is skipped inside the jitted
step (the parameters stay those before it), and `train.max_nonfinite_steps` (default 1) such updates in a
row stop the run with `DivergedError`, naming the update where it started. The loop notices at the next
log, evaluation or checkpoint step, or at the end, before writing anything; checkpoints never hold
non-finite parameters.

Step numbering: `step` counts updates applied. Update s (0-based) reads training batch s and produces the
state of step s + 1; checkpoints, records and `stop_after` use the count after the update.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from etils import epath
from flax import nnx

from relpos_jax import files
from relpos_jax.nn.models import BidirectionalModel, DecoderLM, positions_encoder
from relpos_jax.train import config as config_lib
from relpos_jax.train import metrics as metrics_lib
from relpos_jax.train import sharding, streams
from relpos_jax.train import tensorboard as tensorboard_lib
from relpos_jax.train import workdir_lock
from relpos_jax.train.checkpoint import CHECKPOINT_DIR, Checkpoints
from relpos_jax.train.data_sources import build_data
from relpos_jax.train.objectives import Objective
from relpos_jax.train.optim import OptimizerSpec
from relpos_jax.train.state import ModelParts, TrainState, count_params, init_train_state, model_from, split_model
from relpos_jax.train.step import make_eval_step, make_train_step, run_key

CONFIG_FILE = 'config.json'
DATA_FILE = 'data.json'
# Keys that change what a run computes; resuming a workdir with different values is refused.
TRAJECTORY_KEYS = ('seed', 'model', 'data', 'optim', 'train.steps', 'train.batch_size')

Hook = Callable[[int, TrainState, dict], None]


class DivergedError(FloatingPointError):
  """A run stopped on non-finite updates. `step`: the update (1-based, the step it would have produced)
  where the run of non-finite updates began; `count`: how many in a row."""

  def __init__(self, message: str, step: int, count: int):
    super().__init__(message)
    self.step = step
    self.count = count


@dataclasses.dataclass
class TrainResult:
  """What `train` returns.

  model: the NNX model with the final parameters (for evaluation: call with deterministic=True).
  state: the final TrainState (step, params, opt_state), replicated over the mesh.
  parts: the static model parts; `model_from(parts, params)` rebuilds a model from other params.
  final_metrics: the last training record merged with the final evaluation (`eval/<length>/<metric>`).
  history: every record written (training and evaluation), in step order, across resumes.
  data: the run's data (`data.eval_set(length)`, `data.objective`, `data.describe()`).
  """

  model: nnx.Module
  state: TrainState
  parts: ModelParts
  final_metrics: dict
  history: list[dict]
  config: Any
  data: Any
  workdir: str | None
  mesh: Any = None

  @property
  def params(self):
    return self.state.params

  @property
  def step(self) -> int:
    return int(jax.device_get(self.state.step))


# ------------------------------------------------------------------------------------------- building
def build_model(config, *, seed: int | None = None) -> nnx.Module:
  """The (untrained) model of a run: `DecoderLM` for the corpus and causal tasks, else `BidirectionalModel`.

  Parameters are drawn from `seed` (default `config.seed`). The vocabulary sizes come from the config's
  data source without loading the data (`config.model_config`). Raises ConfigError if the model cannot
  process the longest sequence the run uses (a learned absolute table that is too short).
  """
  run = config_lib.parse(config)  # a Config passes through: train() hands over the one it parsed
  seed = int(run.seed if seed is None else seed)
  cls = DecoderLM if config_lib.architecture(run) == 'causal' else BidirectionalModel
  base = jax.random.key(seed)
  with warnings.catch_warnings():
    # config.validate already warned about a position-free bidirectional model, naming the config key.
    warnings.filterwarnings('ignore', message='BidirectionalModel with encoder', category=UserWarning)
    model = cls(
        config_lib.model_config(run), rngs=nnx.Rngs(params=jax.random.fold_in(base, streams.KEY_PARAMS), dropout=base)
    )
  longest = config_lib.longest_sequence(run)
  try:
    # A task's own input positions (Abacus) are held to the table by config.validate, not the length.
    model.check_length(longest, input_positions_given=config_lib.input_position_bound(run) is not None)
  except ValueError as e:
    raise config_lib.ConfigError(
        f'config.model.encoder={run.encoder_spec!r} cannot run this config, whose longest sequence '
        f'(training or config.eval.lengths) has {longest} tokens: {e}'
    ) from None
  return model


# ----------------------------------------------------------------------------------------- evaluation
@dataclasses.dataclass(frozen=True)
class EvalPositions:
  """The positions an evaluation gives the model: 0..L-1 (`encoder` None), or, for an encoder that trains on
  random positions (randomized, Ruoss et al. 2023), what its reference code does at test time too: ordered
  random positions from [0, max_position), `draws` draws of them, the metrics pooled over the draws (every
  draw scores the same tokens, so this is their mean). Draw `d` of the rows of a set of length T comes from
  `fold_in(fold_in(fold_in(run_key(seed), streams.KEY_EVAL_POSITIONS), T), d)`: deterministic per seed.

  `EvalPositions.of(model_or_encoder, draws, seed)` picks the published evaluation for the encoder
  (random for a randomized one, 0..L-1 for any other); `sequential=True` asks for 0..L-1 whatever it is.
  """

  encoder: Any = None
  draws: int = 1
  seed: int = 0

  @classmethod
  def of(cls, model_or_encoder, draws: int, seed: int, *, sequential: bool = False) -> 'EvalPositions':
    encoder = getattr(getattr(model_or_encoder, 'config', None), 'encoder', model_or_encoder)
    encoder = positions_encoder(encoder)
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
      raise config_lib.ConfigError(
          f'config.eval.position_draws={draws!r} is invalid: allowed: an int >= 1 (the draws of random '
          'evaluation positions averaged for a randomized encoder).'
      )
    if sequential or config_lib.train_position_limit(encoder) is None:
      return cls(None, 1, int(seed))
    return cls(encoder, int(draws), int(seed))

  @property
  def random(self) -> bool:
    return self.encoder is not None

  def describe(self) -> str:
    if not self.random:
      return '0..L-1'
    limit = config_lib.train_position_limit(self.encoder)
    return f'random: ordered positions from [0, {limit}), mean over {self.draws} draws'

  def key(self, length: int, draw: int) -> jax.Array:
    key = jax.random.fold_in(jax.random.fold_in(run_key(self.seed), streams.KEY_EVAL_POSITIONS), int(length))
    return jax.random.fold_in(key, int(draw))


@dataclasses.dataclass
class Evaluation:
  """One evaluation set's result: `metrics` (loss in nats per scored token, and the objective's own), and the
  loss against position: `position_loss[p]`, the mean loss (nats) of the tokens at position p of the
  window (NaN where none counts), over `position_tokens[p]` tokens (the whole window for the corpus, the
  scored positions for tasks; summed over the draws of random positions). `token_nll`, asked for with
  `token_losses=True`: each batch's (rows, T) float32 loss of every target, in the order of the set's batches."""

  metrics: dict[str, float]
  position_loss: np.ndarray
  position_tokens: np.ndarray
  token_nll: list[np.ndarray] | None = None


def evaluate(
    model: nnx.Module,
    batches: Iterable[Mapping[str, np.ndarray]],
    objective: Objective,
    *,
    mesh=None,
    use_padding_mask: bool = True,
    positions: EvalPositions | None = None,
) -> dict[str, float]:
  """Metrics of `model` over `batches` (deterministic; positions 0..T-1 unless `positions` says otherwise):
  loss in nats per scored token, and bits_per_char (language model) or accuracy and exact_match (tasks).
  Sums over all batches first, so the result is that of the whole set, however it was cut into batches."""
  mesh = sharding.make_mesh() if mesh is None else mesh
  parts, params = split_model(model)
  return _evaluate(
      parts, params, batches, objective, mesh=mesh, use_padding_mask=use_padding_mask, positions=positions
  ).metrics


def evaluate_set(
    model: nnx.Module,
    data,
    length: int,
    *,
    split: str = 'validation',
    positions: EvalPositions | None = None,
    mesh=None,
    token_losses: bool = False,
) -> Evaluation:
  """The evaluation of `model` on the data's set of `length` (`data.eval_set(length, split)`), with its
  loss against position: what a study records for one run and length; with `token_losses`, each target's loss
  too (`Evaluation.token_nll`; positions drawing once only)."""
  mesh = sharding.make_mesh() if mesh is None else mesh
  parts, params = split_model(model)
  return _evaluate(
      parts,
      params,
      data.eval_set(int(length), split),
      data.objective,
      mesh=mesh,
      use_padding_mask=data.uses_padding,
      positions=positions,
      token_losses=token_losses,
  )


def evaluate_lengths(
    model: nnx.Module,
    data,
    lengths: Sequence[int],
    *,
    mesh=None,
    split: str = 'validation',
    positions: EvalPositions | None = None,
) -> dict[int, dict]:
  """`{length: metrics}` on the data's evaluation set of each length (`data.eval_set(length, split)`)."""
  return {
      int(n): evaluate_set(model, data, int(n), split=split, positions=positions, mesh=mesh).metrics for n in lengths
  }


def _evaluate(
    parts: ModelParts,
    params,
    batches,
    objective: Objective,
    *,
    mesh,
    use_padding_mask,
    positions=None,
    token_losses: bool = False,
) -> Evaluation:
  positions = EvalPositions() if positions is None else positions
  if token_losses and positions.draws != 1:
    raise ValueError(
        f'evaluate: token_losses keeps one loss per target, so positions must draw once, not {positions.draws}.'
    )
  eval_step = make_eval_step(
      parts.graphdef,
      objective,
      mesh=mesh,
      use_padding_mask=use_padding_mask,
      encoder=positions.encoder,
      token_losses=token_losses,
  )
  rest = sharding.replicate(parts.rest, mesh)
  batches = list(batches) if positions.draws > 1 else batches  # Read once per draw.
  totals, token_nll = None, [] if token_losses else None
  for draw in range(positions.draws):
    row = 0
    for batch in batches:
      rows = batch['inputs'].shape[0]
      key = sharding.replicate(positions.key(batch['inputs'].shape[1], draw), mesh)
      batch = {**batch, 'row_ids': np.arange(row, row + rows, dtype=np.int32)}
      row += rows
      sums = eval_step(params, rest, sharding.shard_batch(batch, mesh), key)
      if token_losses:
        token_nll.append(sums.pop('token_nll'))  # fetched once after the loop, so dispatch runs ahead
      totals = sums if totals is None else jax.tree.map(jnp.add, totals, sums)
  if totals is None:
    raise ValueError('evaluate needs at least one batch, got none.')
  totals = jax.tree.map(lambda x: np.asarray(x, np.float64), jax.device_get(totals))
  if token_nll is not None:
    token_nll = [np.asarray(x) for x in jax.device_get(token_nll)]
  position_nll, position_tokens = totals.pop('position_nll'), totals.pop('position_tokens')
  with np.errstate(invalid='ignore', divide='ignore'):
    position_loss = np.where(position_tokens > 0, position_nll / position_tokens, np.nan)
  metrics = {k: float(v) for k, v in objective.finalize(totals).items()}
  return Evaluation(metrics=metrics, position_loss=position_loss, position_tokens=position_tokens, token_nll=token_nll)


# ------------------------------------------------------------------------------------------- training
@workdir_lock.one_writer()  # A second process writing the same workdir is refused (WorkdirBusyError).
def train(
    config,
    workdir: str | os.PathLike | None = None,
    *,
    devices: Sequence[jax.Device] | None = None,
    stop_after: int | None = None,
    hooks: Sequence[Hook] = (),
    data=None,
) -> TrainResult:
  """Trains the run described by `config` (validated first); resumes from `workdir` if it has checkpoints.

  Args:
    config: the run's `relpos_jax.train.config.Config`, or what `parse` takes (a ConfigDict from a file or a
      notebook, a dict), parsed here once.
    workdir: where config.json, metrics.jsonl and checkpoints go; None keeps everything in memory.
    devices: the devices of the data-parallel mesh (default: all).
    stop_after: stop once this many updates are applied (an interruption: no final evaluation, and a
      checkpoint only if the step falls on the `checkpoint_every` cadence; call again to resume).
    hooks: `hook(step, state, metrics)` at the end of every update, after its logging, evaluation and
      checkpoint request (step counts updates applied; metrics are device scalars). An exception raised
      by a hook stops the run like a kill would, except that a checkpoint save in flight still completes.
    data: the run's data, if already built (`build_data(config)`; e.g. one corpus load for many runs).
  """
  devices = list(jax.devices() if devices is None else devices)
  # The one parse (a Config passes through): everything below reads the typed Config, config.json included
  # (`Config.to_dict`: every key, defaults too; a resume compares it with `config.with_defaults`).
  run = config_lib.parse(config)
  config_lib.validate(run, num_devices=len(devices))
  mesh = sharding.make_mesh(devices)
  data = build_data(run) if data is None else data
  model = build_model(run)
  parts, params = split_model(model)
  del model
  total = run.train.steps
  optimizer = OptimizerSpec.from_config(run)
  schedule = optimizer.schedule_fn()
  state = sharding.replicate(init_train_state(params, optimizer.build()), mesh)
  is_chief = jax.process_index() == 0

  writer = metrics_lib.MetricsWriter(workdir, enabled=is_chief, tensorboard=tensorboard_lib.enabled(run.train))
  checkpoints = None
  start = 0
  if workdir is not None:
    workdir = os.fspath(workdir)
    epath.Path(workdir).mkdir(parents=True, exist_ok=True)
    records = _check_run_directory(run, data, workdir)  # Refuses before anything is written.
    checkpoints = Checkpoints(workdir, keep=run.train.keep_checkpoints)
    try:
      restored = checkpoints.restore_latest_intact(state, set_aside=is_chief)
    except BaseException:
      checkpoints.close(quiet=True)
      raise
    if restored is not None:
      state = restored
      start = int(jax.device_get(state.step))
      logging.info('resumed from %s at step %d', checkpoints.directory, start)
    if is_chief:
      _write_records(workdir, records)
    writer.truncate_after(start)

  logging.info(
      'training %s: %d parameters, %d devices, data %s',
      run.encoder_spec,
      count_params(state.params),
      len(devices),
      json.dumps(metrics_lib.to_python(data.describe())),
  )
  encoder = positions_encoder(run.encoder)  # Per-layer encoders share one position draw.
  eval_positions = EvalPositions.of(encoder, run.eval.position_draws, run.seed)
  train_step = make_train_step(
      parts.graphdef, data.objective, optimizer, encoder, mesh=mesh, use_padding_mask=data.uses_padding
  )
  rest = sharding.replicate(parts.rest, mesh)
  key = sharding.replicate(run_key(run.seed), mesh)
  eval_lengths = [int(n) for n in run.eval.lengths]
  extra_keys = (data.metric,)  # The source's headline metric on the progress line, beside the loss.
  throughput = metrics_lib.Throughput()
  guard = NonFiniteGuard(run.train.max_nonfinite_steps, mesh)  # The schema's default when the key is absent.
  last_record: dict = {}
  done = start
  end = total if stop_after is None else min(total, max(int(stop_after), start))
  batch_size = run.train.batch_size
  rows = sharding.local_rows(mesh, batch_size)  # This process's rows of every batch (all, in one process).
  failed = False
  try:
    for step in range(start, end):
      host_batch = data.train_batch(step, rows)
      state, step_metrics = train_step(state, rest, sharding.shard_local_batch(host_batch, mesh, batch_size), key)
      done = step + 1
      guard.update(step_metrics['finite'], step)
      # Every row of a batch holds as many real tokens (one length per batch): scale this process's count.
      throughput.add(int(np.sum(host_batch['padding_mask'])) * batch_size // (rows.stop - rows.start))
      if done % run.train.log_every == 0 or done == total:
        values = jax.device_get({k: v for k, v in step_metrics.items() if k != 'finite'})
        record = {
            'step': done,
            **{k: float(v) for k, v in values.items()},
            'lr': float(schedule(step)),
            'tokens_per_sec': throughput.rate(),
        }
        last_record = writer.write(record)
        logging.info('%s', metrics_lib.progress_line(done, total, record, extra_keys))
      side_start = time.perf_counter()
      evaluate_now = run.eval.every and done % run.eval.every == 0 and done < total and eval_lengths
      save_now = checkpoints is not None and (done % run.train.checkpoint_every == 0 or done == total)
      if evaluate_now or save_now or done % run.train.log_every == 0:
        guard.check(run)  # Before anything is evaluated or saved.
        if checkpoints is not None:
          checkpoints.check_for_errors()  # A failed background save stops the run here, not later.
      if evaluate_now:
        _eval_and_record(parts, state.params, data, eval_lengths, mesh, writer, done, eval_positions)
      if save_now:
        checkpoints.save(state)
      throughput.exclude(time.perf_counter() - side_start)
      for hook in hooks:
        hook(done, state, step_metrics)
    guard.check(run)
  except BaseException:
    failed = True
    writer.close()  # TensorBoard events written so far: flushed when interrupted too.
    raise
  finally:
    if checkpoints is not None:
      # Waits for a save in flight, so an interruption loses nothing written; a failed save raises here
      # unless another error is already on its way up.
      checkpoints.close(quiet=failed)

  final_metrics = dict(last_record or _last_training_record(writer.history))
  if done == total and eval_lengths:
    previous = [r for r in writer.history if r.get('step') == total and any(k.startswith('eval/') for k in r)]
    eval_record = (
        previous[-1]
        if previous
        else _eval_and_record(parts, state.params, data, eval_lengths, mesh, writer, total, eval_positions)
    )
    final_metrics.update({k: v for k, v in eval_record.items() if k != 'step'})
  writer.close()
  final_metrics['step'] = done
  return TrainResult(
      model=model_from(parts, state.params),
      state=state,
      parts=parts,
      final_metrics=final_metrics,
      history=list(writer.history),
      config=run,
      data=data,
      workdir=workdir,
      mesh=mesh,
  )


def _eval_and_record(parts, params, data, lengths, mesh, writer, step, positions=None) -> dict:
  """Validation metrics at every length (randomized encoders at random positions, as published)."""
  results = {
      n: _evaluate(
          parts,
          params,
          data.eval_set(n),
          data.objective,
          mesh=mesh,
          use_padding_mask=data.uses_padding,
          positions=positions,
      ).metrics
      for n in lengths
  }
  record = writer.write({'step': step, **metrics_lib.eval_record(results)})
  logging.info('eval at step %d: %s', step, metrics_lib.eval_summary(results))
  return record


def _last_training_record(history: list[dict]) -> dict:
  training = [r for r in history if 'loss' in r]
  return training[-1] if training else {}


class NonFiniteGuard:
  """Counts skipped (non-finite) updates on the device, without a host sync per step; `check` (at the
  loop's log, evaluation and checkpoint steps) raises DivergedError once `limit` came in a row."""

  def __init__(self, limit: int, mesh):
    self.limit = int(limit)
    # (non-finite updates in a row now, the update where they began, the first such run of `limit`: -1)
    self.counts = sharding.replicate(jnp.asarray([0, -1, -1], jnp.int32), mesh)

  def update(self, finite, step: int) -> None:
    self.counts = _count_nonfinite(self.counts, finite, jnp.int32(step), self.limit)

  def check(self, config) -> None:
    began = int(jax.device_get(self.counts)[2])
    if began < 0:
      return
    raise DivergedError(
        f'training diverged: the loss, gradient norm or updated state was not finite in {self.limit} '
        f'update(s) in a row from update {began + 1} (step {began} -> {began + 1}; '
        f'config.train.max_nonfinite_steps={self.limit}). Those updates were skipped and the run stopped: '
        f'its parameters and every checkpoint are finite. Lower config.optim.learning_rate (now '
        f'{config.optim.learning_rate}) or check the data.',
        step=began + 1,
        count=self.limit,
    )


@functools.partial(jax.jit, static_argnums=3)
def _count_nonfinite(counts, finite, step, limit):
  in_a_row = jnp.where(finite, 0, counts[0] + 1)
  began = jnp.where(finite, -1, jnp.where(in_a_row == 1, step, counts[1]))
  tripped = jnp.where((counts[2] < 0) & (in_a_row >= limit), began, counts[2])
  return jnp.stack([in_a_row, began, tripped])


# --------------------------------------------------------------------------------------- run directory
def _trajectory_view(config_dict: Mapping) -> dict:
  view = {}
  for key in TRAJECTORY_KEYS:
    node = config_dict
    for part in key.split('.'):
      node = node.get(part) if isinstance(node, Mapping) else None
    view[key] = node
  return view


def _flatten(prefix: str, value) -> dict:
  if isinstance(value, Mapping):
    out = {}
    for k, v in value.items():
      out.update(_flatten(f'{prefix}.{k}' if prefix else str(k), v))
    return out
  return {prefix: value}


def _read_json(path: epath.Path, what: str):
  try:
    return json.loads(path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise config_lib.ConfigError(
        f'{path} is not valid JSON ({e}); it is the record of {what} (truncated by a kill or a full disk?). '
        'Restore it, or use a new --workdir to start fresh.'
    ) from None


def data_identity(description: Mapping) -> dict:
  """What must not change for a run to be resumed: the corpus fingerprint (of its contents, wherever they
  are), or a task's whole description (`data.describe()`)."""
  description = metrics_lib.to_python(dict(description))
  if 'fingerprint' in description:
    return {'fingerprint': description['fingerprint']}
  return description


def _check_run_directory(run: config_lib.Config, data, workdir: str) -> dict[str, dict]:
  """Refuses to resume a run directory whose trajectory cannot be verified or differs (raises
  ConfigError, writes nothing). Returns the records {file name: content} to write once the resume is
  known to work. The configs are compared with their optional keys at the defaults (`config.with_defaults`):
  a config.json written from a ConfigDict that left them out is the same run as this one."""
  directory = epath.Path(workdir)
  current = {
      CONFIG_FILE: json.loads(json.dumps(run.to_dict())),
      DATA_FILE: metrics_lib.to_python(dict(data.describe())),
  }
  checkpoint_dir = directory / CHECKPOINT_DIR
  steps = (
      sorted((p.name for p in checkpoint_dir.iterdir() if p.name.isdigit()), key=int)
      if (checkpoint_dir.exists())
      else []
  )
  fresh = (
      'To start fresh, use a new --workdir or delete ' f'{checkpoint_dir} (and {directory / metrics_lib.METRICS_FILE}).'
  )
  for name in (CONFIG_FILE, DATA_FILE):
    if steps and not (directory / name).exists():
      raise config_lib.ConfigError(
          f'{workdir} holds checkpoints ({", ".join(steps[:5])}{", ..." if len(steps) > 5 else ""}) but no '
          f'{name}: the run that wrote them cannot be verified against this one, so it is not resumed. ' + fresh
      )
  path = directory / CONFIG_FILE
  if path.exists():
    saved = _read_json(path, f'the run in {workdir}')
    old = _flatten('', _trajectory_view(config_lib.with_defaults(saved) if isinstance(saved, Mapping) else {}))
    new = _flatten('', _trajectory_view(config_lib.with_defaults(current[CONFIG_FILE])))
    differences = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if differences:
      raise config_lib.ConfigError(
          f'{workdir} holds a run with a different config; it cannot be resumed with this one. '
          'Differences: '
          + '; '.join(f'config.{k}: {old.get(k)!r} there, {new.get(k)!r} here' for k in differences)
          + '. Use a new --workdir.'
      )
  path = directory / DATA_FILE
  if path.exists():
    old, new = data_identity(_read_json(path, f'the data of the run in {workdir}')), data_identity(current[DATA_FILE])
    if old != new:
      raise config_lib.ConfigError(
          f'{workdir} holds a run trained on other data: {old} there, {new} here (the corpus or the task '
          'changed); it cannot be resumed on this data. ' + fresh
      )
  return {name: content for name, content in current.items() if not (directory / name).exists()}


def _write_records(workdir: str, records: Mapping[str, dict]) -> None:
  for name, content in records.items():
    # Atomic: the other processes of a multi-process run read these records while the chief writes them.
    files.write_text_atomic(epath.Path(workdir) / name, json.dumps(content, indent=2, sort_keys=True))


def load_model(
    workdir: str | os.PathLike, config=None, *, step: int | None = None, devices: Sequence[jax.Device] | None = None
) -> tuple[nnx.Module, Any]:
  """(model, data) of a run directory at its latest (or given) checkpoint; config defaults to the
  directory's config.json."""
  workdir = os.fspath(workdir)
  if config is None:
    config = _read_json(epath.Path(workdir) / CONFIG_FILE, f'the run in {workdir}')
  run = config_lib.parse(config)
  devices = list(jax.devices() if devices is None else devices)
  mesh = sharding.make_mesh(devices)
  data = build_data(run)
  parts, params = split_model(build_model(run))
  like = sharding.replicate(init_train_state(params, OptimizerSpec.from_config(run).build()), mesh)
  with Checkpoints(workdir, keep=run.train.keep_checkpoints) as checkpoints:
    state = checkpoints.restore(like, step) if step is not None else checkpoints.restore_latest_intact(like)
  if state is None:
    raise ValueError(f'no checkpoint to load in {checkpoints.directory}.')
  return model_from(parts, state.params), data
