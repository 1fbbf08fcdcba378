r"""Do the findings survive scale? The English BPE study (configs/studies/study_english_bpe.py, docs/
study_english_bpe) asked again at larger models: one study config per rung (`:<rung>`), every rung under the
cross-corpus protocol as that study has it (the learning rate chosen per encoder on validation at SELECTION_SEED
from CROSS_CORPUS_LR_GRID, the same 65,536 scored characters at every length, document bootstrap, Holm), trained at
64 tokens and evaluated to 1,024 (16x); only the model's size changes between rungs (RUNGS). The page that sets
the rungs side by side is docs/study_scale_ladder (`relpos_jax.study.ladder`).

    python -m experiments.scale_ladder --workdir=/work/runs/ladder        # every CPU rung, in SCHEDULE's order
    python -m experiments.length_generalization \
        --config=configs/studies/study_scale_ladder.py:d128 --workdir=/work/runs/ladder/d128   # one rung

Why these rungs. 'd64' is today's model (2 layers, d_model 64, 231,360 parameters with BPE's 1,024 tokens) and
its config is docs/study_english_bpe's run for run, so the ladder reuses those 5-seed records instead of training
them again (tests/study/test_scale_ladder.py pins the identity). 'd128' (4 layers, 1,053,328 counted by its runs,
4.6x) and 'd256' (5 layers, about 4.46M by relpos_jax.study.ladder.param_estimate, 19x) span more than the 16x the
issue asks for. Every rung trains the same 400 steps of 32 x 64
tokens (819,200 tokens), so the data is held fixed and tokens per parameter fall from 3.5 to 0.18: the ladder asks
whether the orderings change with the model's size at a fixed data budget, not at compute-optimal training (about
20 tokens per parameter, Hoffmann et al. 2022), which would cost 100x more steps at d256 than a 2-core CPU has.
'd512' (8 layers, d_model 512, ~26M) is the accelerator's rung (benchmarks/accelerator.py), not trained here.
"""

from relpos_jax import resources
from relpos_jax.train.config import ConfigError

lm = resources.config_module('lm')
english_bpe = resources.config_module('studies/study_english_bpe')

# name: the model section's size keys. Heads keep d_model / heads >= 16 (RoPE rotates pairs of a head's features).
RUNGS = {
    'd64': {'num_layers': 2, 'model_dim': 64, 'num_heads': 4},  # today's model: docs/study_english_bpe
    'd128': {'num_layers': 4, 'model_dim': 128, 'num_heads': 4},
    'd256': {'num_layers': 5, 'model_dim': 256, 'num_heads': 8},
    'd512': {'num_layers': 8, 'model_dim': 512, 'num_heads': 8},  # accelerator only
}
CPU_RUNGS = ('d64', 'd128', 'd256')
ACCELERATOR_RUNG = 'd512'
# The rung whose runs are docs/study_english_bpe's (its results.json, read by the ladder's page as that rung's).
REUSED_RUNG = 'd64'
REUSED_STUDY = 'study_english_bpe'
# The eight encoders the issue names, in the cross-corpus order (whole findings first), then FIRE-512, which only
# 'fire vs fire-512' reads: an interrupted rung has every other finding before it.
LABELS = tuple(label for label in lm.CROSS_CORPUS_LABELS if label != 'fire-512') + ('fire-512',)
# The edge check's rate (docs/study_edge_cross_corpus): one rung of the half-decade ladder past the grid's top,
# trained at the selection seed for each encoder of a rung that chose the top (experiments/scale_ladder.py).
EDGE_RATE = resources.config_module('algorithmic').edge_rate(lm.CROSS_CORPUS_LR_GRID)
# The order the CPU ladder trains in, so that an interrupted ladder has whole findings first: (rung, seeds) stages,
# each a resumable study (a stage's selection runs come first, at SELECTION_SEED; later stages reuse them).
# Every rung at 3 seeds before any rung at 5; 'd64' is reused at 5 already.
SCHEDULE = (
    ('d128', (0, 1, 2)),
    ('d256', (0, 1, 2)),
    ('d128', lm.CROSS_CORPUS_SEEDS),
    ('d256', lm.CROSS_CORPUS_SEEDS),
)


def rung_of(arg) -> str:
  """The rung named by the config argument ('d128'); None: the smallest."""
  rung = CPU_RUNGS[0] if arg in (None, '') else str(arg).strip()
  if rung not in RUNGS:
    raise ConfigError(
        f'configs/studies/study_scale_ladder.py: rung {rung!r} is invalid: allowed: one of {sorted(RUNGS)} '
        '(--config=configs/studies/study_scale_ladder.py:d128).'
    )
  return rung


def get_config(arg=None):
  rung = rung_of(arg)
  config = english_bpe.get_config()  # the English BPE study, key for key
  config.model.update(RUNGS[rung])
  config.study.encoders = lm.select(LABELS)
  if rung != REUSED_RUNG:
    # A training-loss point every 20 steps (the reused rung logged every 100): the curves that show whether a rung
    # has flattened. Logging changes nothing a run computes.
    config.train.log_every = 20
  config.study.title = f'Scale ladder, rung {rung}: the English BPE study at {_describe(rung)}'
  config.study.description = (
      f'The English BPE study (docs/{REUSED_STUDY}) with a {_describe(rung)} model; bits per character on the '
      f'held-out test novel (the same 65,536 characters at every length); the learning rate chosen per encoder on '
      f'validation at seed {lm.SELECTION_SEED}, outside the reported seeds.'
  )
  return config


def _describe(rung: str) -> str:
  size = RUNGS[rung]
  return f'{size["num_layers"]}-layer, d_model {size["model_dim"]}, {size["num_heads"]}-head'
