r"""A budget probe for the CPU suite's unlearned tasks (docs/suite_probe): each task that no encoder of docs/suite
learns in distribution (per-token accuracy within the training lengths below 0.9 for every encoder, at 1,000-2,500
steps and 1e-3), trained with RoPE, the encoder that learns the most tasks there, at 5x the base budget (5,000
steps) and at the suite's rate and the one above it (1e-3, 3e-3), seed 0, the suite's model and lengths.
The question is only whether a budget within reach of this CPU learns the task in distribution: the table's
bracketed (in-distribution) numbers answer it, the rate chosen on validation at the training length.

    python -m experiments.suite --config=configs/studies/suite_probe.py --workdir=docs/suite_probe

PROBE_TASKS is read from docs/suite by a test (the tasks its summary marks not learned), so a rerun of the
preset that learns one fails it until this list follows.
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')

PROBE_TASKS = (
    'modular_arithmetic',
    'parity_check',
    'modular_arithmetic_brackets',
    'solve_equation',
    'duplicate_string',
    'odds_first',
    'binary_addition',
    'binary_multiplication',
    'compute_sqrt',
    'addition',
)
PROBE_STEPS = 5_000
# The suite's rate and the next above it: a short budget needs the larger step, if either (3e-4 was left out to
# fit the CPU time: at 5x the steps it is the least likely to learn a task the suite's 1e-3 did not).
PROBE_LR_GRID = (1e-3, 3e-3)


def get_config(arg=None):
  config = algorithmic.suite_config(arg)
  config.suite.title = f'Budget probe: RoPE at {PROBE_STEPS:,} steps and two rates on the unlearned tasks'
  config.suite.encoders = ('rope',)
  config.suite.seeds = (0,)
  config.suite.lr_grid = PROBE_LR_GRID
  return algorithmic.at_steps(config, PROBE_TASKS, PROBE_STEPS)
