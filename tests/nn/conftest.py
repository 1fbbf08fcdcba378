"""Encoder cases for the nn tests: every registered encoder, built with its defaults, by kind.

A test asks for one of these arguments and is parametrized over the matching cases (pytest_generate_tests):

  encoder_case            every case (name, encoder)
  attention_case          cases with a term inside attention (not purely absolute)
  scalar_or_rotary_case   cases whose attention can run on jax.nn.dot_product_attention
  vector_case             cases with a vector-relative part

The cases come from `encoders.names()` at collection time, so an encoder that lands in the registry is
covered without touching these tests. Wrappers whose required fields are encoders (randomized) are built
around one representative base per attention kind (the bases a wrapper refuses with a ValueError -- DAPE
takes scalar biases only, monotone the lecture's tables -- are left out, but at least one must be accepted); a
few combinations (the lecture's absolute + relative, composed specs) are added when their parts
exist. A registered encoder that cannot be built this way fails collection loudly rather than being skipped.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import encoders
from relpos_jax.encoders import contract
from relpos_jax.nn import terms

# One base per attention kind for wrappers (randomized); used when registered.
_WRAPPED_BASES = ('t5', 'rope', 'shaw_vector')
_COMBINATIONS = (
    ('sinusoidal', 't5'),
    ('rope', 'alibi'),
    ('absolute_score', 'shaw_vector'),
    ('learned', 'transformer_xl'),
)
# Specs whose options are off by default, or whose defaults are a no-op at test lengths (remap windows of
# hundreds of positions): cases that exercise them at L ~ 6, and composed specs that must
# work: content-dependent kinds beside the others.
_SPECS = (
    'rope(partial_rotary_factor=0.5)',
    'rope(frequency_fraction=0.75)',
    'rope(resonance=True)',
    'rope(scaling="longrope", factor=4.0)',
    'rope(scaling="yarn", factor=8.0, truncate=False)',
    'self_extend(rope, group_size=2, window=2)',
    'self_extend(alibi, group_size=3, window=2)',
    'rerope(rope, window=2)',
    'rerope(rope, window=2, leak=3)',
    'rerope(t5(bidirectional=False), window=3)',
    'dual_chunk(rope, chunk=3, local_window=1)',
    'dual_chunk(alibi, chunk=4, local_window=2)',
    'fox + rope',
    'cope + alibi',
    'rope + ssmax',
    'nope + logn',
    'dape(kerple_log)',
    'dape(alibi, version=2)',
    'path + fox',
    'rope + stick_breaking',
)


def _required_fields(cls):
  return [
      f
      for f in dataclasses.fields(cls)
      if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
  ]


def encoder_cases() -> list[tuple[str, contract.Encoder]]:
  names = encoders.names()
  cases = []
  for name in names:
    required = _required_fields(encoders.encoder_class(name))
    if not required:
      cases.append((name, encoders.make(name)))
      continue
    if not all('Encoder' in str(f.type) for f in required):
      raise RuntimeError(
          f'tests/nn: encoder {name!r} needs {[f.name for f in required]} to be built; teach '
          f'tests/nn/conftest.py how to build it.'
      )
    built, refused = [], []
    for inner in _WRAPPED_BASES:
      remap = issubclass(encoders.encoder_class(name), contract.PositionRemapEncoder)
      if remap and encoders.make(inner).kind not in (contract.Kind.ROTARY, contract.Kind.SCALAR_BIAS):
        continue  # Remaps wrap rotary and scalar-bias encoders only (a ValueError otherwise).
      if inner in names:
        try:  # A wrapper may take only some kinds (monotone: the lecture's tables only).
          built.append((f'{name}({inner})', encoders.make(name, **{f.name: encoders.make(inner) for f in required})))
        except ValueError as e:
          refused.append(str(e))
    if not built:
      raise RuntimeError(f'tests/nn: wrapper {name!r} takes none of the bases {_WRAPPED_BASES}: {refused}')
    cases.extend(built)
  try:
    from relpos_jax.encoders.combine import combine
  except ImportError:
    combine = None
  if combine is not None:
    for first, second in _COMBINATIONS:
      if first in names and second in names:
        cases.append((f'{first}+{second}', combine(encoders.make(first), encoders.make(second))))
  for spec in _SPECS:
    try:
      cases.append((spec.replace(' ', ''), encoders.from_spec(spec)))
    except ValueError as e:
      if 'unknown encoder' not in str(e):
        raise
  return cases


def parts_of(encoder):
  return contract.leaves(encoder)


def causal_only(encoder) -> bool:
  return any(p.requires_causal for p in parts_of(encoder))


def has_attention_term(encoder) -> bool:
  return bool(terms.parts.attention_parts(encoder))


_EXPLICIT_ONLY = (
    contract.Kind.VECTOR_RELATIVE,
    contract.Kind.CONTEXTUAL,
    contract.Kind.SCORE_TRANSFORM,
    contract.Kind.NORMALIZER,
    contract.Kind.TEMPERATURE,
)


def dpa_capable(encoder) -> bool:
  return has_attention_term(encoder) and not any(
      any(p.kind is kind for p in parts_of(encoder)) for kind in _EXPLICIT_ONLY
  )


def has_vector(encoder) -> bool:
  return any(p.kind is contract.Kind.VECTOR_RELATIVE for p in parts_of(encoder))


def resizes_queries(encoder) -> bool:
  """A rotary part whose q and k leave at another size than v's (PoPE's polar form doubles them)."""
  for part in parts_of(encoder):
    if part.kind is contract.Kind.ROTARY:
      params = part.init(jax.random.key(0), 1, head_dim=8, model_dim=8)
      out = jax.eval_shape(part.rotate_queries, params, jnp.zeros((1, 2, 1, 8)), jnp.zeros((1, 2), jnp.int32))
      if out.shape[-1] != 8:
        return True
  return False


def tiled_capable(encoder) -> bool:
  """What the tiled paths take; resized q/k is refused by name there (tests/nn/test_remap.py)."""
  return has_attention_term(encoder) and not resizes_queries(encoder)


_FILTERS = {
    'encoder_case': lambda e: True,
    'attention_case': has_attention_term,
    'tiled_case': tiled_capable,
    'scalar_or_rotary_case': dpa_capable,
    'vector_case': has_vector,
}


def pytest_generate_tests(metafunc):
  for argname, keep in _FILTERS.items():
    if argname in metafunc.fixturenames:
      cases = [c for c in encoder_cases() if keep(c[1])]
      metafunc.parametrize(argname, cases, ids=[c[0] for c in cases])
