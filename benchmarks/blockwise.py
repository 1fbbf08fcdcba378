"""Measurement 4: blockwise attention against the explicit path, memory at long L and time at L = 2048.

Every contender is the layer's attention core of `attention_kinds.layer_core` (rotation for rotary parts,
then `functional.attend`, which builds the position terms from the params), with `implementation='einsum'`
(the explicit path: (B, H, L, L) scores and, for scalar biases, an (H, L, L) bias) or `'blockwise'` (tiles
with an online softmax, every position term built per tile, a custom VJP recomputing tiles).

  memory   XLA's buffer assignment of the compiled forward and forward+backward at `MEMORY_LENGTH`
           (compiled only, never run). Target: blockwise <= 5% of explicit, both.
  time     fwd and fwd+bwd at `LENGTH` on this machine; ratio = blockwise / explicit. Target: <= 1.5x.
           `plain` (jax.nn.dot_product_attention, no position term) is timed alongside, so a row's
           `vs plain` column says what the position term costs on the blockwise path (Transformer-XL's
           target: <= 1.5x plain).
"""

from __future__ import annotations

import jax

from relpos_jax.encoders import contract, spec
from relpos_jax.nn import functional, terms
from relpos_jax.nn import call
from benchmarks import attention_kinds, measure, report

LENGTH, QUICK_LENGTH = 2048, 512
MEMORY_LENGTH, QUICK_MEMORY_LENGTH = 16384, 2048
BLOCK_SIZE = None  # the library default

# (row, spec, kind, memory target, time target vs explicit, time target vs plain)
ENCODERS = (
    ('alibi', 'alibi', 'scalar bias', 0.05, 1.5, None),
    ('t5', 't5(bidirectional=False)', 'scalar bias', 0.05, 1.5, None),
    ('fire', 'fire', 'scalar bias (query-dependent)', 0.05, 1.5, None),
    ('rope', 'rope', 'rotary', 0.05, 1.5, None),
    ('shaw_vector', 'shaw_vector', 'vector relative', 0.05, 1.5, None),
    ('transformer_xl', 'transformer_xl', 'vector relative', None, 1.5, 1.5),
    ('fox', 'fox', 'contextual (separable)', 0.05, 1.5, None),
    ('rope + ssmax', 'rope + ssmax', 'temperature', 0.05, 1.5, None),
    ('rope + logn', 'rope + logn', 'temperature', 0.05, 1.5, None),
    ('rope + stick_breaking', 'rope + stick_breaking', 'normalizer', 0.05, 1.5, None),
    ('self_extend(rope)', 'self_extend(rope, group_size=8, window=1024)', 'position remap', 0.05, 1.5, None),
    ('rerope(rope)', 'rerope(rope, window=512)', 'position remap', 0.05, 1.5, None),
    ('cope', 'cope', 'contextual (counts along the keys)', 0.05, 1.5, None),
    ('dape(kerple_log)', 'dape(kerple_log)', 'score transform', 0.05, 1.5, None),
    ('dape(kerple_log, version=2)', 'dape(kerple_log, version=2)', 'score transform (key halo)', 0.05, 1.5, None),
)


def core(parts, implementation):
  """(q, k, v, params) -> out, as RelativeMultiHeadAttention runs it between its projections."""

  def fn(q, k, v, params):
    b, length = q.shape[:2]
    if terms.parts.rotates(parts):
      pos = terms.parts.contiguous_positions(b, length)
      q, k = terms.parts.rotate(parts, params, q, k, pos, pos)
    features = None
    if any(p.kind is contract.Kind.CONTEXTUAL for p in parts):
      # FoX's gates read the layer input x: a fixed stand-in, as in attention_kinds.layer_core.
      x = jax.random.normal(jax.random.PRNGKey(2), (b, length, q.shape[2] * q.shape[3]), jax.numpy.float32)
      features = terms.parts.token_features(parts, params, x)
    return functional.attend(
        call.AttentionInputs.checked(q, k, v, features=features),
        parts,
        params,
        call.AttentionSettings.checked(
            causal=True, implementation=implementation, block_size=BLOCK_SIZE if implementation == 'blockwise' else None
        ),
    )

  return fn


def _parts(encoder_spec):
  parts = terms.parts.attention_parts(spec.from_spec(encoder_spec))
  return parts, attention_kinds.encoder_params(parts)


def _shapes(length):
  shape = jax.ShapeDtypeStruct(
      (attention_kinds.BATCH, length, attention_kinds.NUM_HEADS, attention_kinds.HEAD_DIM), jax.numpy.float32
  )
  return shape, shape, shape, shape


def memory_rows(length: int, rows):
  """{(row, impl, 'fwd'|'bwd'): MemoryUse} from compiling (never running) at `length`."""
  q, k, v, cotangent = _shapes(length)
  out = {}
  for row, encoder_spec, *_ in rows:
    parts, params = _parts(encoder_spec)
    for impl in ('einsum', 'blockwise'):
      fn = core(parts, impl)
      out[(row, impl, 'fwd')] = measure.compiled_memory(fn, (q, k, v, params))
      out[(row, impl, 'bwd')] = measure.compiled_memory(attention_kinds.with_backward(fn), (q, k, v, params, cotangent))
  return out


