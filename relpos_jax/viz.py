"""Pictures of position encoders, for notebooks and reports: what each encoder does to attention.

Every function reads an encoder through its own contract (`bias`, `pair_bias`, `bucket`, `rotate_*`,
`key_embeddings`, `embed`, `inverse_frequencies`): no formula is repeated here, so a picture always shows
the code that runs. Plot functions return the matplotlib Figure they drew on (or draw on the `ax` given) and
never select a backend: a notebook shows the figures inline, a script saves them.

  plot_encoder              the figure that fits an encoder's kind (dispatches on `encoder.kind`)
  plot_bias_curve           b_h(j - i) against j - i, one line per head (per query position if not Toeplitz)
  plot_bias_heatmaps        the (L, L) bias of every head on one shared, zero-centred colour scale
  plot_normalized_distance  FIRE's MLP input psi(|i - j|) / psi(max(i, L)) at several query positions
  plot_bucket_maps          the table row read at each j - i (T5, piecewise, Shaw, each multi-scale scale)
  plot_rotary_frequencies   RoPE's wavelength per pair under each scaling rule, and its ratio to plain RoPE
  plot_rotary_scores        <R_i q, R_j k> against j - i at several query positions, and as an (L, L) matrix
  plot_relative_embeddings  a vector-relative encoder's key / value embeddings against j - i
  plot_absolute_embeddings  an absolute encoder's embedding matrix and its similarity p_i . p_j
  plot_train_positions      the positions a randomized encoder draws for its training sequences
  describe                  an encoder's spec, kind and the paper its module cites, as one paragraph

Sign convention as everywhere in relpos_jax: the x axis is j - i, key minus query (the past is negative).
Colour scales of biases are symmetric about 0 (blue: attention discouraged, red: encouraged), so a zero
bias is white whatever the encoder's range.
"""

from __future__ import annotations

import functools
import sys
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np


from relpos_jax import validation
from relpos_jax.encoders import contract, matrices, rope, spec

Kind = contract.Kind
BIAS_CMAP = 'RdBu_r'
# Heads beyond this many are summarised by the first ones: a figure of 16 heat maps reads as noise.
MAX_HEAD_PANELS = 8


# The encoder's own functions, jitted with the encoder static: one compilation per picture instead of one per
# eager primitive (what makes a tour of every encoder take seconds, not minutes).
@functools.partial(jax.jit, static_argnums=0)
def _bias(encoder, params, rel):
  return encoder.bias(params, rel)


@functools.partial(jax.jit, static_argnums=0)
def _pair_bias(encoder, params, q_pos, k_pos):
  return encoder.pair_bias(params, q_pos, k_pos)


@functools.partial(jax.jit, static_argnums=(0, 2, 3, 4))
def _bias_matrix(encoder, params, q_len, k_len, q_offset):
  return matrices.bias_matrix(encoder, params, q_len, k_len, q_offset=q_offset)


@functools.partial(jax.jit, static_argnums=0)
def _key_and_value_embeddings(encoder, params, rel):
  return encoder.key_embeddings(params, rel), encoder.value_embeddings(params, rel)


@functools.partial(jax.jit, static_argnums=0)
def _normalized_distance(encoder, params, q_pos, k_pos):
  return encoder.normalized_distance(params, q_pos, k_pos)


@functools.partial(jax.jit, static_argnums=(0, 2))
def _buckets(encoder, rel, per_scale: bool):
  return encoder.buckets(rel) if per_scale else encoder.bucket(rel)


@functools.partial(jax.jit, static_argnums=0)
def _embed(encoder, params, positions):
  return encoder.embed(params, positions)


def _pyplot():
  import matplotlib.pyplot as plt  # Local: importing relpos_jax never needs a plotting stack.

  return plt


def _name(encoder) -> str:
  """The encoder's spec string (its name for titles), or its class name when no spec can name it."""
  try:
    return spec.to_spec(encoder)
  except ValueError:
    return encoder.name or type(encoder).__name__


def _init(encoder, params, rng, num_heads, head_dim, model_dim):
  if params is not None:
    return params
  rng = jax.random.key(0) if rng is None else rng
  return encoder.init(rng, num_heads, head_dim=head_dim, model_dim=model_dim)


