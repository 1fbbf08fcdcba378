r"""Long context (docs/study_long_context): the default study's trained runs (configs/studies/study.py, read from
`study.trained_workdir`, no retraining) evaluated at 2,048 ... 65,536 bytes (32x to 1024x), plus 1,024 as the
reference, with `model.attention_implementation='blockwise'` (tiles, every position term built per tile: no
(L, L) array at any length). The same targets at every length: windows end at 4 common anchors and score their
last 1,024 bytes (eval.scored_tail; 1,024 is the reference length, 4,096 scored bytes per length, four windows of
65,536 at the longest). `learned` is left out (its table ends at position 1,023); the families its page
(docs/study_long_context) compares come first, so an interrupted run has them, then RoPE's trained runs under
inference-time extensions sized for 1024x ('label: rope -> Y', LONG_CONTEXT_EXTENSIONS of configs/lm.py):

    python -m experiments.length_generalization --config=configs/studies/study_long_context.py \
        --config.study.trained_workdir=results/default --workdir=results/long_context
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  config = lm.long_context_config(arg)
  config.study.encoders = lm.select(lm.LONG_CONTEXT_LABELS) + lm.LONG_CONTEXT_EXTENSIONS
  config.study.comparisons = (
      'kerple_log vs fire',
      'fire vs fire-512',
      'monotone-lin vs distance',
      'rerope vs self_extend',
  )
  config.study.trained_workdir = 'results/default'  # where `python -m experiments.length_generalization` trains
  return config
