"""A sum of encoders: the lecture's "combine absolute and relative" (section 5c), and several biases at once.

    combine(sinusoidal, t5)          x + p_i at the input, and b_h(j - i) in the scores
    combine(absolute_score, t5)      scores += R + P, the lecture's formula literally
    combine(rope, alibi)             rotated q, k, and a bias

The attention layer adds every part's term by the part's own kind, so a combination needs nothing of its
own. Nested combinations flatten (combine(a, combine(b, c)) == combine(a, b, c)), which keeps one canonical
form for equality, hashing (jit caching) and `spec.to_spec` ("a + b + c").

Rejected: fewer than two parts (use the encoder itself); two rotary parts (rotating twice composes the
rotations into a different encoding, not a sum); two input-level absolute parts (x + p_i + p'_i is one
absolute encoding with two tables, which nobody means); two normalizers (one function replaces the
softmax); two parts that replace the content logit (PaTH).
"""

from __future__ import annotations

import dataclasses

import jax

from relpos_jax.encoders import contract


@dataclasses.dataclass(frozen=True)
class Combined(contract.Encoder):
  """The sum of `parts`' contributions; params = {'dims': ..., 'parts': (params of each part, ...)}."""

  parts: tuple[contract.Encoder, ...]

  kind = contract.Kind.COMBINED
  name = 'combined'  # For messages only: built with `combine` or `a + b` in a spec, not with `make`.

  def __post_init__(self):
    parts = self.parts
    contract.require(isinstance(parts, (tuple, list)), self.name, 'parts', parts, 'a tuple of encoders')
    flat = []
    for part in parts:
      contract.require(isinstance(part, contract.Encoder), self.name, 'parts', part,
                   'encoders only (e.g. relpos_jax.encoders.make("t5"))')
      flat.extend(part.parts if isinstance(part, Combined) else (part,))
    object.__setattr__(self, 'parts', tuple(flat))
    contract.require(len(flat) >= 2, self.name, 'parts', self.parts,
                 'at least two encoders (a single encoder is used as it is)')
    for kind, why in ((contract.Kind.ROTARY, 'rotating twice composes into another rotation, not a sum'),
                      (contract.Kind.ABSOLUTE, 'one input-level absolute encoding per model'),
                      (contract.Kind.NORMALIZER, 'one function replaces the softmax')):
      same = [p for p in flat if p.kind is kind]
      contract.require(len(same) <= 1, self.name, 'parts', self.parts,
                   f'at most one {kind.value} part ({why}); got {len(same)}')
    replacing = [p for p in flat if getattr(p, 'replaces_content', False) and p.kind is contract.Kind.CONTEXTUAL]
    contract.require(len(replacing) <= 1, self.name, 'parts', self.parts,
                     f'at most one part that replaces the content logit q . k (path); got {len(replacing)}')

  @property
  def carries_position(self) -> bool:
    return any(p.carries_position for p in self.parts)

  @property
  def is_relative(self) -> bool:
    return all(p.is_relative for p in self.parts)

  def init(self, rng, num_heads, *, head_dim=None, model_dim=None):
    """Each part initialised with its own split of rng, for the same num_heads / head_dim / model_dim."""
    dims_ = contract.check_init_dims(self.name, num_heads, head_dim, model_dim)
    rngs = jax.random.split(rng, len(self.parts))
    parts = tuple(part.init(part_rng, num_heads, head_dim=head_dim, model_dim=model_dim)
                  for part, part_rng in zip(self.parts, rngs))
    return {'dims': dims_, 'parts': parts}

  def terms(self, params) -> tuple[tuple[contract.Encoder, contract.Params], ...]:
    """(part, part params) pairs, the way the attention layer walks a combination."""
    return tuple(zip(self.parts, params['parts']))

  def train_positions(self, rng, batch, length):
    """The first part's sampled positions (a randomized part), None when no part samples any."""
    for part in self.parts:
      positions = part.train_positions(rng, batch, length)
      if positions is not None:
        return positions
    return None

  def check_positions(self, positions_upper_bound: int) -> None:
    """Raises ValueError if a part with a bounded table (a learned absolute one) lacks a position."""
    for part in self.parts:
      check = getattr(part, 'check_positions', None)
      if check is not None:
        check(positions_upper_bound)


def combine(*encoders: contract.Encoder) -> Combined:
  """The sum of two or more encoders (nested sums flatten); see the module docstring for what is refused."""
  return Combined(parts=tuple(encoders))