def _int_range(name: str, values) -> np.ndarray:
  values = np.asarray(values)
  if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.integer):
    raise ValueError(f'{name} must be a non-empty 1-D array of ints, got {values.dtype} {values.shape}.')
  return values.astype(np.int32)


def _require_kind(who: str, encoder, *kinds) -> None:
  if encoder.kind not in kinds:
    allowed = ' or '.join(k.value for k in kinds)
    raise ValueError(
        f'{who} needs an encoder of kind {allowed}; {_name(encoder)} is of kind ' f'{encoder.kind.value!r}.'
    )


def symmetric_limit(*arrays) -> float:
  """max |x| over the arrays (NaNs ignored), 1 if all are zero: the half-range of a zero-centred scale."""
  finite = [np.abs(a[np.isfinite(a)]) for a in map(np.asarray, arrays)]
  top = max((float(a.max()) for a in finite if a.size), default=0.0)
  return top if top > 0 else 1.0


def heads_differ(values, axis: int = -1) -> bool:
  """Whether the per-head slices of `values` along `axis` differ (if not, one panel stands for every head)."""
  values = np.asarray(values)
  first = np.take(values, [0], axis=axis)
  return not np.allclose(values, first, equal_nan=True)


# ----------------------------------------------------------------------------------------------------------
# Scalar biases.


def default_query_positions(max_distance: int) -> tuple[int, ...]:
  """Query positions at which a non-Toeplitz bias is drawn: max_distance, 16x and 64x that.

  Far apart on purpose: FIRE normalises by psi(max(i, L)) with a threshold L = 512 at init, so queries
  below L all see the same (Toeplitz) bias; only queries beyond it show the dependence on i.
  """
  return (max_distance, 16 * max_distance, 64 * max_distance)


def bias_curves(encoder, params, distances, query_positions=None) -> np.ndarray:
  """The scalar bias at relative positions `distances`: (N, H), or (Q, N, H) per query position.

  Toeplitz encoders are read with `bias(params, distances)`. A bias that depends on the query position
  (FIRE, TUPE's absolute score) is read with `pair_bias` for each query position i at keys j = i + d;
  entries with j < 0 (keys before the sequence starts) are NaN, so they are not drawn.
  """
  _require_kind('bias_curves', encoder, Kind.SCALAR_BIAS)
  distances = _int_range('distances', distances)
  if encoder.is_toeplitz and query_positions is None:
    return np.asarray(_bias(encoder, params, jnp.asarray(distances)), np.float32)
  if query_positions is None:
    query_positions = default_query_positions(int(np.abs(distances).max()))
  q = _int_range('query_positions', query_positions)
  keys = q[:, None] + distances[None, :]
  values = np.array(_pair_bias(encoder, params, jnp.asarray(q[:, None]), jnp.asarray(np.maximum(keys, 0))), np.float32)
  values[keys < 0] = np.nan
  return values


def plot_bias_curve(
    encoder, params, distances, *, query_positions=None, ax=None, title=None, max_heads: int = MAX_HEAD_PANELS
):
  """b_h(j - i) against j - i, one line per head.

  Not Toeplitz (query-dependent), or `query_positions` given: the first head only, one line per query
  position i (default `default_query_positions`), since the bias of a fixed j - i changes with i;
  coinciding lines would mean the bias is relative after all.
  """
  plt = _pyplot()
  _require_kind('plot_bias_curve', encoder, Kind.SCALAR_BIAS)  # before is_toeplitz, which only scalar biases have
  distances = _int_range('distances', distances)
  if ax is None:
    _, ax = plt.subplots(figsize=(5, 3.4), dpi=100, layout='constrained')
  if encoder.is_toeplitz and query_positions is None:
    values = bias_curves(encoder, params, distances)
    heads = values.shape[-1] if heads_differ(values) else 1
    for h in range(min(heads, max_heads)):
      label = f'head {h}' if heads > 1 else 'every head'
      ax.plot(distances, values[:, h], lw=1.4, label=label, drawstyle='steps-mid')
  else:
    query_positions = (
        default_query_positions(int(np.abs(distances).max())) if query_positions is None else query_positions
    )
    values = bias_curves(encoder, params, distances, query_positions)
    for i, row in zip(query_positions, values):
      ax.plot(distances, row[:, 0], lw=1.4, label=f'query i = {i}')
  ax.axvline(0, color='grey', lw=0.8, ls=':')
  ax.axhline(0, color='grey', lw=0.8)
  ax.set_xlabel('relative position j - i (key - query)')
  ax.set_ylabel('bias' if encoder.is_toeplitz and query_positions is None else 'bias, head 0')
  ax.set_title(title or f'{_name(encoder)}: bias vs j - i', fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7, frameon=False, ncol=2, loc='best')
  return ax.figure


