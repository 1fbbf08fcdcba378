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

Also home of the small MLP FIRE uses (`init_mlp`, `apply_mlp`, and `apply_scalar_mlp`, the same function
evaluated as the piecewise-linear function it is).
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


def apply_scalar_mlp(layers: Sequence[dict], x: jax.Array) -> jax.Array:
  """A one-hidden-layer ReLU MLP of a scalar, x (...) -> (..., n_out): apply_mlp's function, read as the lines it
  is made of.

      f(x) = b2 + sum_k w2_k relu(w1_k x + b1_k)

  is piecewise linear: hidden unit k switches at its kink x = -b1_k / w1_k, so between consecutive kinks the
  set of active units is fixed and f is one line, f(x) = A_s x + B_s, with

      A_s = sum_{k active in s} w1_k w2_k,     B_s = b2 + sum_{k active in s} b1_k w2_k.

  The (width + 1) pieces' (A_s, B_s) are computed once from the parameters; each x then costs a search among
  the sorted kinks and one multiply-add per output, where apply_mlp costs width x (n_out + 2) per x. FIRE
  evaluates its MLP on every (query, key) pair, so this is most of its bias's cost (docs/benchmarks.md, FIRE's
  MLP as its pieces). Equal to apply_mlp in exact arithmetic, value and gradient (A_s and B_s carry the
  parameters' gradients; the kinks only choose the piece, as ReLU's mask does); float32 rounding differs.

  Which units are active in a piece is read from the kinks' order, not by evaluating units at a point (a
  point between two kinks 1e30 apart, or equal ones, rounds onto a kink): piece s holds the x with exactly s
  kinks <= x; a unit with w1 > 0 is on in the pieces after its kink, one with w1 < 0 in those up to it, and
  one with w1 = 0 is on everywhere or nowhere by the sign of b1.
  """
  if len(layers) != 2 or layers[0]['kernel'].shape[0] != 1:
    sizes = [layers[0]['kernel'].shape[0]] + [layer['kernel'].shape[1] for layer in layers]
    raise ValueError(
        f'apply_scalar_mlp: layers of sizes {sizes}; allowed: one input and one hidden layer ([1, width, n_out]).'
    )
  first, second = layers
  w1, b1 = first['kernel'][0], first['bias']
  flat = w1 == 0
  kinks = jnp.where(flat, jnp.inf, -b1 / jnp.where(flat, 1.0, w1))
  rank = jnp.argsort(jnp.argsort(kinks))  # the unit's place among the sorted kinks
  kinks = jax.lax.stop_gradient(jnp.sort(kinks))
  piece = jnp.arange(w1.shape[0] + 1)[:, None]  # (width + 1, 1): s kinks <= x
  active = jnp.where(flat, b1 > 0, jnp.where(w1 > 0, rank < piece, rank >= piece))
  active = jax.lax.stop_gradient(active.astype(w1.dtype))  # (width + 1, width)
  slope = (active * w1) @ second['kernel']
  intercept = (active * b1) @ second['kernel'] + second['bias']
  s = jnp.searchsorted(kinks, x, side='right', method='compare_all')
  return jnp.take(slope, s, axis=0) * x[..., None] + jnp.take(intercept, s, axis=0)


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
