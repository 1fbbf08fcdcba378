"""The jitted train and eval steps.

Randomness inside a step depends only on (seed, step): the dropout streams are reseeded with
`fold_in(fold_in(key(seed), streams.KEY_DROPOUT), step)` and randomized positions (Ruoss et al. 2023) are
drawn with `fold_in(fold_in(key(seed), streams.KEY_POSITIONS), step)`, so a resumed run repeats an
uninterrupted one exactly. JAX's partitionable threefry (the default) draws the same bits however the
batch is sharded.

Positions: `contract.train_positions(encoder, key, B, T)` (None: 0..T-1) for the padded length T of the
batch (the encoder contract takes no mask; the real tokens get the first n of the T sorted positions).
Evaluation uses 0..T-1, or, given an encoder that draws its own (`make_eval_step(..., encoder=...)`: the
published evaluation of randomized positions), a fresh draw per evaluation row from
`fold_in(draw key, row)`, so a row's positions do not depend on how the set was cut into batches. A batch
that carries its own `positions` (a task with structured positions, e.g. addition_coupled) uses those, in
training and evaluation alike.

Non-finite updates: an update whose loss, gradient norm or resulting state (params, optimizer state) is
not finite is skipped inside the jitted step (the old params and optimizer state are selected with
`jnp.where`, the step count still advances past the batch), and the step reports `finite=False`; the loop
counts these and stops the run (`relpos_jax.train.loop.DivergedError`). A finite update selects the new
state unchanged, so good runs compute exactly what they computed without the guard.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh

from relpos_jax.encoders import contract
from relpos_jax.train import sharding, streams
from relpos_jax.train.objectives import Objective, token_cross_entropy
from relpos_jax.train.optim import OptimizerSpec
from relpos_jax.train.state import ModelParts, TrainState, model_from


def run_key(seed: int) -> jax.Array:
  """The key every random draw of a run's steps derives from."""
  return jax.random.key(int(seed))


def step_keys(key: jax.Array, step) -> tuple[jax.Array, jax.Array]:
  """(dropout key, positions key) of update `step`: functions of (run key, step) only."""
  return (
      jax.random.fold_in(jax.random.fold_in(key, streams.KEY_DROPOUT), step),
      jax.random.fold_in(jax.random.fold_in(key, streams.KEY_POSITIONS), step),
  )


def forward(
    graphdef,
    params,
    rest,
    batch,
    *,
    positions=None,
    deterministic: bool,
    use_padding_mask: bool,
    dropout_key: jax.Array | None = None,
) -> jax.Array:
  """Logits (B, T, V) of the model (graphdef, params, rest) on `batch['inputs']`."""
  model = model_from(ModelParts(graphdef=graphdef, rest=rest), params)
  if dropout_key is not None:
    nnx.reseed(model, dropout=dropout_key)
  padding_mask = batch['padding_mask'] if use_padding_mask else None
  if 'positions' in batch:  # a task's own positions (position coupling, Abacus) replace any other
    positions = batch['positions']
  return model(
      batch['inputs'],
      positions=positions,
      padding_mask=padding_mask,
      deterministic=deterministic,
      # Abacus as McLeish et al. embed it: the absolute input embedding's positions, attention's unchanged.
      input_positions=batch.get('input_positions'),
      # Packed documents (data.packing): each token attends to its own document only.
      segment_ids=batch.get('segment_ids'),
  )


def all_finite(tree) -> jax.Array:
  """Bool scalar: every floating-point entry of `tree` is finite."""
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def guarded_update(tx: optax.GradientTransformation, state: TrainState, loss_fn: Callable) -> tuple[TrainState, dict]:
  """One update of `state` along the gradient of `loss_fn(params) -> (loss, metrics)`, inside a jitted step:
  `(state after it, {**metrics, loss, grad_norm, finite})`. A non-finite loss, gradient norm or resulting
  state skips the update (the old params and optimizer state are selected) and reports `finite=False`;
  the step count advances either way. Every train step of the package (the LM's below, `make_model_train_step`
  for any other model) updates through this one function."""
  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  grad_norm = optax.tree.norm(grads)
  finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & all_finite((params, opt_state))
  # Select, never multiply: a skipped update leaves the old state exactly, whatever the new one holds.
  params, opt_state = jax.tree.map(
      lambda new, old: jnp.where(finite, new, old), (params, opt_state), (state.params, state.opt_state)
  )
  metrics = {**metrics, 'loss': loss, 'grad_norm': grad_norm, 'finite': finite}
  return TrainState(step=state.step + 1, params=params, opt_state=opt_state), metrics


