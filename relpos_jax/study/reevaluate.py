"""Evaluate a finished study's trained runs at other lengths, without retraining.

    results = reevaluate_study(config, workdir)   # config.study.trained_workdir: the study that trained them

For every encoder of `config.study.encoders` (labels as in the trained study) and every seed of
`config.study.seeds` (as in `run_study`), the trained run (the directory the trained study's results.json
names, else `<trained_workdir>/runs/<label>/seed<s>/`) is restored at the step it finished at with its own
training config. Only finished runs are evaluated: a run without a result.json that says it finished
(interrupted mid-training, or one whose step count falls short) is named and refused, and so is a run whose
checkpoint of that step cannot be read (never an older checkpoint in its place); each result records
`evaluated_step`. Evaluation follows the study's protocol (`relpos_jax.study.protocol`: `config.study.split`,
the same targets at every length, randomized encoders at random positions). Everything is taken from the
trained run's config except
for what `config` says about evaluation: `config.eval` (lengths, token budget, batch budget) and the
attention implementation (`config.model.attention_implementation` / `attention_block_size`, e.g.
'blockwise' to reach lengths whose (L, L) scores would not fit). The results have the layout of
`run_study`'s (results.json / .md / .png in `workdir`, one `runs/<label>/seed<s>/result.json` per run, kept
and skipped on the next call; mean ± std over seeds), plus each run's `trained_in` directory (relative to `workdir`, as
`run_study` records it) and step. A
trained run that diverged stays diverged (no values), as in the trained study.
"""

from __future__ import annotations

import json
import os
import time

import jax
from absl import logging
from flax import nnx

from relpos_jax.study import engine, plan, protocol, report
from relpos_jax.study import record as record_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train import loop, transfer, workdir_lock


def reevaluation_config(trained: config_lib.Config, base: config_lib.Config) -> config_lib.Config:
  """The trained run's config with `base`'s evaluation section and, when `base` names one, its attention
  implementation (with its block size): a base that leaves the implementation at None (automatic) keeps the
  trained run's."""
  model = base.model
  if model.attention_implementation is None:
    return trained.derive(eval=base.eval)
  return trained.derive(
      eval=base.eval, implementation=model.attention_implementation, block_size=model.attention_block_size
  )


def _trained_config(run_dir: str) -> config_lib.Config:
  path = os.path.join(run_dir, 'config.json')
  if not os.path.exists(path):
    raise config_lib.ConfigError(
        f'config.study.trained_workdir: {run_dir} holds no trained run ({path} is '
        'missing); run the trained study first (python -m '
        'experiments.length_generalization --workdir=...).'
    )
  return config_lib.parse(report.load_json(path))


def _trained_run_dir(trained_workdir: str, entry, seed: int) -> tuple[str, str]:
  """(The run directory of (entry, seed) in the trained study, how its learning rate was chosen there): the
  directory its results.json names (a run of a chosen learning rate lives under lr<rate>/) with that row's
  lr_choice, else runs/<label>/seed<s>, 'fixed'. An entry 'label: X -> Y' reads the trained study's run of X
  itself (the entry whose spec is X, trained as X), whatever its label there."""
  results_path = os.path.join(trained_workdir, 'results.json')
  if os.path.exists(results_path):
    for run in report.load_json(results_path).get('runs', []):
      if entry.eval_spec is None:
        same = run.get('name') == entry.label
      else:
        same = run.get('spec') == entry.spec and '->' not in str(run.get('spec')) and not run.get('sequential')
      if same and seed in run.get('seeds', []) and run.get('run_dirs'):
        relative = run['run_dirs'][run['seeds'].index(seed)]
        if relative:
          return os.path.join(trained_workdir, relative), run.get('lr_choice', 'fixed')
  if entry.eval_spec is not None:
    raise config_lib.ConfigError(
        f'config.study.encoders entry {entry.label!r} ({entry.spec} -> {entry.eval_spec}): the trained study '
        f'in {trained_workdir} has no finished run of {entry.spec!r} at seed {seed} in its results.json; '
        f"allowed: an entry whose trained spec is one of that study's encoders."
    )
  return os.path.join(trained_workdir, 'runs', entry.label, f'seed{seed}'), 'fixed'


def _finished_record(run_dir: str, trained: config_lib.Config) -> dict:
  """The trained run's result.json, which says it finished; an unfinished run is refused, named."""
  path = os.path.join(run_dir, record_lib.RESULT_FILE)
  rerun = (
      'finish it first (rerun the trained study: python -m experiments.length_generalization with its config '
      'and --workdir), or leave this encoder or seed out of config.study.encoders / config.study.seeds.'
  )
  if not os.path.exists(path):
    raise config_lib.ConfigError(
        f'config.study.trained_workdir: the run in {run_dir} has not finished (no {record_lib.RESULT_FILE}: it was '
        f'interrupted, so its checkpoint holds a partly trained model); {rerun}'
    )
  record = report.load_json(path)  # any record that says how far it got, a partial one too: refused below, named
  steps = int(trained.train.steps)
  finished = record.get('finished', True) and (record.get('diverged') or int(record.get('steps', -1)) == steps)
  if not finished:
    raise config_lib.ConfigError(
        f'config.study.trained_workdir: the run in {run_dir} did not finish: its {record_lib.RESULT_FILE} records '
        f'step {record.get("steps")} of config.train.steps={steps}; {rerun}'
    )
  return record


