r"""The CPU preset's full rows at the budget the probe found (docs/suite_budget): each task that docs/suite leaves
unlearned and the budget probe (configs/studies/suite_probe.py, docs/suite_probe) learned in distribution, rerun
with every encoder and seed of the preset (configs/studies/suite.py) at the probe's budget (5,000 steps) and the
rate the probe chose there on validation (the preset's 1e-3), so the task's row compares the encoders on a task
that is learned, as the preset's other rows do.

    python -m experiments.suite --config=configs/studies/suite_budget.py --workdir=docs/suite_budget

BUDGET_TASKS and the rate are read from docs/suite_probe by a test: a probe that learns another task (or
chooses another rate) fails it until this file follows.
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')
probe = resources.config_module('studies/suite_probe')

BUDGET_TASKS = ('duplicate_string', 'odds_first')


def get_config(arg=None):
  config = algorithmic.suite_config(arg)
  config.suite.title = f"The CPU preset at the probe's budget ({probe.PROBE_STEPS:,} steps) on the tasks it learned"
  return algorithmic.at_steps(config, BUDGET_TASKS, probe.PROBE_STEPS)
