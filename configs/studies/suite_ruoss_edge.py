r"""The Ruoss protocol's learning-rate edge checks (docs/suite_ruoss/edge_1e-2): on one task, the encoders whose
rate chosen from RUOSS_LR_GRID (3e-4, 1e-3, 3e-3) was its top, 3e-3, trained again at 1e-2, the next rate of the
grid's half-decade spacing, at the selection seed 0 and scored like the grid (validation loss at the training
length; the test lengths are evaluated too, for the record). A rate that validates worse than the chosen one
shows that the grid's edge did not bind. One task a call, with the task as the config's argument:

    python -m experiments.suite --config=configs/studies/suite_ruoss_edge.py:bucket_sort \
        --tasks=bucket_sort --workdir=docs/suite_ruoss/edge_1e-2

EDGE_ENCODERS lists, per task, the encoders that chose 3e-3 in docs/suite_ruoss (a test reads them from the
reports, so a rerun that chooses differently fails it until this list follows).
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')
lm = resources.config_module('lm')  # its `select`: 'label: spec' entries by label

EDGE_RATE = 1e-2
EDGE_ENCODERS = {
    'reverse_string': ('rope+rand.8x', 'rope+rand.2048'),
    'bucket_sort': ('rope', 'rope+rand.2x', 'rope+rand.8x', 'rope+rand.2048'),
    'cycle_navigation': ('rope', 'rope+rand.8x'),
    'flip_flop': ('rope', 'rope+rand.8x'),
}


def get_config(arg=None):
  if arg not in EDGE_ENCODERS:
    raise ValueError(
        f'configs/studies/suite_ruoss_edge.py: the argument {arg!r} is not a task with an edge to check; '
        f'allowed: one of {sorted(EDGE_ENCODERS)} (e.g. --config=configs/studies/suite_ruoss_edge.py:bucket_sort).'
    )
  spec = resources.config_module('studies/suite_ruoss')
  config = spec.get_config()
  config.suite.title = f"The Ruoss grid's edge checked at {EDGE_RATE:g}"
  config.suite.encoders = lm.select(EDGE_ENCODERS[arg], config.suite.encoders)
  config.suite.seeds = (0,)
  config.suite.lr_grid = (EDGE_RATE,)
  # Every task of the edge checks stays in the config, so the summary covers each task with results; the
  # call's `--tasks` names the one trained now (the others' encoders differ).
  config.suite.tasks = tuple(t for t in algorithmic.RUOSS_TASKS if t in EDGE_ENCODERS)
  config.suite.protocols = {t: config.suite.protocols[t] for t in config.suite.tasks}
  return config
