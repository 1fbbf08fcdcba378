"""Test-wide settings: several fake CPU devices (for sharding tests) and a fast hypothesis profile."""

import os

# Must happen before JAX initialises its backend: four CPU devices let the sharding tests build a mesh.
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=4')

import jax  # noqa: E402
import hypothesis  # noqa: E402
import pytest  # noqa: E402

jax.config.update('jax_default_matmul_precision', 'highest')

# JIT compilation makes the first example slow, so no per-example deadline; few examples keep tests fast (each new
# shape compiles again); HYPOTHESIS_PROFILE=thorough for 500.
hypothesis.settings.register_profile('default', deadline=None, max_examples=12, derandomize=True)
hypothesis.settings.register_profile('thorough', deadline=None, max_examples=500)
hypothesis.settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'default'))


# The registry-wide sweeps: one test x every registered encoder (and composition). Encoders of one attention
# kind take the same path through the layer, so the default run keeps one representative per kind (and each
# content-dependent encoder, which is a kind of its own); the rest of each sweep is marked `slow`, which the
# README's test command deselects and `.ci/run` runs after it (`pytest -m slow`). Per-encoder formulas and
# properties (tests/encoders/test_<encoder>.py, the Toeplitz properties) are not sweeps and always run.
REGISTRY_SWEEPS = frozenset(
    {
        'test_blockwise_equals_explicit_causal_with_padding',
        'test_jit_with_static_encoder',
        'test_reads_positions_is_what_the_layer_computes',
        'test_layer_is_causal_and_masks_padding',
        'test_gradients_reach_every_learnable_leaf',
        'test_dot_product_attention_path_equals_einsum_path',
        'test_attention_with_the_wrapper_equals_attention_with_the_base',
        'test_bfloat16_follows_float32',
        'test_jit_with_the_encoder_static',
        'test_gradients_are_finite_with_padding',
    }
)
KIND_REPRESENTATIVES = frozenset(
    {
        'alibi',  # scalar bias in closed form
        't5',  # scalar bias from a table (the lecture's tables: shaw, piecewise, multiscale take this path)
        'fire',  # scalar bias from an MLP of the distance
        'rope',  # rotary
        'shaw_vector',  # vector relative embeddings (keys and values)
        'transformer_xl',  # vector relative with global content/position biases
        'absolute_score',  # absolute score term
        'sinusoidal',  # absolute, added to the inputs
        'rope+alibi',  # a sum of kinds
        'sinusoidal+t5',  # the lecture's absolute + relative
        'randomized(rope)',  # a position wrapper
        'randomized',  # (the registry sweeps build wrappers with their default base)
        'self_extend(rope)',  # a position remap
        'self_extend',
        'fox',  # the content-dependent kinds, one each
        'stick_breaking',
        'cope',
        'dape(kerple_log)',
        'dape',
        'path',
        'ssmax',  # score temperature
    }
)


def _represents_a_kind(param_id: str) -> bool:
  compact = param_id.replace(' ', '')
  return any(part in KIND_REPRESENTATIVES for part in (compact, compact.split(',')[0], compact.split('-')[0]))


def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    callspec = getattr(item, 'callspec', None)
    if item.originalname in REGISTRY_SWEEPS and callspec is not None and not _represents_a_kind(callspec.id):
      item.add_marker(pytest.mark.slow)
