"""Measurement 2: the attention core with each kind of position term, against plain attention.

Every contender maps already-projected q, k, v of shape (1, L, H, D) (and the encoder's params) to the
per-head outputs (1, L, H, D); projections are outside, so a ratio is the cost of the position term alone.

  plain         jax.nn.dot_product_attention(q, k, v, is_causal=True): no position term.
  core (none)   the library's core with no position part: what the layer does between its projections,
                `functional.attend(q, k, v, parts=(), params=[], causal=True)`. Separates the core's own
                overhead from the position terms.
  <encoder>     the same core with the encoder, exactly as `RelativeMultiHeadAttention.__call__` runs it:
                rotary parts rotate q and k at positions 0..L-1 (`terms.parts.rotate`), then `attend`,
                which builds the scalar bias (`bias_matrix`, from the params, inside the timed function)
                or the vector-relative terms (`terms.vector.vector_scores` / `vector_values`).
  shaw_vector naive   the paper's formula written out: a^K and a^V gathered for every pair, (L, L, H, D)
                tensors, then einsums. A reference for what the library avoids; at `naive_length` only.

forward = the function above; forward+backward = its VJP with a fixed random cotangent, gradients with
respect to q, k, v and the encoder params. Causal (decoder) attention throughout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import relpos_jax
from relpos_jax.encoders import contract, spec
from relpos_jax.nn import functional, terms
from relpos_jax.nn import call
from benchmarks import measure, report

NUM_HEADS, HEAD_DIM, BATCH = 8, 64, 1
LENGTH, QUICK_LENGTH = 2048, 1024
NAIVE_LENGTH, QUICK_NAIVE_LENGTH = 512, 256

# (row name, encoder spec, kind label, forward+backward time target, memory target): the targets, as ratios to
# plain attention, that the scalar-bias, rotary and vector-relative paths were built to meet.
ENCODERS = (
    ('t5', 't5(bidirectional=False)', 'scalar bias', 1.10, None),
    ('alibi', 'alibi', 'scalar bias', 1.10, None),
    ('rope', 'rope', 'rotary', 1.05, None),
    ('shaw_vector', 'shaw_vector', 'vector relative', 1.5, 2.0),
    ('transformer_xl', 'transformer_xl', 'vector relative', 1.5, 2.0),
    # Position from content and after the scores: no targets stated; measured to show what each costs.
    ('cope', 'cope', 'contextual', None, None),
    ('fox', 'fox', 'contextual', None, None),
    ('fox(bias_only=True)', 'fox(bias_only=True)', 'scalar bias', None, None),
    ('path', 'path', 'contextual', None, None),
    ('stick_breaking', 'stick_breaking', 'normalizer', None, None),
    ('dape(kerple_log)', 'dape(kerple_log)', 'score transform', None, None),
    ('dape(kerple_log, version=2)', 'dape(kerple_log, version=2)', 'score transform', None, None),
    ('rope + ssmax', 'rope + ssmax', 'rotary + temperature', None, None),
    ('logn', 'logn(train_length=512)', 'temperature', None, None),
)
# The rows of the content-dependent kinds (contextual, normalizer, score transform, temperature), for
# `python -m benchmarks.attention_kinds_contextual`-style partial runs.
CONTEXTUAL_ROWS = tuple(
    row
    for row, _, kind, *_ in ENCODERS
    if row.startswith(('cope', 'fox', 'path', 'stick', 'dape', 'rope + ssmax', 'logn'))
)


def plain_attention(q, k, v, params):
  del params
  return jax.nn.dot_product_attention(q, k, v, is_causal=True)


def layer_core(parts):
  """The layer's attention core for `parts` (see the module docstring): (q, k, v, params) -> out."""

  def core(q, k, v, params):
    b, length = q.shape[:2]
    if terms.parts.rotates(parts):
      pos = terms.parts.contiguous_positions(b, length)
      q, k = terms.parts.rotate(parts, params, q, k, pos, pos)
    features = None
    if any(p.kind is contract.Kind.CONTEXTUAL for p in parts):
      # Contextual parts read the layer input x (FoX's gates, PaTH's directions): a fixed stand-in.
      x = jax.random.normal(jax.random.PRNGKey(2), (b, length, NUM_HEADS * HEAD_DIM), jnp.float32)
      features = terms.parts.token_features(parts, params, x)
    return functional.attend(
        call.AttentionInputs.checked(q, k, v, features=features),
        parts,
        params,
        call.AttentionSettings.checked(causal=True),
    )

  return core


