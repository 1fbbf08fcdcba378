"""A sum of encoders: the lecture's "combine absolute and relative" (section 5c), and several biases at once.

    combine(sinusoidal, t5)          x + p_i at the input, and b_h(j - i) in the scores
    combine(absolute_score, t5)      scores += R + P, the lecture's formula literally
    combine(rope, alibi)             rotated q, k, and a bias

The attention layer adds every part's term by the part's own kind, so a combination needs nothing of its
own. Nested combinations flatten (combine(a, combine(b, c)) == combine(a, b, c)), which keeps one canonical
form for equality, hashing (jit caching) and `spec.to_spec` ("a + b + c").

Rejected: fewer than two parts (use the encoder itself); two rotary parts, counting the rotary base of a
remap (rotating twice composes the rotations into a different encoding, not a sum: `rerope(rope) + rope`
would rotate at doubled positions); two input-level absolute parts (x + p_i + p'_i is one absolute encoding
with two tables, which nobody means); two normalizers (one function replaces the softmax); two score
transforms that read neighbouring keys (DAPE version 2: one halo of extra key columns per tile); two parts that
replace the content logit (PaTH); a position remap beside PaTH (no q . k to remap); PoPE, whose rotation
doubles the features of q and k, beside a part that multiplies them by vectors of head_dim features
(shaw_vector, transformer_xl, cope, path); randomized positions that an absolute table of the sum cannot
hold (`randomized(rope, max_position=4096) + learned(max_length=64)`). Two remaps of scalar biases are a
sum: each base's bias at its own remapped positions (`rerope(alibi) + self_extend(t5)`); two of rotary bases
fall under the one-rotary rule (`self_extend(rope) + rerope(rope)` would keep only the last one's scores).
"""

from __future__ import annotations

import dataclasses

import jax

from relpos_jax import validation
from relpos_jax.encoders import contract

# The most parts a sum may have: a sum is a handful of terms; thousands are a generated mistake.
MAX_PARTS = 64


@dataclasses.dataclass(frozen=True)
class Combined(contract.Encoder):
  """The sum of `parts`' contributions; params = {'dims': ..., 'parts': (params of each part, ...)}."""

  parts: tuple[contract.Encoder, ...]

  kind = contract.Kind.COMBINED
  name = 'combined'  # For messages only: built with `combine` or `a + b` in a spec, not with `make`.

  def __post_init__(self):
    parts = self.parts
    validation.require(isinstance(parts, (tuple, list)), self.name, 'parts', parts, 'a tuple of encoders')
    flat = []
    for part in parts:
      validation.require(
          isinstance(part, contract.Encoder),
          self.name,
          'parts',
          part,
          'encoders only (e.g. relpos_jax.encoders.make("t5"))',
      )
      flat.extend(part.parts if isinstance(part, Combined) else (part,))
    object.__setattr__(self, 'parts', tuple(flat))
    validation.require(
        2 <= len(flat) <= MAX_PARTS,
        self.name,
        'parts',
        self.parts,
        f'at least two encoders (a single encoder is used as it is) and at most {MAX_PARTS}',
    )
    drawing = [p for part in flat for p in contract.walk(part) if p.train_position_limit is not None]
    validation.require(
        len(drawing) <= 1,
        self.name,
        'parts',
        self.parts,
        f'at most one part that draws training positions (randomized); got {len(drawing)}, and '
        f'only one draw can be used: wrap the whole sum once, randomized(a + b)',
    )
    contract.check_position_draws(self.name, 'parts', self.parts, (self,))
    leaves = contract.leaves(self)
    nodes = tuple(contract.walk(self))
    for kind, found, why in (
        (
            contract.Kind.ROTARY,
            nodes,  # A remap's rotary base rotates q and k too.
            'counting the rotary inside a remap: rotating twice composes into another rotation, not a sum',
        ),
        (contract.Kind.ABSOLUTE, leaves, 'one input-level absolute encoding per model'),
        (contract.Kind.NORMALIZER, leaves, 'one function replaces the softmax'),
    ):
      same = [p for p in found if p.kind is kind]
      validation.require(
          len(same) <= 1, self.name, 'parts', self.parts, f'at most one {kind.value} part ({why}); got {len(same)}'
      )
    replacing = [p for p in leaves if p.kind is contract.Kind.CONTEXTUAL and p.replaces_content]
    validation.require(
        len(replacing) <= 1,
        self.name,
        'parts',
        self.parts,
        f'at most one part that replaces the content logit q . k (path); got {len(replacing)}',
    )
    # Two such transforms would share one halo of extra key columns per tile; refused at composition rather
    # than in attention, where it failed on every path.
    halos = [f'{p.name}(key_halo={p.key_halo})' for p in leaves if getattr(p, 'key_halo', 0)]
    validation.require(
        len(halos) <= 1,
        self.name,
        'parts',
        self.parts,
        f'at most one part that reads neighbouring keys to correct a logit (DAPE version 2); got {", ".join(halos)}',
    )
    remaps = [p for p in leaves if p.kind is contract.Kind.POSITION_REMAP]
    validation.require(
        not (replacing and remaps),
        self.name,
        'parts',
        self.parts,
        'a position remap only beside parts that keep the content logit q . k (path replaces '
        'it, so there is no base score to remap)',
    )
    widening = [p.name for p in nodes if p.kind is contract.Kind.ROTARY and p.widens_head]
    reading = [p.name for p in leaves if p.uses_head_vectors]
    validation.require(
        not (widening and reading),
        self.name,
        'parts',
        self.parts,
        f'no part with vectors of head_dim features ({", ".join(reading)}) beside {", ".join(widening)}, whose '
        'rotation turns the D features of q and k into 2D',
    )

  def children(self):
    return self.parts

  def __repr__(self):
    return ' + '.join(repr(part) for part in self.parts)  # The spec of the sum (registry.spec_repr).

  @property
  def carries_position(self) -> bool:
    return any(p.carries_position for p in self.parts)

  @property
  def is_relative(self) -> bool:
    return all(p.is_relative for p in self.parts)

  def init_params(self, rng, dims_):
    """Each part initialised with its own split of rng, for the same num_heads / head_dim / model_dim."""
    rngs = jax.random.split(rng, len(self.parts))
    return {
        'parts': tuple(
            part.init(part_rng, dims_.num_heads, head_dim=dims_.head_dim, model_dim=dims_.model_dim)
            for part, part_rng in zip(self.parts, rngs)
        )
    }

  def terms(self, params) -> tuple[tuple[contract.Encoder, contract.Params], ...]:
    """(part, part params) pairs, the way the attention layer walks a combination."""
    return tuple(zip(self.parts, params['parts']))


def combine(*encoders: contract.Encoder) -> Combined:
  """The sum of two or more encoders (nested sums flatten); see the module docstring for what is refused."""
  return Combined(parts=tuple(encoders))
