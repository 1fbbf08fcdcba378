"""A learned continuous bias: a small MLP of the relative position, one output per head.

    b(d) = MLP(phi(d)) in R^H,   d = j - i
    phi(d) = d                          input_transform='linear'  (CrossFormer's dynamic position bias)
    phi(d) = sign(d) * log(1 + |d|)     input_transform='log'     (Swin Transformer V2's log-spaced bias)

Wang et al. 2021 ("CrossFormer: A Versatile Vision Transformer Hinging on Cross-scale Attention", the DPB)
feed the raw relative coordinates to an MLP; Liu et al. 2022 ("Swin Transformer V2: Scaling Up Capacity and
Resolution", the log-spaced continuous position bias, section 3.3) feed sign(d) log(1 + |d|), which shrinks
the input range a longer sequence adds: going from 512 to 4096 tokens moves the largest input from 6.2 to
8.3 instead of multiplying it by 8, so the MLP extrapolates less. Both are 2-D (image windows); this is
their 1-D form.

The MLP: `depth` hidden layers of width `hidden_dim` with ReLU, then a linear layer to the heads. Defaults
are Swin V2's meta network (one hidden layer of 512, ReLU, log-spaced input). Not kept from Swin V2: its
normalisation of the coordinates to the window size before the log (there is no fixed window here) and its
16 * sigmoid on the output. Flax's default initialisation (LeCun-normal weights, zero biases).

Also home of the small MLP FIRE uses (`init_mlp`, `apply_mlp`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def init_mlp(rng: jax.Array, sizes: Sequence[int], *, torch_default: bool = False) -> list[dict]:
  """Layers [{'kernel': (n_in, n_out), 'bias': (n_out,)}, ...] for widths sizes[0] -> ... -> sizes[-1].

  Default: LeCun-normal kernels and zero biases (Flax's nn.Dense). `torch_default`: kernels and biases
  U(-1/sqrt(n_in), 1/sqrt(n_in)), PyTorch's nn.Linear default, which reference code written in PyTorch
  (FIRE) relies on.
  """
  layers = []
  for rng_layer, n_in, n_out in zip(jax.random.split(rng, len(sizes) - 1), sizes[:-1], sizes[1:]):
    kernel_rng, bias_rng = jax.random.split(rng_layer)
    if torch_default:
      bound = 1.0 / math.sqrt(n_in)
      kernel = jax.random.uniform(kernel_rng, (n_in, n_out), jnp.float32, -bound, bound)
      bias = jax.random.uniform(bias_rng, (n_out,), jnp.float32, -bound, bound)
    else:
      kernel = jax.nn.initializers.lecun_normal()(kernel_rng, (n_in, n_out), jnp.float32)
      bias = jnp.zeros((n_out,), jnp.float32)
    layers.append({'kernel': kernel, 'bias': bias})
  return layers


def apply_mlp(layers: Sequence[dict], x: jax.Array) -> jax.Array:
  """x (..., n_in) through the layers, ReLU between them and none after the last."""
  for n, layer in enumerate(layers):
    if n:
      x = jax.nn.relu(x)
    x = x @ layer['kernel'] + layer['bias']
  return x


def signed_log(d: jax.Array) -> jax.Array:
  """sign(d) * log(1 + |d|): Swin V2's log-spaced coordinates (natural log)."""
  return jnp.sign(d) * jnp.log1p(jnp.abs(d))


@register('mlp')
@dataclasses.dataclass(frozen=True)
class MLPBias(contract.ScalarBiasEncoder):
  hidden_dim: int = 512
  depth: int = 1
  input_transform: str = 'log'

  def __post_init__(self):
    validation.positive_int(self.name, 'hidden_dim', self.hidden_dim, maximum=validation.MAX_TABLE_ROWS)
    validation.positive_int(self.name, 'depth', self.depth, maximum=64)
    validation.choice(self.name, 'input_transform', self.input_transform, ('linear', 'log'))

  def init_params(self, rng, dims_):
    sizes = (1,) + (self.hidden_dim,) * self.depth + (dims_.num_heads,)
    return {'mlp': init_mlp(rng, sizes)}

  def features(self, rel) -> jax.Array:
    """The MLP's input for relative positions rel: rel.shape + (1,)."""
    d = jnp.asarray(rel, jnp.float32)[..., None]
    return signed_log(d) if self.input_transform == 'log' else d

  def bias(self, params, rel):
    return apply_mlp(params['mlp'], self.features(rel))