def plot_normalized_distance(encoder, params, distances, *, query_positions=None, ax=None, title=None):
  """FIRE's MLP input psi(|i - j|) / psi(max(i, L)) against j - i (keys j <= i), one line per query i.

  Its "progressive interpolation": below the threshold L every query sees the same curve (the bias is
  Toeplitz there); beyond it, longer contexts are squeezed into the input range [0, 1] seen in training.
  Needs an encoder with `normalized_distance(params, q_pos, k_pos)` (FIRE).
  """
  plt = _pyplot()
  if not hasattr(encoder, 'normalized_distance'):
    raise ValueError(
        f'plot_normalized_distance needs an encoder with normalized_distance (FIRE); ' f'{_name(encoder)} has none.'
    )
  distances = _int_range('distances', distances)
  if not (distances <= 0).any():
    raise ValueError(
        f'plot_normalized_distance: distances hold no j - i <= 0 (keys at or before the query, the only ones '
        f'drawn); got {distances.min()} .. {distances.max()}.'
    )
  distances = distances[distances <= 0]
  if query_positions is None:
    query_positions = default_query_positions(int(np.abs(distances).max()))
  if ax is None:
    _, ax = plt.subplots(figsize=(5, 3.4), dpi=100, layout='constrained')
  for i in query_positions:
    keys = int(i) + distances
    shown = keys >= 0
    value = np.asarray(_normalized_distance(encoder, params, jnp.int32(i), jnp.asarray(keys[shown])))
    ax.plot(distances[shown], value, lw=1.4, label=f'query i = {i}')
  ax.set_xlabel('relative position j - i (key - query)')
  ax.set_ylabel('psi(|i - j|) / psi(max(i, L))')
  ax.set_title(
      title or f'{_name(encoder)}: MLP input (threshold L = {float(encoder.threshold(params)):g})', fontsize=10
  )
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7, frameon=False)
  return ax.figure


def _two_axes(who: str, axes):
  """The two panels a two-panel plot draws on; fewer axes given is refused by name (not a bare unpacking error)."""
  flat = list(np.ravel(np.asarray(axes, dtype=object)))
  if len(flat) < 2:
    raise ValueError(f'{who} draws 2 panels; axes must hold at least 2 matplotlib axes, got {len(flat)}.')
  return flat[0], flat[1]


def _heatmap_panels(fig, axes, matrices, titles, limit, cmap, xlabel, ylabel, colorbar_label, extent=None):
  image = None
  for ax, matrix, title in zip(axes, matrices, titles):
    image = ax.imshow(matrix, cmap=cmap, vmin=-limit, vmax=limit, interpolation='nearest', extent=extent, aspect='auto')
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel)
  axes[0].set_ylabel(ylabel)
  fig.colorbar(image, ax=list(axes), shrink=0.9, label=colorbar_label)


