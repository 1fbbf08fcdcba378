"""Train with X, evaluate with Y: a trained model's parameters in a model built with another encoder.

    model = with_encoder(result.model, config, 'rope(scaling="yarn", factor=16.0)')
    evaluate_lengths(model, data, [64, 1024])

Inference-time extensions (PI / NTK / YaRN scalings, Self-Extend, ReRoPE) change no parameter: the
evaluation encoder must have exactly the trained parameters (same paths, same shapes), or `check_compatible`
raises a ValueError listing what differs (a learned table trained with one size cannot be read with another).
It must also be the trained encoder extended, not another one (`check_same_encoders`): `alibi -> rope` has
the same (empty) position parameters, yet evaluates attention trained with a bias under a rotation it never
saw, which measures nothing.
"""

from __future__ import annotations

import collections

import jax
from flax import nnx

from relpos_jax.encoders import contract
from relpos_jax.encoders import spec as spec_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train import loop


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


def _trained_kinds(encoder: contract.Encoder) -> collections.Counter:
  """The encoder classes a model reads positions with, inference-time remaps replaced by their base (a
  scaling of RoPE is the same class): what a transfer must keep."""
  found = collections.Counter()
  for leaf in contract.leaves(encoder):
    found.update(_trained_kinds(leaf.base) if leaf.kind is contract.Kind.POSITION_REMAP else (type(leaf).__name__,))
  return found


def _layers(encoder_spec) -> tuple[contract.Encoder, ...]:
  layers = spec_lib.layer_specs(encoder_spec)
  return tuple(spec_lib.from_spec(s) for s in (layers or (encoder_spec,)))


def check_same_encoders(train_spec, eval_spec) -> None:
  """ValueError unless `eval_spec` is `train_spec` extended at inference (a RoPE scaling, a remap of the same
  base), layer by layer: another encoder would evaluate attention trained under one encoding with another."""
  trained, evaluated = _layers(train_spec), _layers(eval_spec)
  kinds = [(_trained_kinds(a), _trained_kinds(b)) for a, b in zip(trained, evaluated)]
  if len(trained) != len(evaluated) or any(a != b for a, b in kinds):
    raise ValueError(
        f'evaluation encoder {eval_spec!r} is not an inference-time extension of the training encoder '
        f'{train_spec!r} (it reads positions with {[sorted(b.elements()) for _, b in kinds]}, training used '
        f'{[sorted(a.elements()) for a, _ in kinds]}): a transfer evaluates the trained model with a scaling '
        'or a remap of the encoder it was trained with (rope -> rope(scaling="yarn", ...), rope -> '
        'self_extend(rope), t5 -> rerope(t5)).'
    )


def check_compatible(trained, evaluated, *, train_spec: str | None = None, eval_spec: str | None = None) -> None:
  """ValueError unless the two models (or their `param_shapes`) have the same params, and (given both specs)
  the evaluation encoder is the trained one extended (`check_same_encoders`)."""
  a, b = _shapes(trained), _shapes(evaluated)
  if a == b:
    if train_spec is not None and eval_spec is not None:
      check_same_encoders(train_spec, eval_spec)
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
      f'evaluation encoder {eval_spec or "(unnamed)"!r} cannot take the parameters trained with '
      f'{train_spec or "(unnamed)"!r}: '
      + '; '.join(details)
      + '. Evaluate with an encoder of the same parameters (a scaling or '
      'remap of the trained one), or train with it.'
  )


def with_eval_encoder(config: config_lib.Config, eval_spec: str) -> config_lib.Config:
  """The run config with the evaluation encoder in place of the trained one (checked: a bad spec names the key)."""
  return config.derive(encoder=eval_spec)


def param_shapes(config: config_lib.Config) -> dict[str, tuple]:
  """{path: (shape, dtype)} of the params of the model `config` builds (built once, then dropped: encoders
  check their inputs concretely, so an abstract trace cannot stand in)."""
  return _shapes(loop.build_model(config))


def with_encoder(model: nnx.Module, config: config_lib.Config, eval_spec: str) -> nnx.Module:
  """A model of `config` with encoder `eval_spec`, holding `model`'s (trained) parameters."""
  target = loop.build_model(with_eval_encoder(config, eval_spec))
  check_compatible(model, target, train_spec=config.encoder_spec, eval_spec=eval_spec)
  nnx.update(target, nnx.state(model, nnx.Param))
  return target
