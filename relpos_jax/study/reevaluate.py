"""Evaluate a finished study's trained runs at other lengths, without retraining.

    results = reevaluate_study(config, workdir)   # config.study.trained_workdir: the study that trained them

For every encoder of `config.study.encoders` (labels as in the trained study), the run in
`<trained_workdir>/runs/<label>/` is restored at its last checkpoint with its own training config, except
for what `config` says about evaluation: `config.eval` (lengths, token budget, batch budget) and the
attention implementation (`config.model.attention_implementation` / `attention_block_size`, e.g.
'blockwise' to reach lengths whose (L, L) scores would not fit). The results have the layout of
`run_study`'s (results.json / .md / .png in `workdir`, one `runs/<label>/result.json` per encoder, kept
and skipped on the next call), plus each run's `trained_in` directory and step.
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
    raise config_lib.ConfigError(f'config.study.trained_workdir: {run_dir} holds no trained run ({path} is '
                                 'missing); run the trained study first (python -m '
                                 'experiments.length_generalization --workdir=...).')
  with open(path) as f:
    return ml_collections.ConfigDict(json.load(f))


def reevaluate_study(config, workdir: str | os.PathLike) -> dict:
  """Evaluates the runs of `config.study.trained_workdir` at `config.eval.lengths`; returns the results."""
  from relpos_jax.train import loop

  base, study = runner.split_config(config)
  trained_workdir = study.trained_workdir
  if not trained_workdir:
    raise config_lib.ConfigError('config.study.trained_workdir is missing: the study whose runs to evaluate.')
  entries = runner.parse_entries(study.encoders)
  workdir = os.fspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  metric, lower_is_better = runner.metric_name(base)
  lengths = [int(n) for n in base.eval.lengths]
  results = {'metric': metric, 'lower_is_better': lower_is_better, 'train_length': runner.train_length(base),
             'eval_lengths': lengths, 'runs': [],
             'meta': {'title': study.title, 'description': study.description,
                      'trained_workdir': str(trained_workdir),
                      'config': json.loads(base.to_json_best_effort()), **runner._environment()}}
  started = time.perf_counter()
  for entry in entries:
    run_dir = os.path.join(trained_workdir, 'runs', entry.label)
    trained = _trained_config(run_dir)
    if trained.model.encoder != entry.spec:
      raise config_lib.ConfigError(f'config.study.encoders entry {entry.label!r} is {entry.spec!r}, but '
                                   f'{run_dir} trained {trained.model.encoder!r}.')
    config_e = eval_config(trained, base)
    result_path = os.path.join(workdir, 'runs', entry.label, runner.RESULT_FILE)
    as_json = json.loads(config_e.to_json_best_effort())
    if os.path.exists(result_path) and report.load_json(result_path).get('config') == as_json:
      logging.info('reevaluate: %s already done', entry.label)
      results['runs'].append(report.load_json(result_path))
      continue
    logging.info('reevaluate: %s (%s) at %s', entry.label, entry.spec, lengths)
    entry_started = time.perf_counter()
    model, data = loop.load_model(run_dir, config_e)
    by_length = {}
    for n in lengths:
      length_started = time.perf_counter()
      by_length[str(n)] = loop.evaluate_lengths(model, data, [n])[n][metric]
      logging.info('reevaluate: %s at %d: %.4f (%.0f s)', entry.label, n, by_length[str(n)],
                   time.perf_counter() - length_started)
    run = {'name': entry.label, 'spec': entry.spec, 'by_length': by_length, 'trained_in': run_dir,
           'steps': int(trained.train.steps), 'eval_seconds': round(time.perf_counter() - entry_started, 1),
           'num_params': int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))),
           'config': as_json}
    os.makedirs(os.path.dirname(result_path), exist_ok=True)
    report.write_json(run, result_path)
    results['runs'].append(run)
    results['meta']['data'] = data.describe()
    results['meta']['corpus_fingerprint'] = data.describe().get('fingerprint')
    results['meta']['wall_seconds'] = round(time.perf_counter() - started, 1)
    runner.write_outputs(results, workdir)
  runner.write_outputs(results, workdir)
  return results
