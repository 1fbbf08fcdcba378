"""Test-wide settings: several fake CPU devices (for sharding tests) and a fast hypothesis profile."""

import os

# Must happen before JAX initialises its backend: four CPU devices let the sharding tests build a mesh.
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=4')

import jax  # noqa: E402
import hypothesis  # noqa: E402

jax.config.update('jax_default_matmul_precision', 'highest')

# JIT compilation makes the first example slow, so no per-example deadline; few examples keep tests fast.
hypothesis.settings.register_profile('default', deadline=None, max_examples=25, derandomize=True)
hypothesis.settings.register_profile('thorough', deadline=None, max_examples=500)
hypothesis.settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'default'))
