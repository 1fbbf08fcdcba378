r"""Train with RoPE once, evaluate with inference-time extensions: the RoPE length-extension toolbox.

RoPE trains the small causal byte-level LM of configs/length_generalization.py (length 64, the default
study's model, data stream, seed and steps). The trained parameters are then evaluated, unchanged, at
64 .. 1024 bytes (1x to 16x) with plain RoPE and with each inference-time extension, every one set for the
16x target from L_orig = 64:

    python -m experiments.length_generalization --config=configs/inference_extension.py \
        --workdir=/tmp/inference_extension
    python -m experiments.length_generalization --config=configs/inference_extension.py --config.seed=1 \
        --workdir=/tmp/inference_extension_seed1

Entries 'label: rope -> Y' reuse the one trained run (relpos_jax.study.runner); nothing is retrained.
Self-Extend and leaky ReRoPE are sized so that the largest distance they show the model at 1024 stays inside
the 64 trained positions: Self-Extend (1023 // 32) + 32 - 1 = 62, leaky ReRoPE 32 + (1023 - 32) / 32 < 64.
"""

import os

import ml_collections

from relpos_jax.train import config as config_lib

S, L_ORIG = 16.0, 64

ENCODERS = (
    'rope',
    f'linear: rope -> rope(scaling="linear", factor={S})',
    f'ntk: rope -> rope(scaling="ntk", factor={S})',
    # factor 1: the NTK factor is exactly L / L_orig at every evaluation length (HF's dynamic rule).
    f'dynamic_ntk: rope -> rope(scaling="dynamic", factor=1.0, original_max_position={L_ORIG})',
    f'yarn: rope -> rope(scaling="yarn", factor={S}, original_max_position={L_ORIG})',
    f'yarn_dynamic: rope -> rope(scaling="yarn", dynamic=True, original_max_position={L_ORIG})',
    'self_extend: rope -> self_extend(rope, group_size=32, window=32)',
    'rerope: rope -> rerope(rope, window=32)',
    'rerope_leaky: rope -> rerope(rope, window=32, leak=32)',
    'dual_chunk: rope -> dual_chunk(rope, chunk=48, local_window=4)',
)


def get_config() -> ml_collections.ConfigDict:
  config = config_lib.load_config(os.path.join(os.path.dirname(__file__), 'length_generalization.py'),
                                  validate_config=False)
  config.unlock()
  config.study.title = 'Train with RoPE at 64, evaluate with inference-time extensions up to 16x'
  config.study.description = ('Bits per character on the validation files; one RoPE run, its parameters '
                              'evaluated unchanged with each extension (no retraining).')
  config.study.encoders = ENCODERS
  return config
