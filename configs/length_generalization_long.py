r"""The default study trained four times longer (1,600 steps), for a subset of encoders: do its findings hold?

    python -m experiments.length_generalization --config=configs/length_generalization_long.py \
        --workdir=results/long

Everything but the step count (and the schedule's warmup and checkpoints, scaled with it) is the default
study's (configs/length_generalization.py): same model, data, evaluation lengths and text. The encoders (a
subset, by label): T5 with its published layout (the lecture table the default study finds degrading), the
published extrapolator that does best in the default study (KERPLE-log) and the lecture-family encoder
built from the diagnosis (monotone-t5-32). One seed; about 3 x 2 minutes on a quiet 2-core CPU. Results of
the committed run: docs/study_long/.
"""

import os

from relpos_jax.train import config as config_lib

# Labels of the default study's entries: the lecture's log buckets (published layout, which degrades), the
# best published extrapolator of the default study, and the lecture-family encoder built from the diagnosis.
LABELS = ('t5', 'kerple_log', 'monotone-t5-32')


def get_config():
  config = config_lib.load_config(os.path.join(os.path.dirname(__file__), 'length_generalization.py'),
                                  validate_config=False)
  config.train.steps = 1600
  config.train.log_every = 200
  config.train.checkpoint_every = 400
  config.optim.warmup_steps = 160
  config.study.title = 'Byte-level LM on the Python stdlib: trained at 64 for 1,600 steps, evaluated up to 16x'
  by_label = {entry.partition(':')[0].strip(): entry for entry in config.study.encoders}
  config.study.encoders = tuple(by_label[label] for label in LABELS)
  config.study.seeds = (0,)
  return config
