"""Train with X, evaluate with Y: a trained model's parameters in a model built with another encoder.

    model = with_encoder(result.model, config, 'rope(scaling="yarn", factor=16.0)')
    evaluate_lengths(model, data, [64, 1024])

Inference-time extensions (PI / NTK / YaRN scalings, Self-Extend, ReRoPE) change no parameter: the
evaluation encoder must have exactly the trained parameters (same paths, same shapes), or `check_compatible`
raises a ValueError listing what differs (a learned table trained with one size cannot be read with another).
"""

from __future__ import annotations

import copy

import jax
from flax import nnx


def _shapes(model_or_state) -> dict[str, tuple]:
  if isinstance(model_or_state, dict):
    return model_or_state
  state = model_or_state if isinstance(model_or_state, nnx.State) else nnx.state(model_or_state, nnx.Param)
  flat = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(state):
    flat['/'.join(str(getattr(k, 'key', getattr(k, 'idx', getattr(k, 'name', k)))) for k in path)] = (
        tuple(leaf.shape),
        str(leaf.dtype),
    )
  return flat


def check_compatible(
    trained, evaluated, *, train_spec: str = 'the training encoder', eval_spec: str = 'the evaluation encoder'
) -> None:
  """ValueError unless the two models (or their `param_shapes`) have the same params."""
  a, b = _shapes(trained), _shapes(evaluated)
  if a == b:
    return
  missing = sorted(set(a) - set(b))
  extra = sorted(set(b) - set(a))
  shape = sorted(k for k in set(a) & set(b) if a[k] != b[k])
  details = []
  if missing:
    details.append(f'trained params it has no place for: {missing[:6]}')
  if extra:
    details.append(f'params it needs that training did not make: {extra[:6]}')
  if shape:
    details.append('different shapes: ' + ', '.join(f'{k} {a[k][0]} -> {b[k][0]}' for k in shape[:6]))
  raise ValueError(
      f'evaluation encoder {eval_spec!r} cannot take the parameters trained with {train_spec!r}: '
      + '; '.join(details)
      + '. Evaluate with an encoder of the same parameters (a scaling or '
      'remap of the trained one), or train with it.'
  )


def eval_config(config, eval_spec: str):
  """The run config with the evaluation encoder in place of the trained one."""
  out = copy.deepcopy(config)
  out.model.encoder = eval_spec
  return out


def param_shapes(config) -> dict[str, tuple]:
  """{path: (shape, dtype)} of the params of the model `config` builds (built once, then dropped: encoders
  check their inputs concretely, so an abstract trace cannot stand in)."""
  from relpos_jax.train import loop

  return _shapes(loop.build_model(config))


def with_encoder(model: nnx.Module, config, eval_spec: str) -> nnx.Module:
  """A model of `config` with encoder `eval_spec`, holding `model`'s (trained) parameters."""
  from relpos_jax.train import loop

  target = loop.build_model(eval_config(config, eval_spec))
  check_compatible(model, target, train_spec=str(config.model.encoder), eval_spec=eval_spec)
  nnx.update(target, nnx.state(model, nnx.Param))
  return target
