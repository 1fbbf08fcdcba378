"""DAPE, data-adaptive positional encoding (Zheng, Gao, Shi, Huang, Li, Xiong, Ren, Ng, Jiang, Li & Li 2024,
"DAPE: Data-Adaptive Positional Encoding for Length Extrapolation", NeurIPS 2024; v2: Zheng et al. 2024/2025,
"DAPE V2: Process Attention Score as Feature Map for Length Extrapolation").

A scalar bias B (ALiBi, KERPLE, FIRE, ...: the `base`) is not simply added to the attention logits A; a small
network reads both, per query-key pair and across heads, and corrects their sum:

    logits = A + B + f([A; B]),      A = q . k / sqrt(d) (+ every other term), B = the base's bias,

  version 1   f: an MLP over the 2H channels of each pair (i, j): Linear(2H, w) -> LeakyReLU -> Linear(w, H);
  version 2   f: two 1 x k convolutions along the keys (DAPE_{1x3} for k = 3), same channels and activation,
              zero padding k // 2: the score at (i, j) also sees its neighbours (i, j - 2) .. (i, j + 2).

Reference: chuanyang-Zheng/DAPE, `DAPE.py` (`AliBi_DAPE`, `ParallelKerpleLog_DAPE`, `FIRE_DAPE`: `mlp2 =
Sequential(Linear(2 num_heads, mlp_width), LeakyReLU(), Linear(mlp_width, num_heads))`, `return x + a +
mlp2(cat(x, a))` on the scaled scores x before the mask and softmax) and
`megatron/model/positional_embeddings.py` (`Alibi_DAPEV2`: `Conv2d(2 num_heads, mlp_width, (1, k), padding
(0, k // 2))`, LeakyReLU, `Conv2d(mlp_width, num_heads, (1, k), ...)` applied to `tril(cat(x, a))`, i.e. with
the scores of future keys zeroed so that no future score leaks into a past one). Published defaults:
mlp_width = 32, kernel_size = 3, PyTorch's default initialisation of Linear and Conv2d layers.

Here the masked entries (future keys *and* padded keys) are zeroed before f, which is the reference's tril
for a causal square and keeps padding transparent: a left-padded sequence sees zeros beside its first key,
exactly the convolution's own zero padding. One deliberate difference in version 2: the hidden activations
of masked entries are zeroed too, before the second convolution. In the reference the hidden value at
(i, i + 1) is the first layer's bias plus a function of row i, which the diagonal then reads -- except on
the last row of the sequence, where (i, i + 1) falls off the edge into the zero padding; so a row's logits
depend on whether it is the last one, and cached decoding (a longer cache) could not reproduce them.
Zeroing gives every row the border the last row has. Causal or bidirectional as the base allows. Cost: f runs on
every (i, j), so its hidden activations are w / H times the size of the attention matrix (w = 32).

Kind SCORE_TRANSFORM: it wraps a scalar-bias encoder (`dape(kerple_log)`, `dape(alibi, version=2)`); the
layer computes A from every other part and B from the base, then applies the transform.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract, matrices
from relpos_jax.encoders.registry import register

LEAKY_SLOPE = 0.01  # torch.nn.LeakyReLU's default negative slope.


def _torch_uniform(rng, shape, fan_in):
  bound = 1.0 / math.sqrt(fan_in)
  return jax.random.uniform(rng, shape, jnp.float32, -bound, bound)


def init_channel_layers(rng, channels, kernel_size: int) -> list[dict]:
  """PyTorch-default Linear (kernel_size None) or Conv2d (1 x kernel_size) layers: kernels (k, in, out)."""
  layers = []
  for layer_rng, n_in, n_out in zip(jax.random.split(rng, len(channels) - 1), channels[:-1], channels[1:]):
    kernel_rng, bias_rng = jax.random.split(layer_rng)
    fan_in = n_in * kernel_size
    layers.append(
        {
            'kernel': _torch_uniform(kernel_rng, (kernel_size, n_in, n_out), fan_in),
            'bias': _torch_uniform(bias_rng, (n_out,), fan_in),
        }
    )
  return layers


def conv_along_keys(x: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
  """x (B, Lq, Lk, C_in), kernel (k, C_in, C_out) -> (B, Lq, Lk, C_out), zero padding k // 2 on each side."""
  size = kernel.shape[0]
  pad = size // 2
  padded = jnp.pad(x, [(0, 0), (0, 0), (pad, size - 1 - pad), (0, 0)])
  k_len = x.shape[2]
  out = bias
  for m in range(size):
    out = out + jnp.einsum('bijc,cd->bijd', padded[:, :, m : m + k_len], kernel[m])
  return out


