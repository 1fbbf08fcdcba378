r"""The accelerator's measurements in one command, sized for a 9-minute call on one H100 or H200 (or a TPU):

    python -m benchmarks.accelerator            # (a) then (b); writes docs/benchmarks_gpu.md and the ladder's rung

(a) Attention on the device: forward+backward time and compiled memory of the attention core for every kind of
    position term (benchmarks/blockwise.py's ENCODERS: scalar biases, rotary, vector-relative, contextual,
    normalizer, temperature, remaps, score transforms) at L = 2,048, 8,192 and 32,768, on the library's default path
    (dot_product_attention on an accelerator, the explicit path for the kinds it cannot take), `blockwise` and
    `pallas` (compiled: Triton on GPU, Mosaic on TPU; interpret mode on CPU), against `jax.nn.dot_product_attention`
    with no position term through its XLA and cuDNN implementations. q, k, v (1, L, 8, 64) float32, causal, as in
    docs/benchmarks.md. A path that cannot run a row (unsupported kind, out of memory, no cuDNN on this backend) is a
    row with the reason, never a crash; rows still unmeasured when ATTENTION_BUDGET_S is spent say so. Memory is
    XLA's compiled total (argument + output - alias + temp) of the forward+backward program: the peak it plans for.

(b) The ladder's next rung (configs/studies/study_scale_ladder.py, ACCELERATOR_RUNG: 8 layers, d_model 512, ~26M
    parameters) trained and evaluated by the ladder's protocol at seeds 0-2, its records and results added to
    docs/study_scale_ladder/<rung>/ and the ladder's page regenerated, the device named there. One deviation, said
    on the page by the records: the rate is not searched at this rung (a grid of three rates would triple the runs
    the call cannot hold); each encoder takes the rate its largest finished CPU rung chose (`inherited_rates`). Runs
    start while LADDER_BUDGET_S lasts; an unfinished rung resumes in the next call from the committed records.

Budget (9 minutes = 540 s): (a) at most ATTENTION_BUDGET_S = 200 s of measuring after start-up, (b) at most
LADDER_BUDGET_S = 270 s of starting runs, a run's evaluation included, plus the page: about 8 minutes with
compilation. The split is an estimate: this script has not run on an accelerator yet (none was lent); a test runs
it end to end on CPU at a toy size (tests/benchmarks/test_accelerator.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import jax

from benchmarks import attention_kinds, blockwise, measure, report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENGTHS = (2048, 8192, 32768)
ATTENTION_BUDGET_S = 200.0
LADDER_BUDGET_S = 270.0
# The paths of (a): the library's (None = its default on this backend, blockwise, pallas), then plain attention.
LIBRARY_PATHS = (None, 'blockwise', 'pallas')
PLAIN_PATHS = ('xla', 'cudnn')
TOY = {'lengths': (32,), 'rows': ('alibi', 'fire'), 'repeats': 1}  # fire: a kind pallas refuses, a skipped row


class BudgetSpent(Exception):
  """Raised by the ladder's train function when no new run may start."""


def _reason(error: BaseException) -> str:
  """The first line of an error, short enough for a table cell (no traceback: the row says why it was skipped)."""
  text = (str(error).strip().splitlines() or [type(error).__name__])[0]
  text = text.replace('|', '/')
  return f'{type(error).__name__}: {text[:160]}'


def _plain(implementation):
  def fn(q, k, v, params):
    del params
    return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=implementation)

  return fn


def _contender(row: str, path) -> tuple:
  """(fn, params) of one row on one path; raises what the path raises for an unsupported row."""
  if row == 'plain':
    return _plain(path), []
  spec = {name: s for name, s, *_ in blockwise.ENCODERS}[row]
  parts, params = blockwise._parts(spec)
  return blockwise.core(parts, path), params


