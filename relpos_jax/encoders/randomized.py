"""Randomized positional encodings (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
Generalization of Transformers").

In training, a sequence of length L gets the positions of a sorted random subset of L distinct integers of
[0, max_position) instead of 0 .. L-1, so the model sees during training the large positions (and the large
distances) it will meet when evaluated on sequences up to max_position long; evaluation uses 0 .. L-1.
Sampling follows the reference code (google-deepmind/randomized_positional_encodings,
`noisy_fixed_positional_encodings`: `jax.random.choice(rng, arange(max), (L,), replace=False)`, then sort),
with one independent draw per example of the batch (the reference draws one subset for the whole batch).

`Randomized(base, max_position)` wraps any encoder and is indistinguishable from it to the attention layer:
same kind, same parameters, every method and property of the base delegated. Only `train_positions`
differs. `max_position` (the paper's L) must cover the longest evaluation length; the default 2048 covers the
paper's test lengths (trained up to N = 40, evaluated up to M = 500).
"""

from __future__ import annotations

import dataclasses
import numbers

import jax
import jax.numpy as jnp

from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def sample_positions(rng: jax.Array, batch: int, length: int, max_position: int) -> jax.Array:
  """(batch, length) int32: per example, a sorted subset of [0, max_position) drawn without replacement."""

  def one(key):
    return jnp.sort(jax.random.choice(key, max_position, shape=(length,), replace=False))

  return jax.vmap(one)(jax.random.split(rng, batch)).astype(jnp.int32)


@register('randomized')
@dataclasses.dataclass(frozen=True)
class Randomized(contract.WrapsBase, contract.Encoder):
  """`randomized(rope)`, `randomized(t5, max_position=4096)`: the base encoder, trained at random positions."""

  base: contract.Encoder
  max_position: int = 2048

  def __post_init__(self):
    if not isinstance(self.base, contract.Encoder):
      raise contract.invalid(self.name, 'base', self.base, 'an Encoder instance, e.g. make("rope")')
    # Randomizing twice has no meaning (only the outer draw would be used) and would hide a config mistake.
    contract.require(not isinstance(self.base, Randomized), self.name, 'base', self.base,
                     'an encoder that is not itself randomized')
    contract.require_positive_int(self.name, 'max_position', self.max_position)
    for part in getattr(self.base, 'parts', (self.base,)):
      # A position table must hold every position training can draw.
      if part.kind is contract.Kind.ABSOLUTE and part.max_length is not None:
        contract.require(self.max_position <= part.max_length, self.name, 'max_position', self.max_position,
                         f'<= {part.max_length}, the max_length of {type(part).__name__}, whose table '
                         f'cannot hold the positions training draws')

  # --- what differs from the base ---------------------------------------------------------------------------

  def train_positions(self, rng, batch, length):
    for field, value in (('batch', batch), ('length', length)):
      ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1
      contract.require(ok, self.name, field, value, 'a Python int >= 1')
    if length > self.max_position:
      raise ValueError(f'{self.name}: cannot draw length={length} distinct positions from '
                       f'max_position={self.max_position}; raise max_position to at least {length} '
                       f'(it should cover the longest evaluation length).')
    return sample_positions(rng, batch, length, self.max_position)

  @property
  def train_position_limit(self) -> int:
    return self.max_position

  # --- delegated: the attention layer sees the base ---------------------------------------------------------

  @property
  def kind(self):
    return self.base.kind

  @property
  def is_toeplitz(self):
    return self.base.is_toeplitz

  @property
  def clip_distance(self):
    return self.base.clip_distance

  @property
  def max_length(self):
    return self.base.max_length

  def init(self, rng, num_heads, *, head_dim=None, model_dim=None):
    return self.base.init(rng, num_heads, head_dim=head_dim, model_dim=model_dim)

  def init_params(self, rng, dims_):
    return self.base.init_params(rng, dims_)

  def bias(self, params, rel):
    return self.base.bias(params, rel)

  def pair_bias(self, params, q_pos, k_pos):
    return self.base.pair_bias(params, q_pos, k_pos)

  def rotate(self, params, x, positions):
    return self.base.rotate(params, x, positions)

  def rotate_queries(self, params, q, positions, **kwargs):
    return self.base.rotate_queries(params, q, positions, **kwargs)

  def rotate_keys(self, params, k, positions, **kwargs):
    return self.base.rotate_keys(params, k, positions, **kwargs)

  def key_embeddings(self, params, rel):
    return self.base.key_embeddings(params, rel)

  def value_embeddings(self, params, rel):
    return self.base.value_embeddings(params, rel)

  def query_biases(self, params):
    return self.base.query_biases(params)

  def embed(self, params, positions):
    return self.base.embed(params, positions)

  def check_positions(self, positions_upper_bound):
    return self.base.check_positions(positions_upper_bound)

  def __getattr__(self, attribute):
    # Anything else the base offers (parts, requires_causal, inverse_frequencies, ...). Guarded so copy /
    # pickle (which probe dunders before `base` exists) never recurse.
    if attribute == 'base' or attribute.startswith('__'):
      raise AttributeError(attribute)
    return getattr(self.base, attribute)