def _reevaluate_seed(
    entry,
    seed: int,
    trained_workdir: str,
    base,
    study,
    workdir: str,
    metric: str,
    results: dict,
    finished_only: bool = False,
) -> dict | None:
  """One (encoder, seed) of the trained study evaluated at `config.eval.lengths` (or read back from its
  result.json), from the checkpoint of the step the trained run finished at; with `finished_only`, only read
  back (None where it has not been evaluated)."""
  lengths = [int(n) for n in base.eval.lengths]
  run_dir, lr_choice = _trained_run_dir(trained_workdir, entry, seed)
  trained = _trained_config(run_dir)
  if trained.encoder_spec != entry.spec:
    raise config_lib.ConfigError(
        f'config.study.encoders entry {entry.label!r} is {entry.spec!r}, but '
        f'{run_dir} trained {trained.encoder_spec!r}.'
    )
  trained_record = _finished_record(run_dir, trained)
  config_r = reevaluation_config(trained, base)
  config_e = config_r
  if entry.eval_spec is not None:  # 'X -> Y': X's trained parameters evaluated with Y
    transfer.check_same_encoders(entry.spec, entry.eval_spec)
    config_e = transfer.with_eval_encoder(config_e, entry.eval_spec)
  result_path = os.path.join(workdir, 'runs', entry.label, f'seed{seed}', record_lib.RESULT_FILE)
  as_json = json.loads(json.dumps(config_e.to_dict()))

  def reuse(saved: record_lib.RunRecord) -> dict | None:
    """The saved evaluation where it asked the same (config, split); None: evaluated anew, over it."""
    saved = saved.to_json()
    # Optional keys at their defaults: a result written from a ConfigDict that left them out is the same run.
    same = isinstance(saved.get('config'), dict) and config_lib.with_defaults(
        saved['config']
    ) == config_lib.with_defaults(as_json)
    if not (same and saved.get('split') == study.split):
      return None
    logging.info('reevaluate: %s seed %d already done', entry.label, seed)
    # the trained study's word, read afresh
    return {**record_lib.in_current_keys(saved, workdir), 'lr_choice': f'trained: {lr_choice}'}

  def evaluate() -> record_lib.RunRecord:
    step = int(trained_record.get('steps', trained.train.steps))
    run = {  # the study's own keys of the record (RunRecord's values)
        'name': entry.label,
        'spec': entry.reported_spec,
        **({'train_spec': entry.spec} if entry.eval_spec is not None else {}),
        'trained_in': os.path.relpath(run_dir, workdir),  # relative to this workdir, as run_study writes it
        'steps': step,
        'learning_rate': float(trained.optim.learning_rate),
        'lr_choice': f'trained: {lr_choice}',  # chosen by the trained study, on its validation split
        'split': study.split,
        'train_metric': None,
        'train_loss': None,
    }
    diverged = trained_record.get('diverged')
    num_params = eval_seconds = None
    if diverged:  # No finite weights to evaluate.
      logging.warning('reevaluate: %s seed %d diverged in training (%s)', entry.label, seed, diverged)
      run['by_length'] = {str(n): None for n in lengths}
    else:
      logging.info('reevaluate: %s (%s) seed %d at %s', entry.label, entry.spec, seed, lengths)
      entry_started = time.perf_counter()
      try:  # The step it finished at, exactly: never an older checkpoint in place of a corrupt one.
        model, data = loop.load_model(run_dir, config_r, step=step)
      except Exception as e:  # noqa: BLE001 - any restore failure is this run's, named with its directory
        raise config_lib.ConfigError(
            f'config.study.trained_workdir: the checkpoint of step {step} in {run_dir} cannot be read ({e}); '
            'train that run again (remove its directory and rerun the trained study).'
        ) from None
      if entry.eval_spec is not None:
        model = transfer.with_encoder(model, config_r, entry.eval_spec)
      run.update(
          protocol.evaluate_run(
              model,
              data,
              lengths=lengths,
              split=study.split,
              train_length=plan.train_length(base),
              metric=metric,
              seed=seed,
              draws=data.eval_section.position_draws,
              sequential_row=study.sequential_positions,
              selection=False,
          )
      )
      run.update({'evaluated_step': step, 'finished': True, 'data': loop.data_identity(data.describe())})
      eval_seconds = round(time.perf_counter() - entry_started, 1)
      num_params = int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))
      diverged = protocol.diverged_marker(
          run,
          num_classes=data.num_classes,
          every_length=data.diverged_at_every_length,
          train_length=plan.train_length(base),
          step=step,
      )
      results['meta']['data'] = data.describe()
      results['meta']['corpus_fingerprint'] = data.describe().get('fingerprint')
    return record_lib.RunRecord(
        record_lib.LM_LAYOUT,
        seed,
        as_json,
        train_seconds=0.0,  # nothing trained here: the cost is the evaluation's
        values=run,
        num_params=num_params,
        eval_seconds=eval_seconds,
        diverged=diverged,
    )

  return engine.obtain_run(result_path, record_lib.LM_LAYOUT, reuse, None if finished_only else evaluate)


