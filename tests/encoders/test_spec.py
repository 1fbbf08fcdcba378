"""Encoder specs: from_spec parses without evaluating, to_spec round-trips every registered encoder."""

from __future__ import annotations

import dataclasses
import re

import pytest

from relpos_jax import encoders
from relpos_jax.encoders import Kind, contract, distance, make, registry
from relpos_jax.encoders.combine import combine
from relpos_jax.encoders.spec import from_spec, to_spec


def _defaults(name):
  """Registered encoder with defaults; a wrapper's required encoder field gets t5."""
  cls = encoders.encoder_class(name)
  filled = {
      f.name: make('t5')
      for f in dataclasses.fields(cls)
      if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
  }
  return make(name, **filled)


# Strings any str-valued hyperparameter of the registry might accept; the encoder's validation picks.
_STRING_CANDIDATES = (
    'signed',
    'absolute',
    'sum',
    'mean',
    'linear',
    'log',
    'interleaved',
    'half',
    'concatenated',
    'pi',
    'ntk',
    'yarn',
    'llama3',
    'none',
)


def _candidates(value):
  if isinstance(value, bool):
    return [not value]
  if isinstance(value, int):
    return [value * 2, value + 1, max(1, value - 1), 3]
  if isinstance(value, float):
    return [value * 2, value / 2, 0.5, 3.0]
  if isinstance(value, str):
    return [s for s in _STRING_CANDIDATES if s != value]
  if isinstance(value, tuple) and value:
    return [value[:-1], value + (value[-1] * 2,), (1, 2)]
  if isinstance(value, encoders.Encoder):
    return [
        make('learned', max_length=4096),
        make('t5', num_buckets=64),
        make('rope') if 'rope' in encoders.names() else make('shaw'),
    ]
  return []


def _single_field_variants(name):
  """Every valid encoder differing from the defaults in one field (the first candidate that validates)."""
  default = _defaults(name)
  variants = []
  for field in dataclasses.fields(default):
    if not field.init:
      continue
    for candidate in _candidates(getattr(default, field.name)):
      try:
        variant = dataclasses.replace(default, **{field.name: candidate})
      except (ValueError, TypeError):
        continue
      if variant != default:
        variants.append((field.name, variant))
        break
  return variants


ALL = encoders.names()


@pytest.mark.parametrize('name', ALL)
def test_defaults_round_trip_and_print_the_bare_name(name):
  enc = _defaults(name)
  spec = to_spec(enc)
  assert from_spec(spec) == enc
  if all(
      f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
      for f in dataclasses.fields(enc)
      if f.init
  ):
    assert spec == name


@pytest.mark.parametrize('name', ALL)
def test_non_default_hyperparameters_round_trip(name):
  variants = _single_field_variants(name)
  numeric_fields = [
      f.name
      for f in dataclasses.fields(_defaults(name))
      if f.init and isinstance(getattr(_defaults(name), f.name), (bool, int, float))
  ]
  # Guards against a vacuous pass: an encoder with a number or flag must yield a variant.
  assert variants or not numeric_fields, f'{name}: no valid non-default value found for {numeric_fields}'
  for field, enc in variants:
    spec = to_spec(enc)
    assert f'{field}=' in spec or '(' in spec, spec  # The changed field is printed ...
    assert from_spec(spec) == enc, spec  # ... and parsed back to the same encoder.
    assert hash(from_spec(spec)) == hash(enc)


@pytest.mark.parametrize(
    'spec,expected',
    [
        ('t5', make('t5')),
        ('  t5(num_buckets=64, max_distance=256)  ', make('t5', num_buckets=64, max_distance=256)),
        ('t5(bidirectional=False)', make('t5', bidirectional=False)),
        ("distance(mode='signed', slope=-0.5)", make('distance', mode='signed', slope=-0.5)),
        ('multiscale(scales=[1, 8], reduction="sum")', make('multiscale', scales=(1, 8), reduction='sum')),
        ('sinusoidal + shaw(max_distance=8)', combine(make('sinusoidal'), make('shaw', max_distance=8))),
        ('(sinusoidal + t5) + (shaw)', combine(make('sinusoidal'), make('t5'), make('shaw'))),
        (
            'absolute_score(learned(max_length=512)) + piecewise',
            combine(make('absolute_score', base=make('learned', max_length=512)), make('piecewise')),
        ),
    ],
)
def test_from_spec_builds_the_named_encoder(spec, expected):
  assert from_spec(spec) == expected


