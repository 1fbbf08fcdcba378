"""The test workers' guard against the kernel's cap on memory mappings (tests/conftest.py) rests on one fact of
JAX's CPU backend: dropping its caches unmaps the code of the programs it compiled. Without it an xdist worker of
the optimized slow set reached vm.max_map_count and died in a segfault inside XLA's compiler."""

import gc
import os

import jax
import jax.numpy as jnp
import pytest


def _memory_mappings() -> int:
  with open('/proc/self/maps', 'rb') as f:
    return f.read().count(b'\n')


@pytest.mark.skipif(not os.path.exists('/proc/self/maps'), reason='no /proc: the kernel cap is Linux only')
def test_clearing_the_caches_unmaps_most_compiled_programs():
  jax.clear_caches()
  gc.collect()
  before = _memory_mappings()
  for width in range(1, 61):
    # a new shape per call: 60 distinct programs
    jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.ones((4, width))).block_until_ready()
  compiled = _memory_mappings() - before
  assert compiled > 20, f'60 compiled programs added only {compiled} mappings: nothing for the guard to measure'
  jax.clear_caches()
  gc.collect()
  kept = _memory_mappings() - before
  assert kept < compiled / 2, f'after jax.clear_caches() {kept} of the {compiled} new mappings remain'