def check_separate_workdir(trained_workdir: str, workdir: str) -> None:
  """A re-evaluation writes `runs/<label>/seed<s>/result.json` and `results.*` in its workdir: in the trained
  study's own directory they would overwrite the trained runs' records (and that study would then refuse to
  resume). The same directory reached by another path (a symlink, a trailing slash) is the same directory."""
  if '://' not in str(trained_workdir) + str(workdir):
    same = os.path.realpath(trained_workdir) == os.path.realpath(workdir)
  else:
    same = str(trained_workdir).rstrip('/') == str(workdir).rstrip('/')
  if same:
    raise config_lib.ConfigError(
        f'config.study.trained_workdir={trained_workdir!r} is the --workdir of this re-evaluation ({workdir!r}): '
        "its results would overwrite the trained study's runs/<label>/seed<s>/result.json and results.*; "
        "allowed: a --workdir other than the trained study's, e.g. "
        f"{os.path.join(os.path.dirname(os.path.normpath(str(workdir))), 'reevaluated')!r}."
    )


def reevaluate_study(config, workdir: str | os.PathLike, finished_only: bool = False) -> dict:
  """Evaluates the runs of `config.study.trained_workdir` at `config.eval.lengths`; returns the results.
  `finished_only`: evaluate nothing new, and write the report of the (encoder, seed) evaluations finished so far
  (an evaluation cut short by its machine's time; the report's seeds column says which are missing)."""
  base, study = plan.split_study_config(config)  # The one parse of the user's config.
  return reevaluate_study_config(plan.StudyConfig(base, study), workdir, finished_only=finished_only)


def reevaluate_study_config(parsed: plan.StudyConfig, workdir: str | os.PathLike, finished_only: bool = False) -> dict:
  """`reevaluate_study` of a study already parsed."""
  base, study = parsed.base, parsed.study
  trained_workdir = study.trained_workdir
  if not trained_workdir:
    raise config_lib.ConfigError('config.study.trained_workdir is missing: the study whose runs to evaluate.')
  entries = plan.parse_entries(study.encoders)
  workdir = os.fspath(workdir)
  metric, _ = plan.metric_name(base)
  lengths = [int(n) for n in base.eval.lengths]
  plan.check_protocol(study, entries, lengths)
  plan.check_random_positions(base, entries)
  comparison_requests = plan.parse_comparisons(study, entries, lengths)
  seeds = plan.parse_seeds(study, base)
  check_separate_workdir(trained_workdir, workdir)
  # Every check above runs before the lock; one writer per directory, as for a trained study.
  with workdir_lock.held(workdir, enabled=jax.process_index() == 0):
    os.makedirs(workdir, exist_ok=True)
    return _reevaluate(
        base, study, entries, seeds, trained_workdir, workdir, metric, comparison_requests, finished_only
    )


def _reevaluate(
    base, study, entries, seeds, trained_workdir, workdir, metric, comparison_requests, finished_only=False
) -> dict:
  results = record_lib.new_results(
      base, study, seeds, comparison_requests, meta={'trained_workdir': str(trained_workdir)}
  )
  if finished_only:
    results['meta']['finished_only'] = True
  started = time.perf_counter()
  for entry in entries:
    per_seed = engine.seed_runs(  # the rate is the trained study's: no grid here
        seeds,
        lambda seed: _reevaluate_seed(
            entry, seed, trained_workdir, base, study, workdir, metric, results, finished_only
        ),
    )
    per_seed = [r for r in per_seed if r is not None]
    if not per_seed:  # finished_only: nothing of this entry evaluated yet
      continue
    run = record_lib.merge_seeds(entry, per_seed)
    run.update({key: per_seed[0][key] for key in ('learning_rate', 'lr_choice') if key in per_seed[0]})
    run['trained_in'] = [r['trained_in'] for r in per_seed]
    run['evaluated_steps'] = [r.get('evaluated_step') for r in per_seed]
    run['eval_seconds'] = round(sum(r.get('eval_seconds', 0.0) for r in per_seed), 1)
    results['runs'].append(run)
    if study.sequential_positions and any(r.get('sequential') for r in per_seed):
      results['runs'].append(record_lib.merge_seeds(entry, per_seed, sequential=True))
    results['meta']['wall_seconds'] = round(time.perf_counter() - started, 1)
    record_lib.write_outputs(results, workdir)
  record_lib.write_outputs(results, workdir)
  return results
