r"""Position from content on the suite's causal tasks at CPU scale (docs/suite_contextual): CONTEXTUAL_TASKS of
configs/algorithmic.py (flip-flop, mqar, the token-level passkey, count_copy, plain addition, selective copying,
CoPE's counting task) with the content-dependent encoders (CoPE, FoX, stick-breaking: causal only, so the CPU
suite's bidirectional Chomsky tasks never ran them) beside NoPE, RoPE and ALiBi, under the CPU suite's task
protocols and the study protocol: a learning rate per encoder and task from CONTEXTUAL_LR_GRID, chosen on
validation loss at the training length at seed 0, then seeds 1 and 2 at that rate (3 seeds). A task's folder is
complete on its own, so tasks can run (`--tasks=...`) and be committed one at a time; each task's row of the
protocol table says which protocol it ran under (every committed task ran under this one; the first runs, at 1e-3
on 2 seeds, are in git history).

    python -m experiments.suite --config=configs/studies/suite_contextual.py --workdir=docs/suite_contextual
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  config = algorithmic.suite_config(arg)
  config.suite.tasks = algorithmic.CONTEXTUAL_TASKS
  config.suite.encoders = algorithmic.CONTEXTUAL_SUITE_ENCODERS
  config.suite.title = 'Position from content on the causal tasks (CPU scale)'
  config.suite.seeds = (0, 1, 2)
  config.suite.lr_grid = algorithmic.CONTEXTUAL_LR_GRID
  config.suite.protocols = {t: config.suite.protocols[t].to_dict() for t in algorithmic.CONTEXTUAL_TASKS}
  for task, grid in algorithmic.CONTEXTUAL_TASK_LR_GRIDS.items():
    config.suite.protocols[task]['lr_grid'] = grid
  return config
