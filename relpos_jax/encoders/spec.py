"""Encoder specs: one-line strings that name an encoder, for flags, configs and result tables.

    t5                                   an encoder with its published defaults
    t5(num_buckets=64, bidirectional=False)
                                         hyperparameters as keywords with Python literal values
    randomized(rope, max_position=2048)  a wrapper: positional arguments are nested specs, filling the
                                         wrapper's fields in order (here its first field, `base`)
    sinusoidal + shaw(max_distance=8)    a sum of encoders (`combine`): the lecture's absolute + relative

Per-layer encoders (`ModelConfig.encoder`, `config.model.encoder`) are a tuple of specs, written as one string
'(rope, rope, rope, nope)' (or 'rope, nope'): `layer_specs` splits it; each element is an ordinary spec.

`from_spec` reads a spec with `ast.parse(spec, mode='eval')` and `ast.literal_eval` for values: nothing is
ever evaluated, so a spec from a command line cannot run code. `to_spec` writes the shortest spec of an
encoder (non-default hyperparameters only) and round-trips: from_spec(to_spec(e)) == e.
"""

from __future__ import annotations

import ast
import dataclasses

from relpos_jax.encoders import contract
from relpos_jax.encoders import registry
from relpos_jax.encoders.combine import MAX_PARTS, combine

ALLOWED = (
    'an encoder name (t5), a call with literal keyword hyperparameters (t5(num_buckets=64)), '
    'a wrapper with nested specs as positional arguments (randomized(rope, max_position=2048)), '
    'or a sum of specs (sinusoidal + t5)'
)

# The writer lives with the registry (an encoder's repr is its spec, set when it registers); read from here too.
to_spec = registry.to_spec


def from_spec(spec: str | contract.Encoder) -> contract.Encoder:
  """The encoder a spec string names (an Encoder is returned as it is). Bad specs raise ValueError."""
  if isinstance(spec, contract.Encoder):
    return spec
  if not isinstance(spec, str):
    raise ValueError(f'encoder spec {spec!r} is neither a string nor an encoder; allowed: {ALLOWED}.')
  text = spec.strip()
  # Bounded before parsing: a sum of thousands of terms would nest thousands deep (a RecursionError).
  if text.count('+') >= MAX_PARTS:
    raise ValueError(
        f'encoder spec {text[:60]!r}... has {text.count("+")} "+" signs; allowed: a sum of at most '
        f'{MAX_PARTS} encoders.'
    )
  try:
    tree = ast.parse(text, mode='eval')
  except SyntaxError as e:
    raise ValueError(f'encoder spec {spec!r} is not valid syntax ({e.msg}); allowed: {ALLOWED}.') from None
  return _build(tree.body, text)


def layer_specs(spec: str) -> tuple[str, ...] | None:
  """The element specs of a per-layer tuple spec ('rope, nope', '(rope, rope, nope)'), None for one spec."""
  if not isinstance(spec, str):
    return None
  text = spec.strip()
  try:
    tree = ast.parse(text, mode='eval')
  except SyntaxError:
    return None  # from_spec reports it.
  if not isinstance(tree.body, ast.Tuple):
    return None
  if not tree.body.elts:
    raise ValueError(
        f'encoder spec {spec!r} is an empty tuple; allowed: one spec per layer, or a pattern '
        'repeated over the layers, e.g. (rope, rope, rope, nope).'
    )
  return tuple(_piece(node, text) for node in tree.body.elts)


def _piece(node: ast.AST, text: str) -> str:
  return ast.get_source_segment(text, node) or ast.dump(node)


def _error(node: ast.AST, text: str, problem: str) -> ValueError:
  return ValueError(f'encoder spec {text!r}: {_piece(node, text)!r} {problem}; allowed: {ALLOWED}.')


def _build(node: ast.AST, text: str) -> contract.Encoder:
  if isinstance(node, ast.Name):
    return registry.make(node.id)
  if isinstance(node, ast.BinOp):
    if not isinstance(node.op, ast.Add):
      raise _error(node, text, f'uses the operator {type(node.op).__name__}; only + combines encoders')
    return combine(_build(node.left, text), _build(node.right, text))
  if isinstance(node, ast.Call):
    return _build_call(node, text)
  raise _error(node, text, 'is not an encoder spec')


def _build_call(node: ast.Call, text: str) -> contract.Encoder:
  if not isinstance(node.func, ast.Name):
    raise _error(node.func, text, 'is not an encoder name')
  name = node.func.id
  cls = registry.encoder_class(name)  # ValueError listing the names for an unknown one.
  fields = [f for f in dataclasses.fields(cls) if f.init]
  if len(node.args) > len(fields):
    raise _error(node, text, f'passes {len(node.args)} positional arguments; {name} has ' f'{len(fields)} fields')
  hparams = {}
  for field, arg in zip(fields, node.args):
    takes_encoder = field.default is dataclasses.MISSING or isinstance(field.default, contract.Encoder)
    if isinstance(arg, ast.Starred) or not takes_encoder or not isinstance(arg, (ast.Name, ast.Call, ast.BinOp)):
      raise _error(
          arg,
          text,
          f'cannot be a positional argument of {name}: positional arguments are '
          f"nested encoder specs for a wrapper's encoder fields; give "
          f'hyperparameters as keywords (name=value)',
      )
    hparams[field.name] = _build(arg, text)
  for keyword in node.keywords:
    if keyword.arg is None:
      raise _error(keyword.value, text, 'is a ** expansion; write each hyperparameter as name=value')
    if keyword.arg in hparams:
      raise _error(keyword.value, text, f'gives {keyword.arg} a second time')
    hparams[keyword.arg] = _literal(keyword.value, keyword.arg, text)
  return registry.make(name, **hparams)


def _literal(node: ast.AST, field: str, text: str):
  try:
    value = ast.literal_eval(node)
  except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
    raise _error(
        node,
        text,
        f"is not a literal value for {field} (quote strings: {field}='...'; " f'nested encoders go positionally)',
    ) from None
  # Lists read as tuples: encoders are hashable (static arguments of jax.jit).
  value = _tuples(value)
  if not _is_plain(value):
    raise _error(node, text, f'is not an int, float, str, bool, None or tuple of them ({field})')
  return value


def _tuples(value):
  if isinstance(value, (list, tuple)):
    return tuple(_tuples(v) for v in value)
  return value


def _is_plain(value) -> bool:
  if isinstance(value, tuple):
    return all(_is_plain(v) for v in value)
  return isinstance(value, registry.LITERAL_TYPES)
