"""Measurement 1: three ways to build the (H, L, L) bias of a scalar table encoder, timed and sized.

  toeplitz   the library's path, `relpos_jax.bias_matrix`: the encoder evaluated on the 2L - 1 distinct
             relative positions, expanded to (H, L, L) by one gather (`relpos_jax.positions.toeplitz`).
  all_pairs  the encoder evaluated on every one of the L^2 pairs: `encoder.bias(params,
             relative_positions(L, L))`, moved to (H, L, L) as attention consumes it.
  one_hot    flaxformer's / t5x's RelativePositionBiases: the (L, L) bucket matrix is computed with numpy at
             trace time (a program constant), turned into a (num_buckets, L, L) one-hot by comparison with an
             iota, and contracted with the (H, num_buckets) table by `lax.dot_general` (their comment: "instead
             of using a slow gather ... perform the gather-equivalent via a contraction").

Every contender returns the same (H, L, L) float32 array. Forward = that function of the encoder params;
forward+backward = its VJP with a fixed random (H, L, L) cotangent, i.e. the gradient of the table.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import relpos_jax
from relpos_jax import encoders
from benchmarks import measure, report

STRATEGIES = ('toeplitz', 'all_pairs', 'one_hot')
ENCODERS = (('t5', {}), ('shaw', {}))  # Published defaults: T5 32 buckets / 128; Shaw k = 16.
LENGTHS = (256, 1024, 2048, 4096)
QUICK_LENGTHS = (256, 1024)


def toeplitz_bias(encoder, params, length: int) -> jax.Array:
  return relpos_jax.bias_matrix(encoder, params, length, length)


def all_pairs_bias(encoder, params, length: int) -> jax.Array:
  rel = relpos_jax.relative_positions(length, length)
  return jnp.moveaxis(encoder.bias(params, rel), -1, 0)


def bucket_constant(encoder, length: int) -> np.ndarray:
  """The (L, L) bucket matrix as a numpy array, as flaxformer builds it before tracing."""
  rel = np.arange(length, dtype=np.int32)[None, :] - np.arange(length, dtype=np.int32)[:, None]
  return np.asarray(encoder.bucket(rel), np.int32)


def one_hot_bias(encoder, params, buckets: np.ndarray) -> jax.Array:
  table = params['table']  # (num_buckets, H)
  iota = lax.broadcasted_iota(jnp.int32, (encoder.num_buckets, 1, 1), 0)
  one_hot = (jnp.asarray(buckets)[None, :, :] == iota).astype(table.dtype)  # (num_buckets, L, L)
  return lax.dot_general(table.T, one_hot, (((1,), (0,)), ((), ())))  # (H, L, L)


def bias_fn(strategy: str, encoder, length: int):
  """params -> (H, L, L) bias built by `strategy`."""
  if strategy == 'toeplitz':
    return functools.partial(toeplitz_bias, encoder, length=length)
  if strategy == 'all_pairs':
    return functools.partial(all_pairs_bias, encoder, length=length)
  if strategy == 'one_hot':
    if not isinstance(encoder, encoders.contract.TableBiasEncoder):
      raise ValueError(f'one_hot needs a table encoder (bucket + table); got {type(encoder).__name__}.')
    return functools.partial(one_hot_bias, encoder, buckets=bucket_constant(encoder, length))
  raise ValueError(f'unknown strategy {strategy!r}; allowed: {STRATEGIES}.')


def with_backward(fn):
  """(params, cotangent) -> d<fn(params), cotangent>/d params: the forward pass and its VJP."""

  def forward_backward(params, cotangent):
    _, vjp = jax.vjp(fn, params)
    return vjp(cotangent)[0]

  return forward_backward


def run(lengths=LENGTHS, num_heads: int = 8, repeats: int = 5, warmup: int = 1) -> report.Section:
  section = report.Section(
      title='1. Building the bias of a scalar table encoder',
      timed=(
          'Timed: params -> (H, L, L) float32 bias (forward), and params, cotangent -> gradient of the '
          f'table (forward+backward, a VJP with a fixed cotangent); H = {num_heads}. Strategies: '
          '`toeplitz` = relpos_jax.bias_matrix (2L - 1 evaluations + one gather); `all_pairs` = '
          'encoder.bias on relative_positions(L, L) (L^2 evaluations), moved to (H, L, L); `one_hot` = '
          'flaxformer/t5x RelativePositionBiases (numpy bucket constant, (num_buckets, L, L) one-hot, '
          'dot_general with the table). Ratios divide by `toeplitz`. Memory = XLA total (argument + output '
          '- alias + temp) in MiB, temp in parentheses.'
      ),
      columns=[
          'encoder',
          'L',
          'strategy',
          'fwd ms',
          'fwd ratio',
          'fwd+bwd ms',
          'fwd+bwd ratio',
          'fwd MiB (temp)',
          'fwd+bwd MiB (temp)',
      ],
  )
  rng = jax.random.PRNGKey(0)
  spreads = []
  for name, hparams in ENCODERS:
    encoder = encoders.make(name, **hparams)
    params = encoder.init(rng, num_heads)
    for length in lengths:
      cotangent = jax.random.normal(jax.random.PRNGKey(1), (num_heads, length, length), jnp.float32)
      contenders, memory = {}, {}
      for strategy in STRATEGIES:
        fn = bias_fn(strategy, encoder, length)
        contenders[(strategy, 'fwd')] = (fn, (params,))
        contenders[(strategy, 'bwd')] = (with_backward(fn), (params, cotangent))
      for key, (fn, args) in contenders.items():
        memory[key] = measure.compiled_memory(fn, args)
      timings = measure.time_interleaved(
          {key: measure.compiled_call(fn, args) for key, (fn, args) in contenders.items()},
          repeats=repeats,
          warmup=warmup,
      )
      base = {kind: timings[('toeplitz', kind)] for kind in ('fwd', 'bwd')}
      spreads += [t.spread for t in timings.values()]
      for strategy in STRATEGIES:
        fwd, bwd = timings[(strategy, 'fwd')], timings[(strategy, 'bwd')]
        section.add_row(
            name,
            length,
            strategy,
            report.ms(fwd.median),
            report.ratio(fwd.ratio_to(base['fwd'])),
            report.ms(bwd.median),
            report.ratio(bwd.ratio_to(base['bwd'])),
            _memory_cell(memory[(strategy, 'fwd')]),
            _memory_cell(memory[(strategy, 'bwd')]),
        )
      del cotangent
  section.notes.append(report.noise_note(spreads, repeats))
  section.notes.append(
      'one_hot also embeds its (L, L) int32 bucket matrix in the program as a constant (4 L^2 bytes, '
      '64 MiB at L = 4096), which XLA counts in none of argument/output/temp.'
  )
  return section


def _memory_cell(use: measure.MemoryUse) -> str:
  cell = f'{measure.mib(use.total):.1f} ({measure.mib(use.temp):.1f})'
  return cell if use.complete else cell + ' (incomplete)'
