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
# kind take the same path through the layer, so the default run keeps one representative per kind; the
# encoder-level property sweeps (Toeplitz structure, any-rank inputs, far distances) keep the lecture's
# variants. The rest of each sweep is marked `slow`, which the README's test command deselects and `.ci/run`
# runs after it (`pytest -m slow`). Each encoder's own formulas (tests/encoders/test_<encoder>.py) always run.
REGISTRY_SWEEPS = frozenset(
    {
        'test_blockwise_equals_explicit_causal_with_padding',
        'test_blockwise_equals_explicit_bidirectional_and_explicit_positions',
        'test_jit_with_static_encoder',
        'test_reads_positions_is_what_the_layer_computes',
        'test_layer_is_causal_and_masks_padding',
        'test_gradients_reach_every_learnable_leaf',
        'test_dot_product_attention_path_equals_einsum_path',
        'test_attention_with_the_wrapper_equals_attention_with_the_base',
        'test_bfloat16_follows_float32',
        'test_jit_with_the_encoder_static',
        'test_gradients_are_finite_with_padding',
        'test_structure_flags',
        'test_far_distances_stay_finite',
        'test_finite_values_and_gradients_at_long_lengths',
        'test_vmap_over_the_batch_equals_the_batched_call',
    }
)
PROPERTY_SWEEPS = frozenset(
    {
        'test_bias_matrix_is_toeplitz_and_offset_rows_are_the_full_matrix_rows',
        'test_bias_of_any_rank_is_elementwise_and_finite',
        'test_is_toeplitz_is_honest_pair_bias_agrees_with_bias_matrix',
        'test_far_distances_give_finite_values',
    }
)
KIND_REPRESENTATIVES = frozenset(
    {
        'alibi',  # scalar bias in closed form
        't5',  # scalar bias from a table (the lecture's tables: shaw, piecewise, multiscale take this path)
        'rope',  # rotary
        'shaw_vector',  # vector relative embeddings (keys and values)
        'absolute_score',  # absolute score term
        'rope+alibi',  # a sum of kinds
        'self_extend(rope)',  # a position remap
        'self_extend',
        'fox',  # a content-dependent bias
        'stick_breaking',  # a content-dependent score transform (no softmax)
    }
)
LECTURE_BIASES = frozenset({'distance', 'shaw', 'piecewise', 't5', 'multiscale', 'alibi'})


def _represents(param_id: str, names: frozenset) -> bool:
  compact = param_id.replace(' ', '')
  return any(part in names for part in (compact, compact.split(',')[0], compact.split('-')[0]))


def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    callspec = getattr(item, 'callspec', None)
    if callspec is None:
      continue
    if (item.originalname in REGISTRY_SWEEPS and not _represents(callspec.id, KIND_REPRESENTATIVES)) or (
        item.originalname in PROPERTY_SWEEPS and not _represents(callspec.id, LECTURE_BIASES)
    ):
      item.add_marker(pytest.mark.slow)