def naive_shaw_vector(encoder):
  """Shaw et al.'s eqs. (3)-(5) as written: every pair's a^K_ij, a^V_ij materialised, (L, L, H, D)."""

  def core(q, k, v, params):
    (p,) = params
    length, head_dim = q.shape[1], q.shape[-1]
    rel = relpos_jax.relative_positions(length, length)
    a_k = encoder.key_embeddings(p, rel)  # (L, L, H, D)
    a_v = encoder.value_embeddings(p, rel)  # (L, L, H, D)
    scores = (jnp.einsum('bihd,bjhd->bhij', q, k) + jnp.einsum('bihd,ijhd->bhij', q, a_k)) / np.sqrt(head_dim)
    causal = jnp.tril(jnp.ones((length, length), bool))
    weights = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
    return jnp.einsum('bhij,bjhd->bihd', weights, v) + jnp.einsum('bhij,ijhd->bihd', weights, a_v)

  return core


def with_backward(fn):
  """(q, k, v, params, cotangent) -> gradients of <fn(q, k, v, params), cotangent> w.r.t. q, k, v, params."""

  def forward_backward(q, k, v, params, cotangent):
    _, vjp = jax.vjp(fn, q, k, v, params)
    return vjp(cotangent)

  return forward_backward


def inputs(length: int, rng=jax.random.PRNGKey(0)):
  """q, k, v and a cotangent, each (1, L, H, D) float32 standard normal."""
  shape = (BATCH, length, NUM_HEADS, HEAD_DIM)
  return tuple(jax.random.normal(r, shape, jnp.float32) for r in jax.random.split(rng, 4))


def encoder_params(parts, rng=jax.random.PRNGKey(1)):
  return terms.parts.init_params(parts, rng, num_heads=NUM_HEADS, head_dim=HEAD_DIM, model_dim=NUM_HEADS * HEAD_DIM)


def contenders_at(length: int, rows) -> dict:
  """name -> (fn, params) for the rows at this length; every fn has the signature of `plain_attention`."""
  out = {}
  for name in rows:
    if name == 'plain':
      out[name] = (plain_attention, [])
    elif name == 'core (none)':
      out[name] = (layer_core(()), [])
    elif name == 'shaw_vector naive':
      encoder = spec.from_spec('shaw_vector')
      out[name] = (naive_shaw_vector(encoder), encoder_params((encoder,)))
    else:
      encoder_spec = {row: s for row, s, *_ in ENCODERS}[name]
      parts = terms.parts.attention_parts(spec.from_spec(encoder_spec))
      out[name] = (layer_core(parts), encoder_params(parts))
  return out


def measure_rows(length: int, rows, repeats: int, warmup: int):
  """Timings and memory of `rows` at `length`: {(name, 'fwd'|'bwd'): Timing}, {(name, 'bwd'): MemoryUse}."""
  q, k, v, cotangent = inputs(length)
  contenders = {}
  for name, (fn, params) in contenders_at(length, rows).items():
    contenders[(name, 'fwd')] = (fn, (q, k, v, params))
    contenders[(name, 'bwd')] = (with_backward(fn), (q, k, v, params, cotangent))
  # Only the forward+backward memory is reported (the targets are about training).
  memory = {key: measure.compiled_memory(fn, args) for key, (fn, args) in contenders.items() if key[1] == 'bwd'}
  thunks = {key: measure.compiled_call(fn, args) for key, (fn, args) in contenders.items()}
  return measure.time_interleaved(thunks, repeats=repeats, warmup=warmup), memory