def plot_bias_heatmaps(
    encoder, params, length: int, *, q_offset: int = 0, axes=None, title=None, max_heads: int = MAX_HEAD_PANELS
):
  """The (L, L) bias matrix `relpos_jax.bias_matrix` builds, one panel per head on one colour scale.

  Heads with identical biases share one panel ("every head"). The scale is symmetric about 0 and shared
  by every panel, so heads compare by colour. `q_offset` moves the queries to q_offset .. q_offset + L - 1
  (keys stay at 0 .. L - 1), which is where a query-dependent bias such as FIRE's changes.
  """
  plt = _pyplot()
  length = validation.positive_int('viz', 'length', length)
  matrix = np.asarray(_bias_matrix(encoder, params, length, length, int(q_offset)))
  heads = matrix.shape[0] if heads_differ(matrix, axis=0) else 1
  shown = min(heads, max_heads)
  if axes is None:
    fig, axes = plt.subplots(1, shown, figsize=(2.6 * shown + 1.2, 2.8), dpi=100, layout='constrained', squeeze=False)
    axes = list(axes[0])
  else:
    axes = list(np.ravel(axes))
    if len(axes) < shown:
      raise ValueError(f'plot_bias_heatmaps: {shown} head panels need {shown} axes, got {len(axes)}.')
    fig = axes[0].figure
  titles = [f'head {h}' if heads > 1 else 'every head' for h in range(shown)]
  if heads > shown:
    titles[-1] += f' (of {heads})'
  extent = (-0.5, length - 0.5, q_offset + length - 0.5, q_offset - 0.5)  # axis ticks at positions
  _heatmap_panels(
      fig,
      axes[:shown],
      matrix[:shown],
      titles,
      symmetric_limit(matrix),
      BIAS_CMAP,
      'key position j',
      'query position i',
      'bias',
      extent,
  )
  fig.suptitle(title or f'{_name(encoder)}: {length} x {length} bias', fontsize=10)
  return fig


# ----------------------------------------------------------------------------------------------------------
# Bucket maps.


def bucket_maps(encoder, distances) -> dict[str, np.ndarray]:
  """The table row each relative position reads: {label: (N,) ints}.

  Table encoders (`bucket`: T5, piecewise, Shaw) give one map; multi-scale (`buckets`) one per scale.
  """
  distances = jnp.asarray(_int_range('distances', distances))
  if hasattr(encoder, 'buckets') and hasattr(encoder, 'scales'):
    maps = np.asarray(_buckets(encoder, distances, True))
    return {f'scale {s}': row for s, row in zip(encoder.scales, maps)}
  if hasattr(encoder, 'bucket'):
    return {_name(encoder): np.asarray(_buckets(encoder, distances, False))}
  raise ValueError(
      f'plot_bucket_maps: {_name(encoder)} has no bucket map (bucket or buckets); allowed: '
      f'table encoders such as t5, piecewise, shaw, multiscale.'
  )


def plot_bucket_maps(encoder, distances, *, ax=None, title=None):
  """Bucket (table row) against j - i: exact buckets are steps of one, compressed ones wider steps."""
  plt = _pyplot()
  distances = _int_range('distances', distances)
  if ax is None:
    _, ax = plt.subplots(figsize=(5, 3.4), dpi=100, layout='constrained')
  maps = bucket_maps(encoder, distances)
  for label, rows in maps.items():
    used = len(np.unique(rows))
    ax.plot(distances, rows, drawstyle='steps-mid', lw=1.4, label=f'{label} ({used} rows used)')
  ax.axvline(0, color='grey', lw=0.8, ls=':')
  ax.set_xlabel('relative position j - i (key - query)')
  ax.set_ylabel('table row (bucket)')
  ax.set_title(title or f'{_name(encoder)}: buckets', fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7, frameon=False)
  return ax.figure


# ----------------------------------------------------------------------------------------------------------
# Rotary encoders.