@pytest.mark.parametrize(
    'enc,spec',
    [
        (make('t5'), 't5'),
        (make('t5', num_buckets=64), 't5(num_buckets=64)'),
        (make('piecewise', bidirectional=False), 'piecewise(bidirectional=False)'),
        (make('multiscale', scales=(2,)), 'multiscale(scales=(2,))'),
        (make('absolute_score'), 'absolute_score'),
        (make('absolute_score', base=make('learned')), 'absolute_score(learned)'),
        (combine(make('sinusoidal'), make('shaw', max_distance=8)), 'sinusoidal + shaw(max_distance=8)'),
    ],
)
def test_to_spec_prints_only_non_default_hyperparameters(enc, spec):
  assert to_spec(enc) == spec
  assert from_spec(spec) == enc


def test_wrapper_spec_passes_the_nested_encoder_as_first_field():
  if 'randomized' not in ALL or 'rope' not in ALL:
    pytest.skip('randomized / rope not registered yet')
  enc = from_spec('randomized(rope, max_position=4096)')
  assert enc == make('randomized', base=make('rope'), max_position=4096)
  assert [part.kind for part in contract.leaves(enc)] == [Kind.ROTARY]  # What the layer sees: the rope.
  assert to_spec(enc) == 'randomized(rope, max_position=4096)'
  both = from_spec("randomized(rope(scaling='yarn', factor=4.0)) + t5")
  assert from_spec(to_spec(both)) == both


def test_from_spec_returns_an_encoder_unchanged():
  enc = make('shaw', max_distance=3)
  assert from_spec(enc) is enc


@pytest.mark.parametrize(
    'spec,named',
    [
        ('t5(32)', "'32' cannot be a positional argument of t5"),
        ('shaw(t5)', "'t5' cannot be a positional argument of shaw"),
        ('t5(num_buckets=x)', "'x' is not a literal value for num_buckets"),
        ("t5(num_buckets=__import__('os').getpid())", 'is not a literal value for num_buckets'),
        ('t5 - shaw', "'t5 - shaw' uses the operator Sub"),
        ('t5 * 2', "'t5 * 2' uses the operator Mult"),
        ('1 + t5', "'1' is not an encoder spec"),
        ('t5[0]', "'t5[0]' is not an encoder spec"),
        ('lambda: t5', "'lambda: t5' is not an encoder spec"),
        ('os.system(1)', "'os.system' is not an encoder name"),
        ('t5(**hp)', "'hp' is a ** expansion"),
        ('t5(num_buckets={1: 2})', "'{1: 2}' is not an int, float, str, bool, None or tuple"),
        ('t5(', 'is not valid syntax'),
        ('', 'is not valid syntax'),
        ('no_such_encoder', "unknown encoder 'no_such_encoder'"),
        ('__import__("os")', "unknown encoder '__import__'"),
        ('t5(num_bukets=32)', "unknown hyperparameter(s) ['num_bukets']"),
        ('t5(num_buckets=-4)', 'num_buckets=-4'),
        ('sinusoidal + learned', 'at most one absolute part'),
    ],
)
def test_bad_specs_raise_naming_the_offending_piece(spec, named):
  with pytest.raises(ValueError, match=re.escape(named)):
    from_spec(spec)


def test_syntax_errors_list_what_is_allowed():
  with pytest.raises(ValueError, match=re.escape('allowed: an encoder name (t5)')):
    from_spec('t5 +')


def test_from_spec_rejects_non_strings():
  with pytest.raises(ValueError, match='neither a string nor an encoder'):
    from_spec(42)


@dataclasses.dataclass(frozen=True)
class _Unregistered(distance.Distance):
  pass


def test_to_spec_refuses_encoders_no_spec_can_name():
  with pytest.raises(ValueError, match='_Unregistered is not a registered encoder'):
    to_spec(_Unregistered())


@dataclasses.dataclass(frozen=True)
class _WithThreshold(distance.Distance):
  threshold: float = 1.0


def test_to_spec_writes_infinite_floats_as_literals(monkeypatch):
  # Registered for this test only (monkeypatch restores the registry): a float hparam that may be inf.
  monkeypatch.setitem(registry._REGISTRY, 'with_threshold', _WithThreshold)
  monkeypatch.setattr(_WithThreshold, 'name', 'with_threshold')
  enc = _WithThreshold(threshold=2.5)
  assert to_spec(enc) == 'with_threshold(threshold=2.5)'
  # inf prints as 1e999: literal_eval reads that back as inf, while 'inf' would be a name.
  for value, text in ((float('inf'), '1e999'), (float('-inf'), '-1e999')):
    enc = _WithThreshold(threshold=value)
    assert to_spec(enc) == f'with_threshold(threshold={text})'
    assert from_spec(to_spec(enc)) == enc
  with pytest.raises(ValueError, match='threshold=nan cannot be written as a spec literal'):
    to_spec(_WithThreshold(threshold=float('nan')))
