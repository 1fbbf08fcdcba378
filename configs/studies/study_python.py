r"""The English studies' protocol on Python source bytes (docs/study_python): configs/studies/study_english.py with
`data.corpus='stdlib'`, so that the cross-corpus table (relpos_jax.study.cross_corpus) compares three corpora under
one protocol: the same nine encoders, the learning rate chosen per encoder on validation at SELECTION_SEED from the
grid reaching 3e-2, five reported seeds, 1,024 windows per length (>= 64k scored characters). The default study
(configs/studies/study.py, docs/study) asks more encoders with the committed rates and fewer scored characters.

    python -m experiments.length_generalization --config=configs/studies/study_python.py
"""

from relpos_jax import resources

english = resources.config_module('studies/study_english')


def get_config(arg=None):
  config = english.get_config(arg)
  config.data.corpus = 'stdlib'
  config.study.title = 'The cross-corpus study on Python source (bytes): trained at 64, evaluated up to 16x'
  return config