def run(
    length: int = LENGTH, naive_length: int = NAIVE_LENGTH, repeats: int = 5, warmup: int = 1, rows=None
) -> report.Section:
  """The section; `rows` (encoder row names) restricts the main block to plain, core (none) and those."""
  section = report.Section(
      title='2. Attention with each kind of position term vs plain attention',
      timed=(
          f'Timed: q, k, v (1, L, {NUM_HEADS}, {HEAD_DIM}) float32, already projected, and the encoder '
          'params -> attention output (1, L, H, D), causal. `plain` = jax.nn.dot_product_attention('
          'is_causal=True); `core (none)` = relpos_jax.nn.functional.attend(causal=True) with no position '
          'part; every encoder row = what RelativeMultiHeadAttention runs between its projections '
          '(rotation for rotary parts, then attend, which builds the bias / vector terms from the params). '
          'fwd+bwd = VJP with a fixed cotangent, gradients w.r.t. q, k, v and the params. Ratios divide by '
          '`plain` at the same L (median of per-round ratios; the CPU-time column is the same ratio of process '
          'CPU time, a cross-check on a shared machine). Memory = XLA total (argument + output - '
          'alias + temp) of fwd+bwd.'
      ),
      columns=[
          'L',
          'position term',
          'kind',
          'fwd ms',
          'fwd ratio',
          'fwd+bwd ms',
          'fwd+bwd ratio',
          'fwd+bwd ratio (CPU time)',
          'fwd+bwd MiB',
          'memory ratio',
          'time target',
          'memory target',
      ],
  )
  main_rows = ['plain', 'core (none)'] + [row for row, *_ in ENCODERS if rows is None or row in rows]
  blocks = [(length, main_rows)]
  if naive_length:
    blocks.append((naive_length, ['plain', 'shaw_vector', 'shaw_vector naive']))
  targets = {row: (kind, time_target, memory_target) for row, _, kind, time_target, memory_target in ENCODERS}
  targets['plain'] = targets['core (none)'] = ('none', None, None)
  targets['shaw_vector naive'] = ('vector relative, (L, L, H, D)', None, None)
  spreads = []
  for block_length, rows in blocks:
    timings, memory = measure_rows(block_length, rows, repeats, warmup)
    base_fwd, base_bwd = timings[('plain', 'fwd')], timings[('plain', 'bwd')]
    base_memory = memory[('plain', 'bwd')].total
    spreads += [t.spread for t in timings.values()]
    for name in rows:
      fwd, bwd, mem = timings[(name, 'fwd')], timings[(name, 'bwd')], memory[(name, 'bwd')]
      kind, time_target, memory_target = targets[name]
      time_ratio, memory_ratio = bwd.ratio_to(base_bwd), mem.total / base_memory
      section.add_row(
          block_length,
          name,
          kind,
          report.ms(fwd.median),
          report.ratio(fwd.ratio_to(base_fwd)),
          report.ms(bwd.median),
          report.ratio(time_ratio),
          report.ratio(bwd.cpu_ratio_to(base_bwd)),
          f'{measure.mib(mem.total):.0f}' + ('' if mem.complete else ' (incomplete)'),
          report.ratio(memory_ratio),
          report.verdict(time_ratio, time_target) if time_target and block_length == length else '',
          report.verdict(memory_ratio, memory_target) if memory_target and block_length == length else '',
      )
  section.notes.append(report.noise_note(spreads, repeats))
  if length != LENGTH:
    section.notes.append(
        f'The targets are stated for L = {LENGTH}; this run used L = {length}, so the ' 'verdicts are indicative only.'
    )
  return section