def time_rows(length: int, rows, repeats: int, warmup: int):
  q, k, v, cotangent = attention_kinds.inputs(length)
  contenders = {}
  fn = attention_kinds.plain_attention
  contenders[('plain', 'xla', 'fwd')] = (fn, (q, k, v, []))
  contenders[('plain', 'xla', 'bwd')] = (attention_kinds.with_backward(fn), (q, k, v, [], cotangent))
  for row, encoder_spec, *_ in rows:
    parts, params = _parts(encoder_spec)
    for impl in ('einsum', 'blockwise'):
      fn = core(parts, impl)
      contenders[(row, impl, 'fwd')] = (fn, (q, k, v, params))
      contenders[(row, impl, 'bwd')] = (attention_kinds.with_backward(fn), (q, k, v, params, cotangent))
  thunks = {key: measure.compiled_call(fn, args) for key, (fn, args) in contenders.items()}
  return measure.time_interleaved(thunks, repeats=repeats, warmup=warmup)


def run(
    length: int = LENGTH, memory_length: int = MEMORY_LENGTH, repeats: int = 5, warmup: int = 1, rows=ENCODERS
) -> list[report.Section]:
  sizes = lambda per_pair: 'x'.join(map(str, functional.blockwise.block_sizes(BLOCK_SIZE, per_pair)))
  block = f'default {sizes(False)}; {sizes(True)} for Terms with per-pair work (normalizer, score transform, counts)'
  memory_section = report.Section(
      title='4a. Blockwise attention: compiled memory at long L',
      timed=(
          f'Compiled (not run): the attention core as in section 2 (q, k, v (1, L, '
          f'{attention_kinds.NUM_HEADS}, {attention_kinds.HEAD_DIM}) float32 and the encoder params -> '
          f'output, causal), with implementation `einsum` (explicit) and `blockwise` (tiles {block}). '
          'Memory = XLA total (argument + output - alias + temp) in MiB; fwd+bwd = the VJP with a '
          'cotangent, gradients w.r.t. q, k, v and the params. Ratio = blockwise / explicit.'
      ),
      columns=[
          'L',
          'position term',
          'kind',
          'explicit fwd MiB',
          'blockwise fwd MiB',
          'fwd ratio',
          'explicit fwd+bwd MiB',
          'blockwise fwd+bwd MiB',
          'fwd+bwd ratio',
          'target',
      ],
  )
  memory = memory_rows(memory_length, rows)
  for row, _, kind, memory_target, *_ in rows:
    e_f, b_f = memory[(row, 'einsum', 'fwd')], memory[(row, 'blockwise', 'fwd')]
    e_b, b_b = memory[(row, 'einsum', 'bwd')], memory[(row, 'blockwise', 'bwd')]
    worst = max(b_f.total / e_f.total, b_b.total / e_b.total)
    mib = lambda m: f'{measure.mib(m.total):.0f}' + ('' if m.complete else ' (incomplete)')
    memory_section.add_row(
        memory_length,
        row,
        kind,
        mib(e_f),
        mib(b_f),
        f'{b_f.total / e_f.total:.2%}',
        mib(e_b),
        mib(b_b),
        f'{b_b.total / e_b.total:.2%}',
        ''
        if memory_target is None
        else (f'met (<= {memory_target:.0%})' if worst <= memory_target else f'**missed** (> {memory_target:.0%})'),
    )
  if memory_length != MEMORY_LENGTH:
    memory_section.notes.append(f'The target is stated for L = {MEMORY_LENGTH}; this run used L = ' f'{memory_length}.')

  time_section = report.Section(
      title='4b. Blockwise attention: time against the explicit path',
      timed=(
          'Timed: the same functions, run at L below. `explicit` = implementation einsum, `blockwise` = '
          'implementation blockwise, `plain` = jax.nn.dot_product_attention(is_causal=True) with no '
          "position term. Ratios are medians of per-round ratios (section 2's method)."
      ),
      columns=[
          'L',
          'position term',
          'explicit fwd ms',
          'blockwise fwd ms',
          'fwd ratio',
          'explicit fwd+bwd ms',
          'blockwise fwd+bwd ms',
          'fwd+bwd ratio',
          'fwd+bwd ratio (CPU time)',
          'blockwise fwd+bwd vs plain',
          'target',
      ],
  )
  timings = time_rows(length, rows, repeats, warmup)
  plain = timings[('plain', 'xla', 'bwd')]
  for row, _, _, _, time_target, plain_target in rows:
    e_f, b_f = timings[(row, 'einsum', 'fwd')], timings[(row, 'blockwise', 'fwd')]
    e_b, b_b = timings[(row, 'einsum', 'bwd')], timings[(row, 'blockwise', 'bwd')]
    ratio, vs_plain = b_b.ratio_to(e_b), b_b.ratio_to(plain)
    verdicts = [f'vs explicit {report.verdict(max(ratio, b_f.ratio_to(e_f)), time_target)}']
    if plain_target is not None:
      verdicts.append(f'vs plain {report.verdict(vs_plain, plain_target)}')
    time_section.add_row(
        length,
        row,
        report.ms(e_f.median),
        report.ms(b_f.median),
        report.ratio(b_f.ratio_to(e_f)),
        report.ms(e_b.median),
        report.ms(b_b.median),
        report.ratio(ratio),
        report.ratio(b_b.cpu_ratio_to(e_b)),
        report.ratio(vs_plain),
        '; '.join(verdicts),
    )
  time_section.notes.append(report.noise_note([t.spread for t in timings.values()], repeats))
  if length != LENGTH:
    time_section.notes.append(f'The target is stated for L = {LENGTH}; this run used L = {length}.')
  return [memory_section, time_section]
