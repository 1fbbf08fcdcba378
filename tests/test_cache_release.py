"""The test workers' bound on memory (tests/conftest.py `release_caches`, run after each test file): it drops
JAX's compiled programs and every lru_cache of the project, method caches included (a data source's evaluation
sets keep the source, and its corpus, alive). Without it a worker of the README's test command grew to about
4.6 GB resident."""

import jax
import jax.numpy as jnp

from relpos_jax.study import resolution
from relpos_jax.train import inputs, optim, step, token_inputs


def test_release_caches_drops_compiled_programs_and_the_projects_lru_caches(release_caches):
  double = jax.jit(lambda x: 2 * x)
  double(jnp.ones(3)).block_until_ready()
  spec = optim.OptimizerSpec(1e-3, 'warmup_cosine', 0, 0.0, 0.0, 0.9, 0.999, 1e-8, 1.0, 10)
  step.make_model_train_step(None, spec, resolution.classification_loss)
  assert double._cache_size() == 1 and step.make_model_train_step.cache_info().currsize >= 1
  release_caches()
  assert double._cache_size() == 0
  for cache in (
      step.make_model_train_step,
      step.make_train_step,
      step.make_eval_step,
      inputs.CorpusData.eval_set,
      token_inputs.BPECorpusData.eval_set,
  ):
    assert cache.cache_info().currsize == 0, cache