@functools.lru_cache(maxsize=32)
def make_train_step(
    graphdef, objective: Objective, optimizer: OptimizerSpec, encoder, *, mesh: Mesh, use_padding_mask: bool
) -> Callable:
  """`train_step(state, rest, batch, key) -> (state, metrics)`, jitted for data parallelism over `mesh`.

  `rest` is the non-parameter model state (ModelParts.rest), `key` the run's key (`run_key(seed)`). The
  state is donated (updated in place); metrics are replicated scalars: loss, grad_norm, the objective's
  batch metrics, and `finite` (False: the update was skipped, see the module docstring). Cached per (model structure, objective, optimizer, encoder, mesh): runs that differ only
  in their seed or resume point reuse one compilation.
  """
  tx = optimizer.build()

  def train_step(state: TrainState, rest, batch, key):
    dropout_key, positions_key = step_keys(key, state.step)
    batch_size, length = batch['inputs'].shape
    positions = contract.train_positions(encoder, positions_key, batch_size, length)

    def loss_fn(params):
      logits = forward(
          graphdef,
          params,
          rest,
          batch,
          positions=positions,
          deterministic=False,
          use_padding_mask=use_padding_mask,
          dropout_key=dropout_key,
      )
      return objective.loss(logits, batch)

    return guarded_update(tx, state, loss_fn)

  replicated = sharding.replicated(mesh)
  return jax.jit(
      train_step,
      in_shardings=(replicated, replicated, sharding.batch_sharded(mesh), replicated),
      out_shardings=(replicated, replicated),
      donate_argnums=(0,),
  )


@functools.lru_cache(maxsize=32)
def make_model_train_step(graphdef, optimizer: OptimizerSpec, loss: Callable) -> Callable:
  """`train_step(state, rest, batch, key) -> (state, metrics)` for a model that is not the LM (the grid study's
  ViT, or a model of a notebook's own), jitted on one device with the state donated.

  `loss(model, batch, step_key) -> (loss, metrics)` is what the model's study owns (how the model is called,
  its objective); the update, its optimizer (`OptimizerSpec`, the LM's) and the non-finite guard are shared
  (`guarded_update`). `step_key = fold_in(key, state.step)`: a function of (the run's key, step) only, so a
  run repeats itself. Cached per (model structure, optimizer, loss): pass a module-level function (or another
  hashable callable), so that every seed of one setup compiles once.
  """
  tx = optimizer.build()

  def train_step(state: TrainState, rest, batch, key):
    step_key = jax.random.fold_in(key, state.step)
    return guarded_update(
        tx, state, lambda params: loss(model_from(ModelParts(graphdef, rest), params), batch, step_key)
    )

  return jax.jit(train_step, donate_argnums=(0,))


@functools.lru_cache(maxsize=64)
def make_eval_step(
    graphdef, objective: Objective, *, mesh: Mesh, use_padding_mask: bool, encoder=None, token_losses: bool = False
) -> Callable:
  """`eval_step(params, rest, batch, key) -> sums`: deterministic, jitted over `mesh`. Cached per
  (model structure, objective, mesh, encoder), so evaluating often compiles once per shape.

  sums: `Objective.eval_sums`, plus `position_nll` and `position_tokens`, (T,) sums over the batch of the
  loss at each position of the window and of the positions counted there (`batch['position_mask']` where
  the batch has one, else its `loss_mask`): the loss-against-position curve.

  encoder: None (positions 0..T-1), or an encoder that draws its own positions (randomized): the row whose
  index in the whole evaluation set is `r` (`batch['row_ids']`) gets `contract.train_positions(encoder,
  fold_in(key, r), 1, T)`. `key` and the row ids are ignored without one.

  token_losses: also return `token_nll`, (B, T) the loss (nats) of every target, unmasked, unsummed: what a
  study's per-document totals sum by document (`relpos_jax.study.documents`) from this same pass.
  """

  def eval_step(params, rest, batch, key):
    positions = None
    if encoder is not None:
      length = batch['inputs'].shape[1]
      draw = lambda r: contract.train_positions(encoder, jax.random.fold_in(key, r), 1, length)[0]
      positions = jax.vmap(draw)(batch['row_ids'])
    logits = forward(
        graphdef, params, rest, batch, positions=positions, deterministic=True, use_padding_mask=use_padding_mask
    )
    ce = token_cross_entropy(logits, batch['targets'])
    sums = objective.eval_sums(logits, batch, ce=ce)
    position_mask = batch.get('position_mask', batch['loss_mask']).astype(jnp.float32)
    sums['position_nll'] = jnp.sum(ce * position_mask, axis=0)
    sums['position_tokens'] = jnp.sum(position_mask, axis=0)
    if token_losses:
      sums['token_nll'] = ce
    return sums

  replicated = sharding.replicated(mesh)
  return jax.jit(
      eval_step,
      in_shardings=(replicated, replicated, sharding.batch_sharded(mesh), replicated),
      out_shardings=replicated,
  )