@register('dape')
@dataclasses.dataclass(frozen=True)
class DAPE(contract.WrapsBase, contract.ScoreTransformEncoder):
  """`dape(alibi)`, `dape(kerple_log, version=2)`: the base's bias, corrected by a function of (A, B)."""

  base: contract.Encoder
  version: int = 1
  mlp_width: int = 32
  kernel_size: int = 3

  def __post_init__(self):
    ok = isinstance(self.base, contract.Encoder) and self.base.kind is contract.Kind.SCALAR_BIAS
    validation.require(
        ok, self.name, 'base', self.base, 'a scalar-bias encoder (alibi, kerple_log, fire, t5, ...), e.g. make("alibi")'
    )
    validation.choice(self.name, 'version', self.version, (1, 2))
    validation.positive_int(self.name, 'mlp_width', self.mlp_width, maximum=validation.MAX_TABLE_ROWS)
    # One product per tap is unrolled: kernel_size=1000001 compiled for minutes at 4 GB on length 8.
    validation.positive_int(self.name, 'kernel_size', self.kernel_size, maximum=validation.MAX_KERNEL)
    validation.require(
        self.kernel_size % 2 == 1, self.name, 'kernel_size', self.kernel_size, 'an odd int (centred on the key)'
    )
    validation.require(
        self.version == 2 or self.kernel_size == 3,
        self.name,
        'kernel_size',
        self.kernel_size,
        'only with version=2 (version 1 is a per-pair MLP)',
    )

  def init(self, rng, num_heads, *, head_dim=None, model_dim=None):
    dims_ = self.init_dims(num_heads, head_dim=head_dim, model_dim=model_dim)
    base_rng, mlp_rng = jax.random.split(rng)
    size = 1 if self.version == 1 else self.kernel_size
    return {
        'dims': dims_,
        'base': self.base.init(base_rng, num_heads, head_dim=head_dim, model_dim=model_dim),
        'layers': init_channel_layers(mlp_rng, (2 * num_heads, self.mlp_width, num_heads), size),
    }

  def children(self):
    return (self.base,)

  @property
  def key_halo(self) -> int:
    """Version 2's two 1 x k convolutions: the logit at (i, j) reads keys j - 2 (k // 2) .. j + 2 (k // 2)."""
    return 0 if self.version == 1 else 2 * (self.kernel_size // 2)

  def base_bias(self, params, q_len: int, k_len: int, *, q_offset=0, q_positions=None, k_positions=None):
    """B: the base's bias, (H, Lq, Lk) for contiguous positions, (B, H, Lq, Lk) at explicit ones."""
    if q_positions is None:
      return matrices.bias_matrix(self.base, params['base'], q_len, k_len, q_offset)
    return matrices.bias_at_positions(self.base, params['base'], q_positions, k_positions)

  def correction(self, params, scores: jax.Array, bias: jax.Array, valid: jax.Array | None = None) -> jax.Array:
    """f([A; B]): scores, bias (B, H, Lq, Lk) float32 (zero where masked) -> (B, H, Lq, Lk).

    valid (B|1, 1, Lq, Lk): version 2 also zeroes the hidden activations of masked entries, so every
    row meets the same zero border (see the module docstring).
    """
    x = jnp.concatenate([scores, bias], axis=1)  # (B, 2H, Lq, Lk)
    x = jnp.moveaxis(x, 1, -1)  # channels last
    hidden_valid = None if valid is None else jnp.moveaxis(valid, 1, -1)  # (B|1, Lq, Lk, 1)
    for n, layer in enumerate(params['layers']):
      if n:
        x = jax.nn.leaky_relu(x, LEAKY_SLOPE)
        if self.version == 2 and hidden_valid is not None:
          x = jnp.where(hidden_valid, x, 0.0)
      if self.version == 1:
        x = x @ layer['kernel'][0] + layer['bias']
      else:
        x = conv_along_keys(x, layer['kernel'], layer['bias'])
    return jnp.moveaxis(x, -1, 1)

  def transform(self, params, scores: jax.Array, bias: jax.Array, valid: jax.Array | None) -> jax.Array:
    """A + B + f([A; B]) with masked entries zeroed before f (the reference's tril)."""
    scores = jnp.asarray(scores, jnp.float32)
    bias = jnp.broadcast_to(jnp.asarray(bias, jnp.float32), scores.shape)
    if valid is not None:
      scores_in, bias_in = jnp.where(valid, scores, 0.0), jnp.where(valid, bias, 0.0)
    else:
      scores_in, bias_in = scores, bias
    return scores + bias + self.correction(params, scores_in, bias_in, valid)
