"""step.make_model_train_step, the train step of every model that is not the LM (the grid study's ViT): one update
equals optax's own on the shared OptimizerSpec, the step's key is fold_in(key, step), and a non-finite update is
skipped and reported, as the LM's step does (both go through step.guarded_update)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from relpos_jax.train import optim, state as state_lib, step as step_lib

SPEC = optim.OptimizerSpec(
    learning_rate=1e-2,
    schedule='warmup_cosine',
    warmup_steps=0,
    end_lr_fraction=0.0,
    weight_decay=0.1,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    grad_clip_norm=1.0,
    total_steps=10,
)


def squared_error(model, batch, key):
  """A loss that also reads the step's key (noise on the targets), so the key's derivation shows in the result."""
  noise = 0.01 * jax.random.normal(key, batch['y'].shape)
  return jnp.mean((model(batch['x']) - batch['y'] - noise) ** 2), {}


def _setup():
  parts, params = state_lib.split_model(nnx.Linear(3, 2, rngs=nnx.Rngs(0)))
  batch = {'x': jnp.arange(12.0).reshape(4, 3) / 10, 'y': jnp.ones((4, 2))}
  return parts, params, batch


def test_one_update_is_optaxs_own_with_the_steps_key():
  parts, params, batch = _setup()
  key = jax.random.key(7)
  train_step = step_lib.make_model_train_step(parts.graphdef, SPEC, squared_error)
  state, metrics = train_step(state_lib.init_train_state(params, SPEC.build()), parts.rest, batch, key)

  tx = SPEC.build()
  model_loss = lambda p: squared_error(state_lib.model_from(parts, p), batch, jax.random.fold_in(key, 0))[0]
  _, fresh = state_lib.split_model(nnx.Linear(3, 2, rngs=nnx.Rngs(0)))
  loss, grads = jax.value_and_grad(model_loss)(fresh)
  updates, _ = tx.update(grads, tx.init(fresh), fresh)
  expected = optax.apply_updates(fresh, updates)
  assert bool(metrics['finite']) and int(state.step) == 1
  np.testing.assert_allclose(float(metrics['loss']), float(loss), rtol=1e-6)
  for got, want in zip(jax.tree.leaves(state.params), jax.tree.leaves(expected)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-7)


def test_a_non_finite_update_is_skipped_and_reported():
  parts, params, batch = _setup()
  train_step = step_lib.make_model_train_step(parts.graphdef, SPEC, squared_error)
  start = state_lib.init_train_state(params, SPEC.build())
  before = [np.asarray(x).copy() for x in jax.tree.leaves(start.params)]
  bad = {**batch, 'y': batch['y'].at[0, 0].set(jnp.nan)}
  state, metrics = train_step(start, parts.rest, bad, jax.random.key(0))
  assert not bool(metrics['finite']) and int(state.step) == 1
  for got, want in zip(jax.tree.leaves(state.params), before):
    np.testing.assert_array_equal(np.asarray(got), want)


def test_training_lowers_the_loss_and_repeats_itself_per_key():
  parts, params, batch = _setup()
  train_step = step_lib.make_model_train_step(parts.graphdef, SPEC, squared_error)

  def run(seed):
    state = state_lib.init_train_state(jax.tree.map(jnp.copy, params), SPEC.build())
    losses = []
    for _ in range(10):
      state, metrics = train_step(state, parts.rest, batch, jax.random.key(seed))
      losses.append(float(metrics['loss']))
    return losses

  first = run(0)
  assert first[-1] < first[0] and run(0) == first and run(1) != first
