r"""A length-generalization study on an algorithmic task at CPU scale: every encoder of `study.encoders`
(STUDY_ENCODERS of configs/algorithmic.py) trains configs/algorithmic.py's run on even_pairs (lengths 1..20) and is
evaluated by per-output-token accuracy at 10 and 20 (in distribution) and 30, 40, 60, 100 (out of distribution),
about 2 minutes per encoder on a 2-core CPU. NoPE is in the set as the control: a bidirectional model without
positions cannot see order (the run warns), so its accuracy marks chance for order-dependent tasks.

    python -m experiments.length_generalization --config=configs/studies/even_pairs.py --workdir=results/even_pairs
    python -m experiments.length_generalization --config=configs/studies/even_pairs.py \
        --config.data.task=parity_check --workdir=results/parity_check
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  config = algorithmic.study_config(arg)
  config.eval.lengths = (10, 20, 30, 40, 60, 100)
  config.study.title = 'even_pairs: trained on lengths 1..20, accuracy up to 100'
  config.study.description = (
      'Per-output-token accuracy (Deletang et al. 2023); lengths <= 20 are in distribution. Chance is 0.5.'
  )
  config.study.encoders = algorithmic.STUDY_ENCODERS
  return config
