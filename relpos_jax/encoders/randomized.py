"""Randomized positional encodings (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
Generalization of Transformers").

In training, a sequence of length L gets the positions of a sorted random subset of L distinct integers of
[0, max_position) instead of 0 .. L-1, so the model sees during training the large positions (and the large
distances) it will meet when evaluated on sequences up to max_position long; evaluation uses 0 .. L-1.
Sampling follows the reference code (google-deepmind/randomized_positional_encodings,
`noisy_fixed_positional_encodings`: `jax.random.choice(rng, arange(max), (L,), replace=False)`, then sort),
with one independent draw per example of the batch (the reference draws one subset for the whole batch).

`Randomized(base, max_position)` wraps any encoder; the attention layer sees the base (a wrapper is a
COMBINED encoder whose one child is the base), with the base's parameters. Only the training positions
differ, which the training pipeline asks for with `contract.train_positions(encoder, rng, batch, length)`.
`max_position` (the paper's L) must cover the longest evaluation length; the default 2048 covers the paper's
test lengths (trained up to N = 40, evaluated up to M = 500).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
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
  """`randomized(rope)`, `randomized(t5, max_position=4096)`: the base encoder, trained at random positions.

  A wrapper of kind COMBINED with one child, `base`: the attention layer and the model see the base (its
  leaves, `contract.leaves`), with the base's params; the training pipeline asks the tree for its positions
  (`contract.train_positions`), and this is the one encoder that answers. Its flags (carries_position,
  is_relative, requires_causal) are the base's (`contract.WrapsBase`).
  """

  base: contract.Encoder
  max_position: int = 2048

  kind = contract.Kind.COMBINED

  def __post_init__(self):
    validation.require(
        isinstance(self.base, contract.Encoder), self.name, 'base', self.base, 'an Encoder instance, e.g. make("rope")'
    )
    # Randomizing twice has no meaning (only one draw can be used) and would hide a config mistake.
    nested = [node for node in contract.walk(self.base) if node.train_position_limit is not None]
    validation.require(
        not nested,
        self.name,
        'base',
        self.base,
        'an encoder that is not itself randomized and holds no randomized part',
    )
    validation.positive_int(self.name, 'max_position', self.max_position, maximum=validation.MAX_TABLE_ROWS)
    validation.require(
        self.base.reads_positions,
        self.name,
        'base',
        self.base,
        f'an encoder that reads positions: {self.base.name or "this one"} reads none, so training it at '
        'random positions changes nothing',
    )
    contract.check_position_draws(self.name, 'max_position', self.max_position, (self,))

  def children(self):
    return (self.base,)

  @property
  def train_position_limit(self) -> int:
    return self.max_position

  def terms(self, params):
    """(base, params): the one term, read with the base's params (the COMBINED contract)."""
    return ((self.base, params),)

  def init(self, rng, num_heads, *, head_dim=None, model_dim=None):
    """The base's params: what the layer, which sees the base, reads."""
    return self.base.init(rng, num_heads, head_dim=head_dim, model_dim=model_dim)

  def train_positions(self, rng, batch, length):
    """(batch, length) int32 positions drawn from [0, max_position) (use `contract.train_positions`)."""
    batch = validation.positive_int(self.name, 'batch', batch)
    length = validation.positive_int(self.name, 'length', length)
    if length > self.max_position:
      raise ValueError(
          f'{self.name}: cannot draw length={length} distinct positions from '
          f'max_position={self.max_position}; raise max_position to at least {length} '
          f'(it should cover the longest evaluation length).'
      )
    return sample_positions(rng, batch, length, self.max_position)
