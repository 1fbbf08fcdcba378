r"""Position from content on the suite's causal tasks at CPU scale (docs/suite_contextual): CONTEXTUAL_TASKS of
configs/algorithmic.py (flip-flop, mqar, the token-level passkey, count_copy, plain addition, selective copying,
CoPE's counting task) with the content-dependent encoders (CoPE, FoX, stick-breaking: causal only, so the CPU
suite's bidirectional Chomsky tasks never ran them) beside NoPE, RoPE and ALiBi, under the CPU suite's protocols.

    python -m experiments.suite --config=configs/studies/suite_contextual.py --workdir=docs/suite_contextual
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  config = algorithmic.suite_config(arg)
  config.suite.tasks = algorithmic.CONTEXTUAL_TASKS
  config.suite.encoders = algorithmic.CONTEXTUAL_SUITE_ENCODERS
  config.suite.title = 'Position from content on the causal tasks (CPU scale)'
  config.suite.protocols = {t: config.suite.protocols[t].to_dict() for t in algorithmic.CONTEXTUAL_TASKS}
  return config
