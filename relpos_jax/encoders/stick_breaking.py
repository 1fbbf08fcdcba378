"""Stick-breaking attention (Tan, Shen, Peng, Courville & Panda 2024, "Scaling Stick-Breaking Attention: An
Efficient Implementation and In-depth Study", ICLR 2025).

No softmax: query i walks back from the nearest key and breaks off a piece of a unit stick at each,

    beta_ij = sigmoid(z_ij),    A_ij = beta_ij prod_{j < k < i} (1 - beta_ik),    z_ij = q_i . k_j / sqrt(d),

so the nearest keys get first claim and a key's weight shrinks with every key between it and the query that
the query attends to: a learned, content-dependent recency. Computed in log space,

    log A_ij = log sigmoid(z_ij) + sum_{j < k < i} log sigmoid(-z_ik),

with one reverse cumulative sum along the row (L x L memory, like ordinary attention).

Reference: shawntan/stickbreaking-attention, `stickbreaking_attention/sb_ref.py` (`stickbreaking(q, k, v,
mask, cum_weight)`) and its tests: `log_z = logsigmoid(logits)` (-1e5 where masked), `log_beta =
logsigmoid(-logits)` (0 where masked), `cum_weight = tril(ones, -1)` so the product runs over k with
j < k (strictly) and over the keys the mask leaves; the default `attend_current=False` masks the diagonal,
so k < i and j < i. The weights sum to at most 1; the remainder `rem = 1 - sum_j A_ij` goes to the query's
own value (`o + rem[..., None] * v` in the reference tests). `attend_current=True` lets the query attend
to itself (j <= i, products over j < k <= i).

Kind NORMALIZER: it replaces the softmax and takes the logits the other parts build (content, biases,
contextual terms), so `rope + stick_breaking` and `alibi + stick_breaking` compose. Padded keys are
transparent (no weight, no break). Causal only (`requires_causal`): the stick is broken from the query
backwards.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register

# Chunk of the blocked cumulative sum below: 32 keys make the within-chunk product about half the cost of
# q . k at head size 64, and the chunk totals' product 1/32 of it.
_CUMSUM_CHUNK = 32


def reverse_exclusive_cumsum(x: jax.Array, chunk: int = _CUMSUM_CHUNK) -> jax.Array:
  """out[..., j] = sum_{k > j} x[..., k].

  Two small triangular matrix products (within chunks of `chunk` keys, then across the chunks' totals)
  instead of jnp.cumsum: on a CPU XLA lowers a cumulative sum to a sequence of shifted adds over the whole
  tile, about 5x the cost of q . k on a 512 x 512 tile; the products cost about half of it (benchmarks.md 4d).
  HIGHEST precision: these sums enter an exp, and a bf16 pass (a TPU's default) would bend the weights.
  """
  n = x.shape[-1]
  strictly_after = lambda m: jnp.tril(jnp.ones((m, m), x.dtype), -1)  # M[k, j] = 1 where k > j
  product = functools.partial(jnp.einsum, precision=jax.lax.Precision.HIGHEST)
  if n <= chunk:
    return product('...k,kj->...j', x, strictly_after(n))
  num_chunks = -(-n // chunk)
  padded = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, num_chunks * chunk - n)])  # zeros after: sums unchanged
  chunks = padded.reshape(*x.shape[:-1], num_chunks, chunk)
  within = product('...ck,kj->...cj', chunks, strictly_after(chunk))
  after = product('...c,cd->...d', jnp.sum(chunks, axis=-1), strictly_after(num_chunks))
  return (within + after[..., None]).reshape(*x.shape[:-1], num_chunks * chunk)[..., :n]


def stick_breaking_weights(logits: jax.Array, allowed: jax.Array, carry=0.0) -> tuple[jax.Array, jax.Array]:
  """A_ij = sigmoid(z_ij) prod_{k > j, allowed} (1 - sigmoid(z_ik)) where allowed, else 0, for one tile of keys.

  carry (..., Lq): sum_k log(1 - sigmoid(z_ik)) over the allowed keys after the tile (nearer the query; 0 for
  the nearest tile). Returns (A, the carry for the next, farther, tile).
  """
  # log(1 - beta) = log sigmoid(-z) = -softplus(z), computed once; log beta = z + log(1 - beta) then costs
  # one add instead of a second softplus (the reference's log_beta is this log(1 - beta), masked). log, not
  # log1p: exp(-|z|) < 6e-8 is all log1p would keep, and log costs two thirds of it on a CPU.
  log_rest = -(jnp.maximum(logits, 0.0) + jnp.log(1.0 + jnp.exp(-jnp.abs(logits))))
  log_breaks = jnp.where(allowed, log_rest, 0.0)
  log_att = logits + log_rest + reverse_exclusive_cumsum(log_breaks) + jnp.asarray(carry)[..., None]
  weights = jnp.where(allowed, jnp.exp(jnp.where(allowed, log_att, 0.0)), 0.0)
  return weights, carry + jnp.sum(log_breaks, axis=-1)


@register('stick_breaking')
@dataclasses.dataclass(frozen=True)
class StickBreaking(contract.NormalizerEncoder):
  attend_current: bool = False
  remainder_to_self: bool = True

  requires_causal = True
  carries_position = True  # The break order is the key order: the layer knows position without any term.
  tiles = True  # Key tiles from the nearest to the farthest, carrying sum log(1 - beta) per row.

  def __post_init__(self):
    for field in ('attend_current', 'remainder_to_self'):
      value = getattr(self, field)
      validation.require(isinstance(value, bool), self.name, field, value, 'True or False')

  def allowed(self, valid: jax.Array, q_index: jax.Array, k_index: jax.Array) -> jax.Array:
    """valid (B|1, 1, Lq, Lk) bool, the key index of each query (Lq,) and key (Lk,): the pairs given weight."""
    if self.attend_current:
      return valid
    return valid & (k_index[None, :] != q_index[:, None])[None, None]

  def initial_carry(self, shape) -> jax.Array:
    return jnp.zeros(shape, jnp.float32)

  def tile_weights(self, logits, allowed, carry):
    return stick_breaking_weights(jnp.asarray(logits, jnp.float32), allowed, carry)

  def weights(self, params, logits, ctx):
    del params
    allowed = self.allowed(ctx.valid, ctx.q_index, jnp.arange(logits.shape[-1], dtype=jnp.int32))
    weights, _ = self.tile_weights(logits, allowed, self.initial_carry(logits.shape[:-1]))
    remainder = 1.0 - jnp.sum(weights, axis=-1) if self.remainder_to_self else None
    return weights, remainder
