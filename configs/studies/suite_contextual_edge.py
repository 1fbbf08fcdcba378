r"""The contextual suite's learning-rate edge checks (docs/suite_contextual/edge_1e-2): on one task run under the
study protocol, the encoders whose rate chosen from CONTEXTUAL_LR_GRID (3e-4, 1e-3, 3e-3) was its top, 3e-3,
trained again at 1e-2 at the selection seed 0 and scored like the grid (`algorithmic.edge_config`; the Ruoss
suite's check, configs/studies/suite_ruoss_edge.py). One task a call, with the task as the config's argument:

    python -m experiments.suite --config=configs/studies/suite_contextual_edge.py:count_copy \
        --tasks=count_copy --workdir=docs/suite_contextual/edge_1e-2

EDGE_ENCODERS lists, per task, the encoders that chose 3e-3 in docs/suite_contextual (a test reads them from the
reports, so a rerun that chooses differently fails it until this list follows).
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')

EDGE_RATE = algorithmic.EDGE_RATE
EDGE_ENCODERS = {
    'passkey_tokens': ('nope', 'rope', 'alibi', 'cope', 'fox', 'stick_breaking'),
    'count_copy': ('nope', 'rope', 'alibi', 'cope', 'stick_breaking'),
    'cope_counting': ('nope', 'rope', 'alibi', 'cope', 'fox'),
}


def get_config(arg=None):
  return algorithmic.edge_config(
      'suite_contextual', EDGE_ENCODERS, arg, title=f"The contextual suite's grid edge checked at {EDGE_RATE:g}"
  )
