"""The train state: a pure pytree (step, params, optimizer state), and the static rest of the model.

An NNX model splits into a `graphdef` (its structure: static), its `nnx.Param` variables (trained,
checkpointed, replicated over the mesh) and everything else (`rest`: the RNG stream state of the dropout
layers). `rest` is not trained and not checkpointed: the train step reseeds the dropout streams from
(seed, step) before every update, so what they held before never matters. Keeping the state a plain
pytree is what lets one `jax.jit` shard it, orbax save it, and a notebook rebuild the model:

    >>> parts, params = split_model(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
    >>> model_from(parts, params).kernel.shape
    (2, 3)
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax
from flax import nnx


@flax.struct.dataclass
class TrainState:
  """`step` updates have been applied to `params`; `opt_state` is the optimizer's state after them."""

  step: jax.Array  # int32 scalar
  params: Any  # nnx.State of the model's nnx.Param variables
  opt_state: optax.OptState


@flax.struct.dataclass
class ModelParts:
  """The static part of a split model: `model_from(parts, params)` puts it back together."""

  graphdef: Any = flax.struct.field(pytree_node=False)
  rest: Any = flax.struct.field(pytree_node=True)


def split_model(model: nnx.Module) -> tuple[ModelParts, Any]:
  """(static parts, params) of an NNX model; params are its `nnx.Param` variables."""
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  return ModelParts(graphdef=graphdef, rest=rest), params


def model_from(parts: ModelParts, params) -> nnx.Module:
  """A new NNX model with these parameters (fresh Variable objects around the same arrays, so mutating
  one model, e.g. reseeding its dropout inside a jitted step, never touches another)."""
  return nnx.merge(parts.graphdef, params, parts.rest, copy=True)


def init_train_state(params, tx: optax.GradientTransformation) -> TrainState:
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))


def count_params(params) -> int:
  return int(sum(x.size for x in jax.tree.leaves(params)))