def plot_rotary_frequencies(
    head_dim: int,
    rules: Mapping[str, Mapping],
    *,
    length: int | None = None,
    original_max_position: int | None = None,
    axes=None,
    title=None,
):
  """Wavelength 2 pi / theta_k per rotary pair k under each scaling rule, and theta'_k / theta_k.

  `rules` maps a legend label to RoPE hyperparameters, e.g. {'YaRN': dict(scaling='yarn', factor=8.0,
  original_max_position=512)}; frequencies come from `rope.inverse_frequencies`. `length` is the current
  length a 'dynamic' rule is evaluated at (the other rules do not depend on it). `original_max_position`
  draws the training length: pairs whose wavelength exceeds it never completed a turn in training.
  """
  plt = _pyplot()
  head_dim = validation.positive_int('viz', 'head_dim', head_dim)
  if not rules:
    raise ValueError('plot_rotary_frequencies: rules is empty; allowed: {label: rope hyperparameters}.')
  reference = rope.inverse_frequencies(head_dim)
  if axes is None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), dpi=100, layout='constrained')
  wave_ax, ratio_ax = _two_axes('plot_rotary_frequencies', axes)
  fig = wave_ax.figure
  pairs = np.arange(head_dim // 2)
  for label, hparams in rules.items():
    hparams = dict(hparams)
    rule_length = length if hparams.get('scaling') == 'dynamic' else None
    if hparams.get('scaling') == 'dynamic' and length is None:
      raise ValueError(
          f'plot_rotary_frequencies: rule {label!r} is dynamic NTK, which depends on the '
          f'current length; pass length=...'
      )
    theta = rope.inverse_frequencies(head_dim, rule_length, **hparams)
    wave_ax.plot(pairs, 2 * np.pi / theta, lw=1.4, label=label)
    ratio_ax.plot(pairs, theta / reference, lw=1.4, label=label)
  if original_max_position is not None:
    wave_ax.axhline(original_max_position, color='grey', ls='--', lw=1)
    wave_ax.text(0, original_max_position, ' training length', va='bottom', fontsize=8, color='grey')
  wave_ax.set_yscale('log')
  wave_ax.set_xlabel('rotary pair k (high frequency -> low)')
  wave_ax.set_ylabel('wavelength 2 pi / theta_k (positions)')
  wave_ax.set_title('wavelength per pair', fontsize=10)
  ratio_ax.set_yscale('log')
  ratio_ax.set_xlabel('rotary pair k')
  ratio_ax.set_ylabel("theta'_k / theta_k")
  ratio_ax.set_title('frequency relative to plain RoPE (1: untouched, 1/s: interpolated)', fontsize=10)
  for ax_ in (wave_ax, ratio_ax):
    ax_.grid(alpha=0.3, which='both')
    ax_.legend(fontsize=7, frameon=False)
  fig.suptitle(title or f'RoPE frequencies, head_dim = {head_dim}', fontsize=10)
  return fig


@functools.partial(jax.jit, static_argnums=0)
def _rotate_pair(encoder, params, query, key, positions):
  """R_p q and R_p k for one query and one key vector at every position p (shared positions array)."""
  positions = jnp.asarray(positions, jnp.int32)
  n, d = positions.shape[0], query.shape[-1]
  q = jnp.broadcast_to(jnp.asarray(query, jnp.float32), (n, 1, d))
  k = jnp.broadcast_to(jnp.asarray(key, jnp.float32), (n, 1, d))
  # Both rotated with one positions array: encoders that centre positions per sequence (xPos) then use
  # the same centre for queries and keys, as in self-attention.
  return encoder.rotate_queries(params, q, positions)[:, 0], encoder.rotate_keys(params, k, positions)[:, 0]


def rotary_scores(encoder, params, query, key, distances, query_position: int) -> np.ndarray:
  """<R_i q, R_j k> for the query at position i and keys at j = i + d, d in `distances`: (N,) float32."""
  _require_kind('rotary_scores', encoder, Kind.ROTARY)
  distances = _int_range('distances', distances)
  positions = np.concatenate([[query_position], query_position + distances]).astype(np.int32)
  rq, rk = _rotate_pair(encoder, params, query, key, positions)
  return np.asarray(rk[1:] @ rq[0], np.float32)


def rotary_score_matrix(encoder, params, query, key, length: int) -> np.ndarray:
  """S[i, j] = <R_i q, R_j k> for positions 0 .. L - 1: Toeplitz when the encoding is relative."""
  _require_kind('rotary_score_matrix', encoder, Kind.ROTARY)
  rq, rk = _rotate_pair(encoder, params, query, key, np.arange(validation.positive_int('viz', 'length', length)))
  return np.asarray(rq @ rk.T, np.float32)


def plot_rotary_scores(
    encoder,
    params,
    distances,
    *,
    query_positions: Sequence[int] = (0, 1000),
    query=None,
    key=None,
    length: int = 64,
    axes=None,
    title=None,
):
  """<R_i q, R_j k> against j - i at each query position, and the (L, L) score matrix.

  Default q = k = (1, ..., 1), RoFormer's "long-term decay" setting (section 3.4.3): the score
  sum_k 2 cos((j - i) theta_k) decays, with oscillations, as |j - i| grows. Lines at different query
  positions coincide exactly when the encoding depends on j - i only. Causal-only encoders
  (`requires_causal`, xPos) are drawn for j <= i, where they are defined.
  """
  plt = _pyplot()
  _require_kind('plot_rotary_scores', encoder, Kind.ROTARY)
  distances = _int_range('distances', distances)
  head_dim = contract.dims(params).head_dim
  if head_dim is None:
    raise ValueError('plot_rotary_scores: params carry no head_dim; init the encoder with head_dim=...')
  query = np.ones(head_dim, np.float32) if query is None else np.asarray(query, np.float32)
  key = np.ones(head_dim, np.float32) if key is None else np.asarray(key, np.float32)
  causal = getattr(encoder, 'requires_causal', False)
  if causal:
    if not (distances <= 0).any():
      raise ValueError(
          f'plot_rotary_scores: {_name(encoder)} is causal, drawn for j - i <= 0 only, and distances hold none; '
          f'got {distances.min()} .. {distances.max()}.'
      )
    distances = distances[distances <= 0]
  if axes is None:
    fig, axes = plt.subplots(
        1, 2, figsize=(11, 3.6), dpi=100, layout='constrained', gridspec_kw={'width_ratios': [1.6, 1]}
    )
  curve_ax, matrix_ax = _two_axes('plot_rotary_scores', axes)
  fig = curve_ax.figure
  for n, i in enumerate(query_positions):
    scores = rotary_scores(encoder, params, query, key, distances, int(i))
    curve_ax.plot(distances, scores, lw=1.6 if n == 0 else 1.0, ls='-' if n == 0 else '--', label=f'query i = {i}')
  curve_ax.axvline(0, color='grey', lw=0.8, ls=':')
  curve_ax.axhline(0, color='grey', lw=0.8)
  curve_ax.set_xlabel('relative position j - i (key - query)')
  curve_ax.set_ylabel('<R_i q, R_j k>')
  curve_ax.set_title('score vs j - i (lines coincide: relative)', fontsize=10)
  curve_ax.grid(alpha=0.3)
  curve_ax.legend(fontsize=7, frameon=False)
  matrix = rotary_score_matrix(encoder, params, query, key, length)
  if causal:
    matrix = np.where(np.tril(np.ones_like(matrix, bool)), matrix, np.nan)
  matrix_title = f'{length} x {length} scores' + (' (j <= i)' if causal else '')
  _heatmap_panels(
      fig,
      [matrix_ax],
      [matrix],
      [matrix_title],
      symmetric_limit(matrix),
      BIAS_CMAP,
      'key position j',
      'query position i',
      'score',
  )
  fig.suptitle(title or f'{_name(encoder)}: rotated score, head_dim = {head_dim}', fontsize=10)
  return fig


# ----------------------------------------------------------------------------------------------------------
# Vector-relative and absolute encoders.


def plot_relative_embeddings(encoder, params, distances, *, head: int = 0, axes=None, title=None):
  """The vectors a vector-relative encoder adds per relative position, head `head`, against j - i.

  Panels: the key embeddings a^K_{j-i} (dimension x relative position), the value embeddings a^V when the
  encoder has them, and, when it has a query bias v (Transformer-XL), the position-only score term
  v . a^K_{j-i} of every head, which is a scalar bias of j - i learned through v.
  """
  plt = _pyplot()
  _require_kind('plot_relative_embeddings', encoder, Kind.VECTOR_RELATIVE)
  distances = _int_range('distances', distances)
  rel = jnp.asarray(distances)
  keys, values = _key_and_value_embeddings(encoder, params, rel)  # (N, H, D) each, values maybe None
  keys = np.asarray(keys)
  if not 0 <= head < keys.shape[1]:
    raise ValueError(f'plot_relative_embeddings: head={head} is out of range; allowed: 0 .. {keys.shape[1] - 1}.')
  _, v_bias = encoder.query_biases(params)
  panels = [('key embeddings a^K', keys[:, head].T)]
  if values is not None:
    panels.append(('value embeddings a^V', np.asarray(values)[:, head].T))
  count = len(panels) + (v_bias is not None)
  if axes is None:
    fig, axes = plt.subplots(1, count, figsize=(4.6 * count + 1, 3.4), dpi=100, layout='constrained', squeeze=False)
    axes = list(axes[0])
  else:
    axes = list(np.ravel(axes))
    if len(axes) < count:
      raise ValueError(f'plot_relative_embeddings: {_name(encoder)} draws {count} panels, got {len(axes)} axes.')
    fig = axes[0].figure
  shared = 'shared by every head' if not heads_differ(keys, axis=1) else f'head {head}'
  limit = symmetric_limit(*(matrix for _, matrix in panels))
  extent = (distances[0] - 0.5, distances[-1] + 0.5, keys.shape[-1] - 0.5, -0.5)
  _heatmap_panels(
      fig,
      axes[: len(panels)],
      [m for _, m in panels],
      [f'{t}, {shared}' for t, _ in panels],
      limit,
      BIAS_CMAP,
      'relative position j - i',
      'dimension',
      'value',
      extent,
  )
  if v_bias is not None:
    ax = axes[len(panels)]
    term = np.einsum('nhd,hd->nh', keys, np.asarray(v_bias))
    for h in range(min(term.shape[1], MAX_HEAD_PANELS)):
      ax.plot(distances, term[:, h], lw=1.2, label=f'head {h}')
    ax.axvline(0, color='grey', lw=0.8, ls=':')
    ax.set_xlabel('relative position j - i')
    ax.set_ylabel('v . a^K_{j-i}')
    ax.set_title('position-only score term', fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
  clip = encoder.clip_distance
  fig.suptitle(
      title
      or (f'{_name(encoder)}: relative embeddings' + (f' (clipped at |j - i| = {clip})' if clip is not None else '')),
      fontsize=10,
  )
  return fig


def plot_absolute_embeddings(encoder, params, length: int, *, axes=None, title=None):
  """The (L, model_dim) embedding matrix p_0 .. p_{L-1}, and p_i . p_j / model_dim.

  The similarity shows how much an absolute code says about relative position: sinusoids give a nearly
  Toeplitz band (p_i . p_j is a function of j - i), a random table only its diagonal.
  """
  plt = _pyplot()
  _require_kind('plot_absolute_embeddings', encoder, Kind.ABSOLUTE)
  length = validation.positive_int('viz', 'length', length)
  encoder.check_positions(length)
  table = np.asarray(_embed(encoder, params, jnp.arange(length)))  # (L, model_dim)
  similarity = table @ table.T / table.shape[-1]
  if axes is None:
    fig, axes = plt.subplots(
        1, 2, figsize=(11, 3.6), dpi=100, layout='constrained', gridspec_kw={'width_ratios': [1.6, 1]}
    )
  table_ax, sim_ax = _two_axes('plot_absolute_embeddings', axes)
  fig = table_ax.figure
  _heatmap_panels(
      fig, [table_ax], [table.T], ['embedding p_i'], symmetric_limit(table), BIAS_CMAP, 'position i', 'feature', 'value'
  )
  _heatmap_panels(
      fig,
      [sim_ax],
      [similarity],
      ['p_i . p_j / model_dim'],
      symmetric_limit(similarity),
      BIAS_CMAP,
      'position j',
      'position i',
      'similarity',
  )
  fig.suptitle(title or f'{_name(encoder)}: absolute embeddings', fontsize=10)
  return fig


def plot_train_positions(encoder, rng, *, batch: int = 4, length: int = 32, ax=None, title=None):
  """The positions `contract.train_positions` draws for `batch` training sequences of `length` tokens."""
  plt = _pyplot()
  batch = validation.positive_int('plot_train_positions', 'batch', batch)
  length = validation.positive_int('plot_train_positions', 'length', length)
  drawn = contract.train_positions(encoder, rng, batch, length)
  if ax is None:
    _, ax = plt.subplots(figsize=(6, 3.4), dpi=100, layout='constrained')
  index = np.arange(length)
  if drawn is None:
    ax.plot(index, index, marker='o', ms=3, label='0 .. L - 1 (no randomization)')
  else:
    for b, row in enumerate(np.asarray(drawn)):
      ax.plot(index, row, marker='o', ms=2.5, lw=0.8, label=f'sequence {b}')
    ax.plot(index, index, color='grey', ls='--', lw=1, label='evaluation: 0 .. L - 1')
  ax.set_xlabel('token index in the training sequence')
  ax.set_ylabel('position given to the encoder')
  ax.set_title(title or f'{_name(encoder)}: training positions, L = {length}', fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7, frameon=False)
  return ax.figure


# ----------------------------------------------------------------------------------------------------------
# One call per encoder.


def describe(encoder) -> str:
  """The encoder's spec, kind and the first paragraph of its module's docstring (where its paper is cited)."""
  doc = (sys.modules[type(encoder).__module__].__doc__ or '').strip().split('\n\n')[0]
  return f'{_name(encoder)}  [{encoder.kind.value}]\n  ' + ' '.join(doc.split())


def plot_encoder(
    encoder,
    params=None,
    *,
    rng=None,
    num_heads: int = 4,
    head_dim: int = 32,
    model_dim: int = 128,
    length: int = 32,
    max_distance: int = 64,
    title: str | None = None,
):
  """The figure that shows what `encoder` does, by kind; params from `encoder.init` when not given.

    scalar bias      b_h(j - i) curves over |j - i| <= max_distance, and the (length x length) heat maps
    vector relative  key / value embeddings against j - i (and Transformer-XL's position-only term)
    rotary           <R_i q, R_j k> against j - i at two query positions, and the score matrix
    absolute         the embedding matrix and its similarity

  Randomized wrappers show their base (their only difference is where training positions come from:
  `plot_train_positions`). Combinations have no single picture: plot each of `encoder.parts`. `title`
  replaces the figure's title (default: the encoder's spec).
  """
  plt = _pyplot()
  if not isinstance(encoder, contract.Encoder):
    raise ValueError(f'plot_encoder: {encoder!r} is not an encoder; build one with relpos_jax.encoders.make.')
  if encoder.kind is Kind.COMBINED and len(encoder.children()) == 1:
    encoder = encoder.children()[0]  # A wrapper (randomized) looks like its base.
  if encoder.kind is Kind.COMBINED:
    raise ValueError(f'plot_encoder: {_name(encoder)} is a sum of encoders; plot each of encoder.parts.')
  params = _init(encoder, params, rng, num_heads, head_dim, model_dim)
  distances = np.arange(-max_distance, max_distance + 1)
  if encoder.kind is Kind.SCALAR_BIAS:
    matrix = np.asarray(_bias_matrix(encoder, params, length, length, 0))
    heads = min(matrix.shape[0] if heads_differ(matrix, axis=0) else 1, MAX_HEAD_PANELS)
    fig = plt.figure(figsize=(4.6 + 2.5 * heads + 1, 3.2), dpi=100, layout='constrained')
    grid = fig.add_gridspec(1, heads + 1, width_ratios=[1.9] + [1] * heads)
    plot_bias_curve(encoder, params, distances, ax=fig.add_subplot(grid[0]), title='bias vs j - i')
    plot_bias_heatmaps(
        encoder,
        params,
        length,
        axes=[fig.add_subplot(grid[h + 1]) for h in range(heads)],
        title=title
        or (
            f'{_name(encoder)}: bias curves and {length} x {length} bias'
            + ('' if encoder.is_toeplitz else ' (query-dependent)')
        ),
    )
    return fig
  if encoder.kind is Kind.VECTOR_RELATIVE:
    return plot_relative_embeddings(encoder, params, distances, title=title)
  if encoder.kind is Kind.ROTARY:
    return plot_rotary_scores(
        encoder, params, distances, query_positions=(max_distance, 16 * max_distance), length=length, title=title
    )
  if encoder.kind is Kind.ABSOLUTE:
    return plot_absolute_embeddings(encoder, params, length, title=title)
  raise ValueError(f'plot_encoder: no picture for kind {encoder.kind.value!r} of {_name(encoder)}.')
