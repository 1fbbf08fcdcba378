"""A model-size ladder: one study per rung (configs/studies/study_scale_ladder.py), its records kept in the repo
so that a ladder outlives the machine it runs on, and one page that sets the rungs side by side.

    python -m experiments.scale_ladder --workdir=/work/runs/ladder      # train (resumes), export after each encoder
    python -m relpos_jax.study.ladder_page docs/study_scale_ladder         # the page, from the committed records

Records. A rung's workdir is a study workdir (`relpos_jax.study.runner`); `export_records` copies what a finished
run leaves besides its checkpoints (result.json, config.json, data.json, metrics.jsonl) into docs/<ladder>/<rung>/
runs/..., and `import_records` copies them back into a fresh workdir, where the study reuses every run whose
result.json is there (it compares the run's config and data) and trains only the rest: a later session resumes
from what was committed. An unfinished run has no result.json and starts again from step 0 there.

Checks (`check_ladder`), before any run starts: BPE tokens need the package `tokenizers`, and a rung must fit this
machine's memory by `memory_estimate` (what training and the longest evaluation hold at once), each refused with
the key named.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Iterable

from relpos_jax.data import bpe
from relpos_jax.study import report, runner
from relpos_jax.train import config as config_lib

# A finished run's files that the page and a resumed study read; checkpoints are left behind (a finished run
# never reads them again: its result.json is reused).
RECORD_FILES = ('result.json', 'config.json', 'data.json', 'metrics.jsonl')
# A rung may take at most this share of the machine's memory (the 2-core machine is shared by several jobs).
MEMORY_FRACTION = 0.5
_FLOAT = 4  # bytes: every rung trains in float32
# Activations a transformer block keeps per token for the backward pass, in units of d_model (q, k, v, the
# attention output, two residual streams, two norms, and the MLP's hidden layer and its activation at ratio 4:
# 4 + 2 + 2 + 2 * 4 = 16, rounded up).
_ACTIVATIONS_PER_TOKEN = 20


def param_estimate(model) -> int:
  """Parameters of the causal LM (embedding and unembedding V x d, each block's 4 d^2 attention and 2 m d^2 MLP
  weights; biases, norms and the encoders' few parameters left out): 231,360 counted vs 229,376 here at d64."""
  d, vocab = int(model['model_dim']), int(model['vocab_size'])
  return 2 * vocab * d + int(model['num_layers']) * (4 + 2 * int(model['mlp_ratio'])) * d * d


def memory_estimate(config: dict) -> int:
  """Bytes a run of `config` (a run config as a dict: `Config.to_dict()`) holds at its peak, the larger of
  training (parameters, gradients and Adam's two moments, 16 bytes a parameter; each layer's activations and
  its B H T^2 attention probabilities; the logits) and the evaluation at the longest length (the parameters;
  one batch of eval.max_tokens_per_batch tokens through one layer, with its windows' H L^2 scores, and the
  logits). An estimate to refuse a rung that cannot fit, not a measurement."""
  model, train, evaluation = config['model'], config['train'], config['eval']
  model = {**model, 'vocab_size': config['data'].get('vocab_size') or 256}
  params = param_estimate(model)
  d, heads, layers, vocab = (int(model[k]) for k in ('model_dim', 'num_heads', 'num_layers', 'vocab_size'))
  tokens = int(train['batch_size']) * int(config['data']['train_length'])
  length = int(config['data']['train_length'])
  training = (
      16 * params
      + _FLOAT * tokens * layers * (_ACTIVATIONS_PER_TOKEN * d + heads * length)
      + 3 * _FLOAT * (tokens * vocab)
  )
  longest = max([int(n) for n in evaluation.get('lengths') or ()] or [length])
  batch = int(evaluation.get('max_tokens_per_batch') or int(evaluation['batch_size']) * longest)
  batch = max(batch, longest)
  windows = max(batch // longest, 1)
  evaluating = (
      _FLOAT * params
      + _FLOAT * batch * (_ACTIVATIONS_PER_TOKEN * d + 2 * vocab)
      + 2 * _FLOAT * windows * heads * longest * longest
  )
  return max(training, evaluating)


def physical_memory() -> int:
  return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')


def check_fits(config: dict, rung: str, available: int | None = None) -> None:
  """ConfigError naming the rung's size keys when `memory_estimate` exceeds MEMORY_FRACTION of `available`
  bytes (default: this machine's physical memory)."""
  available = physical_memory() if available is None else int(available)
  need = memory_estimate(config)
  if need > MEMORY_FRACTION * available:
    model = config['model']
    raise config_lib.ConfigError(
        f"ladder rung {rung!r}: config.model.model_dim={model['model_dim']} with num_layers={model['num_layers']} "
        f"and num_heads={model['num_heads']} is invalid here: it needs about {need / 2**30:.1f} GiB to train and "
        f'evaluate (relpos_jax.study.ladder.memory_estimate) and this machine allows {MEMORY_FRACTION:.0%} of '
        f'{available / 2**30:.1f} GiB; allowed: a smaller rung (model_dim, num_layers), a smaller '
        'config.eval.max_tokens_per_batch, or a machine with more memory.'
    )


def check_tokenizer(config: dict) -> None:
  """ConfigError naming config.data.tokenizer when it is 'bpe' and `tokenizers` cannot be imported."""
  if config['data'].get('tokenizer') != 'bpe':
    return
  try:
    bpe.require_tokenizers()  # only whether it imports
  except ImportError:
    raise config_lib.ConfigError(
        f"config.data.tokenizer='bpe' needs the package tokenizers, which is not installed: install it with "
        f"`{bpe.INSTALL}`, or allowed: config.data.tokenizer='bytes'."
    ) from None


def check_ladder(rungs: Iterable[tuple[str, object]], available: int | None = None) -> None:
  """Every (rung name, study ConfigDict) of a ladder passes `check_tokenizer` and `check_fits`, before any trains."""
  for rung, config in rungs:
    values = config.to_dict() if hasattr(config, 'to_dict') else config
    check_tokenizer(values)
    check_fits(values, rung, available)


def _copy_records(source: str, destination: str, overwrite: bool) -> int:
  """Copies RECORD_FILES of every finished run (a folder with a result.json) under source/runs to the same place
  under destination; returns how many runs were copied."""
  copied = 0
  runs = os.path.join(source, 'runs')
  for root, dirs, names in os.walk(runs):
    dirs[:] = sorted(d for d in dirs if d not in ('checkpoints', 'broken_checkpoints'))
    if 'result.json' not in names:
      continue
    target = os.path.join(destination, os.path.relpath(root, source))
    if not overwrite and os.path.exists(os.path.join(target, 'result.json')):
      continue
    os.makedirs(target, exist_ok=True)
    for name in RECORD_FILES:
      if name in names:
        shutil.copyfile(os.path.join(root, name), os.path.join(target, name))
    copied += 1
  return copied


def export_records(workdir: str, docs_rung: str) -> int:
  """The finished runs of a rung's workdir into its docs folder (checkpoints left out); returns the count."""
  return _copy_records(workdir, docs_rung, overwrite=True)


def import_records(docs_rung: str, workdir: str) -> int:
  """The committed finished runs into a rung's workdir where it lacks them (a fresh machine resumes from them)."""
  return _copy_records(docs_rung, workdir, overwrite=False)


# ----------------------------------------------------------------------------------------------- the edge check
# A rung's edge check (the cross-corpus protocol's, docs/study_edge_cross_corpus): each encoder whose rate chosen
# from the grid was the grid's top trains again one rung past it at the selection seed, scored on validation at the
# training length as the grid was (`runner.edge_check`); the choice stands where that loss is higher.
EDGE_FILE = 'edge.json'


def top_choosers(results: dict) -> list[str]:
  """The labels of a rung's rows whose rate was chosen from the grid and is the grid's top."""
  grid = [float(r) for r in results['protocol'].get('lr_grid') or ()]
  if not grid:
    return []
  return [
      row['name']
      for row in results['runs']
      if row.get('lr_choice') == 'grid' and row.get('lr_grid') and float(row['learning_rate']) == max(grid)
  ]


def edge_record(results: dict, beyond: dict[str, dict[str, float]], rate: float, run_seconds: float) -> dict:
  """What EDGE_FILE holds, in docs/study_edge_cross_corpus's per-study shape: the rate past the grid, the
  selection seed, and per checked encoder its validation losses there ('beyond') and on the grid ('grid')."""
  grids = {row['name']: row['lr_grid'] for row in results['runs']}
  return {
      'rate': float(rate),
      'selection_seed': results['protocol'].get('selection_seed'),
      'encoders': {label: {'beyond': dict(losses), 'grid': dict(grids[label])} for label, losses in beyond.items()},
      'run_seconds': round(float(run_seconds), 1),
  }


def edge_verdict(edge: dict) -> dict:
  """{'checked', 'moved' (labels whose loss past the grid is below the grid's best), 'margin' (the smallest
  loss past the grid minus the grid's best, over the checked encoders; None without any)}."""
  margins = {
      label: min(e['beyond'].values()) - min(e['grid'].values()) for label, e in sorted(edge['encoders'].items())
  }
  return {
      'checked': sorted(margins),
      'moved': sorted(label for label, m in margins.items() if m < 0),
      'margin': min(margins.values()) if margins else None,
  }


def check_edge(config, results: dict, rung_dir: str, docs_rung: str, rate: float, train_fn=None) -> dict | None:
  """A rung's edge check, resumable: the encoders of `results` that chose the grid's top and are not yet in
  docs_rung/EDGE_FILE train at `rate` at the selection seed (`runner.edge_check` on the rung's study `config`, in
  `rung_dir`), and the file gains them. Returns the file's content; None when no encoder chose the top."""
  top = top_choosers(results)
  if not top:
    return None
  path = os.path.join(docs_rung, EDGE_FILE)
  edge = report.load_json(path) if os.path.exists(path) else None
  missing = [label for label in top if label not in (edge or {}).get('encoders', {})]
  if missing:
    started = time.perf_counter()
    beyond = runner.edge_check(config, rung_dir, (rate,), encoders=missing, train_fn=train_fn)
    new = edge_record(results, beyond, rate, time.perf_counter() - started)
    if edge is not None:
      new['encoders'] = {**edge['encoders'], **new['encoders']}
      new['run_seconds'] = round(edge['run_seconds'] + new['run_seconds'], 1)
    os.makedirs(docs_rung, exist_ok=True)
    report.write_json(new, path, indent=1)
    edge = new
  return edge
