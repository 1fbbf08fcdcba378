r"""The default study trained four times longer (docs/study_long): 1,600 steps (warmup and checkpoints scaled)
for a subset of encoders (LONG_LABELS of configs/lm.py: T5 with its published layout, KERPLE-log, the lecture's
distance bias and both monotone tables): do the findings hold with more training? The default study's committed
rates were chosen at 400 steps, so this study chooses its own (--config.study.lr_grid).

    python -m experiments.length_generalization --config=configs/studies/study_long.py \
        --config.study.lr_grid='(3e-3,1e-2,3e-2)' --config.study.seeds='(0,1,2,3,4)' --workdir=results/long

What ran for docs/study_long: the grid at seed 0 for every label, the 5 seeds for the compared pair only.
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  config = lm.study_config(arg)
  config.train.steps = 1600
  config.train.log_every = 200
  config.train.checkpoint_every = 400
  config.optim.warmup_steps = 160
  config.study.title = 'Byte-level LM on the Python stdlib: trained at 64 for 1,600 steps, evaluated up to 16x'
  config.study.encoders = lm.select(lm.LONG_LABELS)
  config.study.comparisons = ('monotone-lin vs distance',)
  config.study.default_learning_rates = ()
  return config