def measure_one(row: str, path, length: int, repeats: int) -> dict:
  """{'ms': forward+backward median, 'mib': compiled total} or {'skipped': reason}."""
  try:
    q, k, v, cotangent = attention_kinds.inputs(length)
    fn, params = _contender(row, path)
    backward = attention_kinds.with_backward(fn)
    memory = measure.compiled_memory(backward, (q, k, v, params, cotangent))
    thunk = measure.compiled_call(backward, (q, k, v, params, cotangent))
    jax.block_until_ready(thunk())  # the first call outside the timing: a kernel that fails to run fails here
    timing = measure.time_interleaved({'one': thunk}, repeats=repeats, warmup=0)['one']
    return {'ms': timing.median * 1e3, 'mib': measure.mib(memory.total)}
  except Exception as e:  # noqa: BLE001 -- every failure of one path is that row's finding, not the script's end
    return {'skipped': _reason(e)}


def attention_section(lengths, rows, repeats: int, budget_s: float) -> report.Section:
  backend = jax.default_backend()
  pallas_mode = 'interpret mode (CPU: correctness, not speed)' if backend == 'cpu' else 'compiled'
  section = report.Section(
      title='A. Attention on the accelerator: forward+backward time and compiled memory',
      timed=(
          f'Backend {backend}, device {jax.devices()[0].device_kind}. The attention core (benchmarks/blockwise.py '
          f'`core`) for q, k, v (1, L, {attention_kinds.NUM_HEADS}, {attention_kinds.HEAD_DIM}) float32, causal: '
          'the VJP with a cotangent, gradients w.r.t. q, k, v and the encoder params, median of '
          f'{repeats} calls after one untimed call. Paths: default (the library on this backend), blockwise, pallas '
          f'({pallas_mode}); `plain` is jax.nn.dot_product_attention with no position term, implementation xla or '
          "cudnn. Memory: XLA's compiled total of the forward+backward program, MiB."
      ),
      columns=['L', 'row', 'path', 'fwd+bwd ms', 'memory MiB', 'note'],
  )
  started = time.perf_counter()
  for length in lengths:
    plan = [('plain', p) for p in PLAIN_PATHS] + [(row, p) for row in rows for p in LIBRARY_PATHS]
    for row, path in plan:
      name = path or 'default'
      if time.perf_counter() - started > budget_s:
        section.add_row(length, row, name, '—', '—', f'not measured: the {budget_s:.0f} s budget of (a) was spent')
        continue
      result = measure_one(row, path, length, repeats)
      if 'skipped' in result:
        section.add_row(length, row, name, '—', '—', f'skipped: {result["skipped"]}')
      else:
        section.add_row(length, row, name, f'{result["ms"]:.2f}', f'{result["mib"]:.1f}', '')
  section.notes.append(f'(a) took {time.perf_counter() - started:.0f} s.')
  return section


def inherited_rates(ladder_docs: str, labels) -> tuple[str, tuple[str, ...]]:
  """(rung, 'label: lr' per label): the rates the largest CPU rung with a results.json chose (the reused rung's at
  least)."""
  from relpos_jax.study import ladder_page

  config = ladder_page.ladder_config()
  paths = ladder_page.rung_paths(ladder_docs)
  for rung in reversed(config.CPU_RUNGS):
    if not os.path.exists(paths[rung]):
      continue
    results = ladder_page.report.load_json(paths[rung])
    rates = {run['name']: run['learning_rate'] for run in results['runs'] if 'learning_rate' in run}
    if all(label in rates for label in labels):
      return rung, tuple(f'{label}: {rates[label]}' for label in labels)
  raise ValueError(f'accelerator: no CPU rung under {ladder_docs!r} has chosen a rate for every one of {list(labels)}.')


