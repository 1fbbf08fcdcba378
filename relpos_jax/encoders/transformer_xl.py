"""Transformer-XL relative attention (Dai et al. 2019, section 3.3), as a vector-relative encoder.

The paper's score between query i and key j, with E the inputs, R a sinusoid table of the distance i - j,
W_{k,R} a projection of R (learnable) and u, v learnable per-head vectors that replace the query's absolute
position terms:

    A_ij = q_i . k_j  +  q_i . W_R R_{i-j}  +  u . k_j  +  v . W_R R_{i-j}          (terms a, b, c, d)
         = (q_i + u) . k_j  +  (q_i + v) . W_R R_{i-j}

In relpos_jax's convention the relative position is rel = j - i, so the paper's distance is i - j = -rel:
a causal model sees rel <= 0, i.e. non-negative paper distances, as in the reference code
(kimiyoung/transformer-xl, `pos_seq = arange(klen - 1, -1, -1)`).

  R_d    = [sin(d theta_0 .. d theta_{d_R/2-1}), cos(d theta_0 .. )],  theta_k = base^(-2k / d_R)
           (sines then cosines, the reference `PositionalEmbedding`; base 10000)
  W_R    (d_R, num_heads, head_dim), learnable (the reference `r_net`, no bias)
  u, v   (num_heads, head_dim), learnable (the reference `r_w_bias`, `r_r_bias`)

so `key_embeddings(params, rel) = R_{-rel} @ W_R`, `query_biases(params) = (u, v)` and there are no value
embeddings. d_R is `embedding_dim` when set, else `model_dim` when `init` is given one (the paper's choice:
R has the model's width), else num_heads * head_dim. Initialisation as the reference: normal, stddev 0.02.
`max_distance` (None: unbounded) clips |i - j| as the reference's `clamp_len`, and is then the encoder's
`clip_distance`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders import rope
from relpos_jax.encoders import rope_scaling
from relpos_jax.encoders.registry import register


def sinusoid(distance, dim: int, base: float = 10000.0) -> jax.Array:
  """[sin(d theta), cos(d theta)] with theta_k = base^(-2k / dim): distance.shape + (dim,), float32.

  The phases are exact (`rope.rotary_angles`), so far distances are encoded as accurately as near ones.
  """
  angles = rope.rotary_angles(distance, rope_scaling.default_inverse_frequencies(dim, base))
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


@register('transformer_xl')
@dataclasses.dataclass(frozen=True)
class TransformerXL(contract.VectorRelativeEncoder):
  embedding_dim: int | None = None
  base: float = 10000.0
  max_distance: int | None = None
  init_stddev: float = 0.02

  def __post_init__(self):
    if self.embedding_dim is not None:
      validation.positive_int(
          self.name, 'embedding_dim', self.embedding_dim, minimum=2, maximum=validation.MAX_TABLE_ROWS
      )
      validation.require(
          self.embedding_dim % 2 == 0,
          self.name,
          'embedding_dim',
          self.embedding_dim,
          'an even int (sines and cosines in equal numbers) or None',
      )
    validation.number(self.name, 'base', self.base, above=1)
    if self.max_distance is not None:
      validation.positive_int(
          self.name, 'max_distance', self.max_distance, minimum=0, maximum=(validation.MAX_TABLE_ROWS - 1) // 2
      )
    validation.number(self.name, 'init_stddev', self.init_stddev, above=0)

  @property
  def clip_distance(self):
    return self.max_distance

  def relative_embedding_dim(self, dims_: contract.Dims) -> int:
    """d_R: embedding_dim, else model_dim, else num_heads * head_dim."""
    if self.embedding_dim is not None:
      return self.embedding_dim
    if dims_.model_dim is not None:
      return dims_.model_dim
    return dims_.num_heads * dims_.head_dim

  def init_params(self, rng, dims_):
    d_r = self.relative_embedding_dim(dims_)
    if d_r % 2:
      raise validation.invalid(
          self.name,
          'relative embedding dim d_R',
          d_r,
          'an even int: set embedding_dim, or an even model_dim / num_heads * head_dim',
      )
    init = jax.nn.initializers.normal(self.init_stddev)
    w_rng, u_rng, v_rng = jax.random.split(rng, 3)
    heads = (dims_.num_heads, dims_.head_dim)
    return {
        'w_r': init(w_rng, (d_r,) + heads, jnp.float32),
        'u': init(u_rng, heads, jnp.float32),
        'v': init(v_rng, heads, jnp.float32),
    }

  def relative_embeddings(self, params, rel) -> jax.Array:
    """R_{i-j} for rel = j - i (clipped to max_distance): rel.shape + (d_R,)."""
    distance = -jnp.asarray(rel, jnp.int32)
    if self.max_distance is not None:
      distance = jnp.clip(distance, -self.max_distance, self.max_distance)
    return sinusoid(distance, params['w_r'].shape[0], self.base)

  def key_embeddings(self, params, rel):
    r = self.relative_embeddings(params, rel)
    return jnp.einsum('...r,rhd->...hd', r, params['w_r'])

  def query_biases(self, params):
    return params['u'], params['v']
