r"""docs/suite_contextual/edge_<rate>: the Ruoss suite's edge check (configs/studies/suite_ruoss_edge.py,
`algorithmic.edge_config`) for the tasks the contextual suite ran under the study protocol, at the rung of the rate
ladder past each task's grid (1e-2 past the shared grid; count_copy's own grid tops at 3e-2, so 1e-1). EDGE_ENCODERS:
per task, the encoders whose rate chosen in docs/suite_contextual was the grid's top (a test reads them from there).

    python -m experiments.suite --config=configs/studies/suite_contextual_edge.py:passkey_tokens \
        --tasks=passkey_tokens --workdir=docs/suite_contextual/edge_1e-2
"""

from relpos_jax import resources

EDGE_ENCODERS = {
    'passkey_tokens': ('nope', 'rope', 'alibi', 'cope', 'fox', 'stick_breaking'),
    'count_copy': ('nope', 'alibi'),
    'cope_counting': ('nope', 'rope', 'alibi', 'cope', 'fox'),
    'mqar': ('nope', 'rope', 'alibi', 'cope', 'stick_breaking'),
    'flip_flop': ('rope', 'alibi', 'cope', 'fox', 'stick_breaking'),
    'selective_copy': ('nope', 'rope', 'alibi', 'cope', 'fox', 'stick_breaking'),
    'addition': ('nope', 'rope', 'alibi', 'cope', 'stick_breaking'),
}


def get_config(arg=None):
  algorithmic = resources.config_module('algorithmic')
  title = "The contextual suite's grid edge checked one rung past each task's grid"
  return algorithmic.edge_config('suite_contextual', EDGE_ENCODERS, arg, title=title)
