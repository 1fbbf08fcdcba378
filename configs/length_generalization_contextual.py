r"""Position from content (issue 11): CoPE, FoX, stick-breaking, DAPE, PaTH, SSMax and log-n beside the
default study's extrapolating baselines, on the default LM setting (configs/length_generalization.py:
byte-level LM, trained at 64, evaluated at 64 ... 1024).

    python -m experiments.length_generalization --config=configs/length_generalization_contextual.py \
        --config.seed=0 --workdir=docs/study_contextual/seed0

The committed study (docs/study_contextual/) ran it for seeds 0, 1 and 2, one workdir each, and
`python -m experiments.combine_seeds docs/study_contextual` wrote the mean and spread across seeds.
"""

import os

from relpos_jax.train import config as config_lib

CONTEXTUAL_ENCODERS = (
    # The baselines: the position-free control, the biases built to extrapolate, and rotary.
    'nope',
    'alibi',
    'kerple_log',
    'fire',
    'rope',
    # Position from content.
    'cope',
    'fox',
    'fox-bias: fox(bias_only=True)',
    'stick_breaking',
    'dape-kerple: dape(kerple_log)',
    'dape2-kerple: dape(kerple_log, version=2)',
    'path',
    # Length-aware temperature (on rope, and alone: NoPE + temperature).
    'rope+ssmax: rope + ssmax',
    'ssmax',
    'logn: logn(train_length=64)',
)


def get_config():
  config = config_lib.load_config(os.path.join(os.path.dirname(__file__), 'length_generalization.py'),
                                  validate_config=False)
  config.unlock()
  config.study.title = 'Position from content: trained at 64, evaluated up to 16x'
  config.study.description = ('Bits per character on the validation files; contextual position encodings '
                              'beside the extrapolating biases and RoPE, same model, data stream and steps.')
  config.study.encoders = CONTEXTUAL_ENCODERS
  return config
