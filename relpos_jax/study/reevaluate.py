"""Evaluate a finished study's trained runs at other lengths, without retraining.

    results = reevaluate_study(config, workdir)   # config.study.trained_workdir: the study that trained them

For every encoder of `config.study.encoders` (labels as in the trained study) and every seed of
`config.study.seeds` (as in `run_study`), the run in `<trained_workdir>/runs/<label>/seed<s>/` is restored
at its last checkpoint with its own training config, except
for what `config` says about evaluation: `config.eval` (lengths, token budget, batch budget) and the
attention implementation (`config.model.attention_implementation` / `attention_block_size`, e.g.
'blockwise' to reach lengths whose (L, L) scores would not fit). The results have the layout of
`run_study`'s (results.json / .md / .png in `workdir`, one `runs/<label>/seed<s>/result.json` per run, kept
and skipped on the next call; mean ± std over seeds), plus each run's `trained_in` directory and step. A
trained run that diverged stays diverged (no values), as in the trained study.
"""

from __future__ import annotations

import json
import os
import time

import jax
import ml_collections
from absl import logging
from flax import nnx

from relpos_jax.study import report, runner
from relpos_jax.train import config as config_lib

# What a re-evaluation may change in a trained run's config; everything else is the trained run's.
EVAL_MODEL_FIELDS = ('attention_implementation', 'attention_block_size')


def eval_config(trained: ml_collections.ConfigDict, config) -> ml_collections.ConfigDict:
  """The trained run's config with `config`'s evaluation section and attention implementation."""
  out = ml_collections.ConfigDict(trained.to_dict())
  out.eval = ml_collections.ConfigDict(config.eval.to_dict())
  for field in EVAL_MODEL_FIELDS:
    if field in config.model:
      out.model[field] = config.model[field]
  return out


def _trained_config(run_dir: str) -> ml_collections.ConfigDict:
  path = os.path.join(run_dir, 'config.json')
  if not os.path.exists(path):
    raise config_lib.ConfigError(
        f'config.study.trained_workdir: {run_dir} holds no trained run ({path} is '
        'missing); run the trained study first (python -m '
        'experiments.length_generalization --workdir=...).'
    )
  with open(path) as f:
    return ml_collections.ConfigDict(json.load(f))


def _reevaluate_seed(
    entry, seed: int, trained_workdir: str, base, workdir: str, metric: str, lengths, results: dict
) -> dict:
  """One (encoder, seed) of the trained study evaluated at `lengths` (or read back from its result.json)."""
  from relpos_jax.train import loop

  run_dir = os.path.join(trained_workdir, 'runs', entry.label, f'seed{seed}')
  trained = _trained_config(run_dir)
  if trained.model.encoder != entry.spec:
    raise config_lib.ConfigError(
        f'config.study.encoders entry {entry.label!r} is {entry.spec!r}, but '
        f'{run_dir} trained {trained.model.encoder!r}.'
    )
  config_e = eval_config(trained, base)
  result_path = os.path.join(workdir, 'runs', entry.label, f'seed{seed}', runner.RESULT_FILE)
  as_json = json.loads(config_e.to_json_best_effort())
  if os.path.exists(result_path) and report.load_json(result_path).get('config') == as_json:
    logging.info('reevaluate: %s seed %d already done', entry.label, seed)
    return report.load_json(result_path)
  run = {
      'name': entry.label,
      'spec': entry.spec,
      'seed': seed,
      'trained_in': run_dir,
      'steps': int(trained.train.steps),
      'train_metric': None,
      'train_loss': None,
      'train_seconds': 0.0,
      'config': as_json,
  }
  trained_result = os.path.join(run_dir, runner.RESULT_FILE)
  diverged = os.path.exists(trained_result) and report.load_json(trained_result).get('diverged')
  if diverged:  # No finite weights to evaluate.
    logging.warning('reevaluate: %s seed %d diverged in training (%s)', entry.label, seed, diverged)
    run.update({'by_length': {str(n): None for n in lengths}, 'steps': diverged['step'], 'diverged': diverged})
  else:
    logging.info('reevaluate: %s (%s) seed %d at %s', entry.label, entry.spec, seed, lengths)
    entry_started = time.perf_counter()
    model, data = loop.load_model(run_dir, config_e)
    by_length = {}
    for n in lengths:
      length_started = time.perf_counter()
      by_length[str(n)] = loop.evaluate_lengths(model, data, [n])[n][metric]
      logging.info(
          'reevaluate: %s seed %d at %d: %.4f (%.0f s)',
          entry.label,
          seed,
          n,
          by_length[str(n)],
          time.perf_counter() - length_started,
      )
    run.update(
        {
            'by_length': by_length,
            'eval_seconds': round(time.perf_counter() - entry_started, 1),
            'num_params': int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))),
            'data': loop.data_identity(data.describe()),
        }
    )
    results['meta']['data'] = data.describe()
    results['meta']['corpus_fingerprint'] = data.describe().get('fingerprint')
  os.makedirs(os.path.dirname(result_path), exist_ok=True)
  report.write_json(run, result_path)
  return run


def reevaluate_study(config, workdir: str | os.PathLike) -> dict:
  """Evaluates the runs of `config.study.trained_workdir` at `config.eval.lengths`; returns the results."""
  base, study = runner.split_config(config)
  trained_workdir = study.trained_workdir
  if not trained_workdir:
    raise config_lib.ConfigError('config.study.trained_workdir is missing: the study whose runs to evaluate.')
  entries = runner.parse_entries(study.encoders)
  workdir = os.fspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  metric, lower_is_better = runner.metric_name(base)
  lengths = [int(n) for n in base.eval.lengths]
  results = {
      'metric': metric,
      'lower_is_better': lower_is_better,
      'train_length': runner.train_length(base),
      'eval_lengths': lengths,
      'runs': [],
      'meta': {
          'title': study.title,
          'description': study.description,
          'trained_workdir': str(trained_workdir),
          'config': json.loads(base.to_json_best_effort()),
          **runner._environment(),
      },
  }
  seeds = runner.parse_seeds(study, base)
  results['seeds'] = list(seeds)
  started = time.perf_counter()
  for entry in entries:
    per_seed = [
        _reevaluate_seed(entry, seed, trained_workdir, base, workdir, metric, lengths, results) for seed in seeds
    ]
    run = runner.merge_seeds(entry, per_seed)
    run['trained_in'] = [r['trained_in'] for r in per_seed]
    run['eval_seconds'] = round(sum(r.get('eval_seconds', 0.0) for r in per_seed), 1)
    results['runs'].append(run)
    results['meta']['wall_seconds'] = round(time.perf_counter() - started, 1)
    runner.write_outputs(results, workdir)
  runner.write_outputs(results, workdir)
  return results
