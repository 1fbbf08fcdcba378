r"""Train with RoPE, evaluate with inference-time extensions (docs/study_inference_extension): RoPE trained once
per seed (the default study's run), its parameters evaluated unchanged with each extension up to 16x, each set for
16x from L_orig = 64. Entries 'label: rope -> Y' reuse the trained run of each seed (relpos_jax.study.runner).
Self-Extend and leaky ReRoPE are sized so that the largest distance they show the model at 1024 stays inside the
64 trained positions: Self-Extend (1023 // 32) + 32 - 1 = 62, leaky ReRoPE 32 + (1023 - 32) / 32 < 64.

    python -m experiments.length_generalization --config=configs/studies/study_inference_extension.py \
        --config.study.seeds='(0,1,2,3,4)' --config.study.lr_grid='(1e-3,3e-3,1e-2)'
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  config = lm.study_config(arg)
  config.study.title = 'Train with RoPE at 64, evaluate with inference-time extensions up to 16x'
  config.study.description = (
      'Bits per character on the held-out test files; RoPE trained once per seed, its '
      'parameters evaluated unchanged with each extension (no retraining).'
  )
  config.study.encoders = lm.INFERENCE_EXTENSION_ENCODERS
  config.study.comparisons = (
      'yarn vs ntk',
      'rerope_leaky vs self_extend',
      'rerope vs self_extend',
      'self_extend vs dual_chunk',
  )
  return config
