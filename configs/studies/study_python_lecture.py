r"""The lecture's encoders under the cross-corpus protocol on Python bytes (docs/study_python_lecture): the default
study's nine encoders that configs/studies/study_python.py does not ask (LECTURE_LABELS of configs/lm.py: Shaw's
clipped table, piecewise-linear and logarithmic buckets, multi-scale tables, absolute + relative, the monotone fix of
the log buckets, and the absolute and position-free controls), with study_python's protocol unchanged: the rate
chosen per encoder on validation at SELECTION_SEED from the grid reaching 3e-2, five reported seeds, 1,024 windows
per length (>= 64k scored bytes). Together the two studies hold every encoder of the default study at five seeds.

    python -m experiments.length_generalization --config=configs/studies/study_python_lecture.py
"""

from relpos_jax import resources

lm = resources.config_module('lm')
python_study = resources.config_module('studies/study_python')


def get_config(arg=None):
  config = python_study.get_config(arg)
  config.study.title = "The lecture's encoders on Python source (bytes): trained at 64, evaluated up to 16x"
  config.study.encoders = lm.select(lm.LECTURE_LABELS)
  config.study.comparisons = lm.LECTURE_COMPARISONS
  return config
