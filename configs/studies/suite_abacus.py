r"""Abacus as McLeish et al. 2024 embed it, at CPU scale (docs/suite_abacus): a learned embedding of each digit's
significance added to the input (task addition_abacus with as_input), beside the attention encodings the paper
pairs it with (NoPE, FIRE, RoPE; ABACUS_ENCODERS of configs/algorithmic.py), trained on 1..8 digits and evaluated
to 6x (ABACUS_PROTOCOL).

    python -m experiments.suite --config=configs/studies/suite_abacus.py --workdir=docs/suite_abacus
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  config = algorithmic.suite_config(arg)
  config.suite.title = 'Abacus as McLeish et al. 2024 embed it, beside NoPE, FIRE and RoPE (CPU scale)'
  config.suite.tasks = ('addition_abacus',)
  config.suite.encoders = algorithmic.ABACUS_ENCODERS
  config.suite.protocols = {'addition_abacus': algorithmic.ABACUS_PROTOCOL}
  return config
