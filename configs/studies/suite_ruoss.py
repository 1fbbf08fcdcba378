r"""Ruoss et al. 2023 at CPU scale (docs/suite_ruoss): the CPU suite's protocols for the tasks RoPE learns
(RUOSS_TASKS of configs/algorithmic.py), 2,000 steps or more (the suite's 2,500 where it has them), RoPE against
randomized RoPE at max_position 2x and 8x each task's longest test sequence and at 2048, a learning rate per
encoder from a grid (validation loss at the training length), 3 seeds, randomized encoders evaluated at random
positions (4 draws) and at 0..L-1; the table shows the max over seeds, as the paper reports (the mean ± sample
std follows it).

    python -m experiments.suite --config=configs/studies/suite_ruoss.py --workdir=docs/suite_ruoss
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  config = algorithmic.suite_config(arg)
  config.train.steps = 2_000
  config.eval.position_draws = 4
  config.suite.title = 'Ruoss et al. 2023 at CPU scale: randomized RoPE against RoPE'
  config.suite.tasks = algorithmic.RUOSS_TASKS
  config.suite.encoders = algorithmic.RUOSS_ENCODERS
  config.suite.seeds = (0, 1, 2)
  config.suite.statistic = 'token_max'
  config.suite.lr_grid = algorithmic.RUOSS_LR_GRID
  config.suite.protocols = {t: config.suite.protocols[t].to_dict() for t in algorithmic.RUOSS_TASKS}
  return config