def ladder_rung_config(ladder_docs: str, toy: bool):
  from relpos_jax import resources

  ladder = resources.config_module('studies/study_scale_ladder')
  config = ladder.get_config(ladder.ACCELERATOR_RUNG)
  config.study.seeds = (0,) if toy else (0, 1, 2)
  labels = [entry.partition(':')[0].strip() for entry in config.study.encoders]
  source, config.study.learning_rates = inherited_rates(ladder_docs, labels)
  # What the page says of this rung (results.json keeps the description): the device, and the rates' origin.
  config.study.description += (
      f' Trained on {jax.devices()[0].device_kind} by benchmarks/accelerator.py, each encoder at the learning rate '
      f'rung {source} chose (not searched at this rung).'
  )
  if toy:  # seconds on a CPU: the same code path, nothing of the rung's size
    config.study.encoders = config.study.encoders[:2]
    config.study.learning_rates = config.study.learning_rates[:2]
    config.study.comparisons = ()
    config.model.update({'num_layers': 1, 'model_dim': 16, 'num_heads': 2})
    config.train.steps = 2
    config.train.log_every = 1
    config.train.checkpoint_every = 2
    config.optim.warmup_steps = 1
    config.eval.lengths = (64, 128)
    config.eval.num_tokens = 256
  return ladder.ACCELERATOR_RUNG, config


def run_ladder_rung(ladder_docs: str, workdir: str, budget_s: float, toy: bool) -> str:
  """Trains the accelerator rung while the budget lasts, exports its records and regenerates the page."""
  from experiments import scale_ladder
  from relpos_jax.study import ladder, run_study
  from relpos_jax.train import loop

  rung, config = ladder_rung_config(ladder_docs, toy)
  ladder.check_ladder([(rung, config)])
  rung_dir, docs_rung = os.path.join(workdir, rung), os.path.join(ladder_docs, rung)
  ladder.import_records(docs_rung, rung_dir)
  started = time.perf_counter()

  def train_fn(*args, **kwargs):
    if time.perf_counter() - started > budget_s:
      raise BudgetSpent(f'the {budget_s:.0f} s budget of (b) was spent')
    return loop.train(*args, **kwargs)

  try:
    run_study(config, rung_dir, train_fn=train_fn)
    state = 'every run finished'
  except BudgetSpent as e:
    state = f'stopped: {e}; the next call resumes from the exported records'
  scale_ladder.refresh_rung(rung, workdir, os.path.dirname(docs_rung), config=config)
  return f'(b) rung {rung} on {jax.devices()[0].device_kind}: {state} ({time.perf_counter() - started:.0f} s).'


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--toy', action='store_true', help='a CPU-sized run of both parts (the test)')
  parser.add_argument('--out', default=os.path.join(REPO, 'docs', 'benchmarks_gpu.md'))
  parser.add_argument('--ladder_docs', default=os.path.join(REPO, 'docs', 'study_scale_ladder'))
  parser.add_argument('--workdir', default=os.path.join('results', 'ladder_accelerator'))
  parser.add_argument('--skip_ladder', action='store_true', help='(a) only')
  args = parser.parse_args(argv)
  lengths = TOY['lengths'] if args.toy else LENGTHS
  rows = TOY['rows'] if args.toy else tuple(name for name, *_ in blockwise.ENCODERS)
  repeats = TOY['repeats'] if args.toy else 3
  section = attention_section(lengths, rows, repeats, ATTENTION_BUDGET_S)
  if not args.skip_ladder:
    try:
      section.notes.append(run_ladder_rung(args.ladder_docs, args.workdir, LADDER_BUDGET_S, args.toy))
    except Exception as e:  # noqa: BLE001 -- (a)'s measurements are written whatever (b) does
      traceback.print_exc()
      section.notes.append(f'(b) failed: {_reason(e)}')
  command = 'python -m benchmarks.accelerator' + (' --toy' if args.toy else '')
  with open(args.out, 'w') as f:
    f.write(report.document([section], command))
  print(args.out)
  print('\n'.join(section.notes))
  return 0


if __name__ == '__main__':
  sys.exit(main())
