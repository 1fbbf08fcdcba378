r"""The scale ladder (configs/studies/study_scale_ladder.py): every CPU rung's study in SCHEDULE's order, resumable,
its finished run records exported into the repo after each encoder so that the ladder continues from what is
committed (`relpos_jax.study.ladder`).

    nohup nice -n 19 env XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \
        python -m experiments.scale_ladder --workdir=/work/runs/ladder > /work/runs/ladder.log 2>&1 &
    python -m experiments.scale_ladder --workdir=/work/runs/ladder --export_only   # records and page, no training
    python -m relpos_jax.study.ladder_page docs/study_scale_ladder                   # the page from committed results

Each stage (rung, seeds) first copies the committed records of its rung (docs/study_scale_ladder/<rung>/runs)
into <workdir>/<rung> where they are missing, so the study trains only what no session has finished. After each
encoder the rung's finished records go to docs/study_scale_ladder/<rung>/, its results.* are rebuilt from all of
them (every seed finished so far, `run_study(..., finished_only=True)`) and the ladder's page is regenerated.
"""

from __future__ import annotations

import os

from absl import app
from absl import flags

from relpos_jax import resources
from relpos_jax.train import cli

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKDIR = flags.DEFINE_string('workdir', os.path.join('results', 'ladder'), 'Where the rungs train: <workdir>/<rung>.')
_DOCS = flags.DEFINE_string(
    'docs', os.path.join(_ROOT, 'docs', 'study_scale_ladder'), 'Where the records and the page go.'
)
_EXPORT_ONLY = flags.DEFINE_bool('export_only', False, 'Train nothing: export finished records, rebuild the page.')
_STAGES = flags.DEFINE_integer('stages', None, 'Run only the first this many stages of SCHEDULE (default: all).')


def ladder_config():
  return resources.config_module('studies/study_scale_ladder')


def rung_config(rung: str, seeds):
  config = ladder_config().get_config(rung)
  config.study.seeds = tuple(seeds)
  return config


def refresh_rung(rung: str, workdir: str, docs: str, config=None) -> None:
  """Exports `rung`'s finished records from `workdir` and rebuilds docs/<rung>/results.* and the page. `config`:
  the rung's study as it was trained (default: the rung at every seed SCHEDULE gives it)."""
  from relpos_jax.study import ladder, ladder_page, record, run_study

  docs_rung = os.path.join(docs, rung)
  if ladder.export_records(os.path.join(workdir, rung), docs_rung) == 0:
    return
  if config is None:  # every seed any stage trains: the report holds whatever has finished of them
    seeds = sorted({s for name, stage in ladder_config().SCHEDULE if name == rung for s in stage})
    config = rung_config(rung, seeds)
  results = run_study(config, docs_rung, finished_only=True)
  results['meta'].pop('finished_only', None)
  if results['runs']:
    record.write_outputs(results, docs_rung)
  print(ladder_page.write(docs))


@cli.errors_in_one_line()
def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  from relpos_jax.study import ladder, run_study
  from relpos_jax.train import metrics

  metrics.quiet_checkpoint_logs()
  schedule = ladder_config().SCHEDULE[: _STAGES.value]
  workdir, docs = _WORKDIR.value, _DOCS.value
  rungs = dict.fromkeys(rung for rung, _ in schedule)
  ladder.check_ladder([(rung, rung_config(rung, (0,))) for rung in rungs])  # before anything trains
  if _EXPORT_ONLY.value:
    for rung in rungs:
      refresh_rung(rung, workdir, docs)
    return
  for rung, seeds in schedule:
    rung_dir = os.path.join(workdir, rung)
    imported = ladder.import_records(os.path.join(docs, rung), rung_dir)
    print(f'ladder: {rung} seeds {list(seeds)} in {rung_dir} ({imported} committed runs imported)', flush=True)
    with cli.ExitOnInterrupt(cli.STUDY_INTERRUPTED_MESSAGE) as guard:
      results = run_study(
          rung_config(rung, seeds),
          rung_dir,
          train_fn=cli.guarded_train(guard),
          on_result=lambda _, rung=rung: _refresh_quietly(rung, workdir, docs),
      )
      check_edge(rung, seeds, results, rung_dir, os.path.join(docs, rung), cli.guarded_train(guard))
    _refresh_quietly(rung, workdir, docs)


def check_edge(rung: str, seeds, results: dict, rung_dir: str, docs_rung: str, train_fn=None) -> dict | None:
  """The rung's edge check (`relpos_jax.study.ladder.check_edge`) at the ladder's EDGE_RATE."""
  from relpos_jax.study import ladder

  return ladder.check_edge(
      rung_config(rung, seeds), results, rung_dir, docs_rung, ladder_config().EDGE_RATE, train_fn=train_fn
  )


def _refresh_quietly(rung: str, workdir: str, docs: str) -> None:
  """`refresh_rung` during training: a failure to report is printed and training goes on (the records stay in the
  workdir, and --export_only reports them later)."""
  try:
    refresh_rung(rung, workdir, docs)
  except Exception as e:  # noqa: BLE001 -- reporting must not stop an hours-long ladder; the log says what failed
    print(f'ladder: reporting {rung} failed, training goes on: {type(e).__name__}: {e}', flush=True)


if __name__ == '__main__':
  app.run(main)
