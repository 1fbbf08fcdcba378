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

EDGE_ENCODERS = {
    'reverse_string': ('rope+rand.8x', 'rope+rand.2048'),
    'bucket_sort': ('rope', 'rope+rand.2x', 'rope+rand.8x', 'rope+rand.2048'),
    'cycle_navigation': ('rope', 'rope+rand.8x'),
    'flip_flop': ('rope', 'rope+rand.8x'),
}


def get_config(arg=None):
  return algorithmic.edge_config(
      'suite_ruoss',
      EDGE_ENCODERS,
      arg,
      title=f"The Ruoss grid's edge checked at {algorithmic.edge_rate(algorithmic.RUOSS_LR_GRID):g}",
  )
