"""relpos_jax.viz draws what its compute functions return: the data in each figure, read back from matplotlib.

The notebooks call these helpers but only the slow notebook run executes them; these tests pin, on tiny encoders
(2-4 heads, head_dim 8, a dozen distances), that every line and image a plot function draws holds the values its
compute function (`bias_curves`, `bias_matrix`, `bucket_maps`, `rotary_scores`, ...) or the encoder returns, checked
against hand values where the formula is short (ALiBi's slopes, T5's buckets, RoFormer's long-term decay, the
Transformer's sinusoids, FIRE's normalised distance); that a plot asked of the wrong encoder refuses by name; and that
`plot_encoder` picks the panels of each encoder kind. matplotlib runs headless (Agg) and every figure is closed.
"""

import dataclasses
import functools

import jax
import matplotlib
import numpy as np
import pytest

matplotlib.use('Agg')  # This process only: the tests draw figures but never show them.
import matplotlib.pyplot as plt  # noqa: E402

from relpos_jax import encoders, viz  # noqa: E402
from relpos_jax.encoders import contract, spec  # noqa: E402
from relpos_jax.encoders.combine import combine  # noqa: E402

RNG = jax.random.key(0)
ALIBI_SLOPES_4 = np.array([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])  # 2^(-8h/H), h = 1..4 (Press et al. 2022)


@pytest.fixture(autouse=True)
def _close_figures():
  yield
  plt.close('all')


@functools.lru_cache(maxsize=None)
def _cached_init(encoder, num_heads, dims):
  return encoder.init(RNG, num_heads, **dict(dims))


def _init(encoder, num_heads=4, **dims):
  """encoder.init at key 0, once per (encoder, heads, dims) in this file: inits compile, and the CPU is shared."""
  return _cached_init(encoder, num_heads, tuple(sorted(dims.items())))


def _labelled(ax):
  """The lines a plot drew with a legend label (matplotlib names unlabelled artists '_child<n>')."""
  return [line for line in ax.lines if not line.get_label().startswith('_')]


def _panels(fig):
  """The axes holding an image, in drawing order (colour bars hold a mesh, not an image)."""
  return [ax for ax in fig.axes if ax.images]


def _titles(fig):
  return [ax.get_title() for ax in fig.axes if ax.get_title()]


def _fire_bias(params, q_pos, k_pos):
  """FIRE in numpy (Li et al. 2024, appendix code): f_theta(psi(|i - j|) / (psi(max(i, L)) + eps)), with
  psi(x) = log(c x + 1), f_theta = Linear -> ReLU -> Linear, L = |multiplier| * 512, eps = 1e-6 (the defaults).

  An independent reading of the params, so a plot is checked against the paper, not against the code it calls.
  Returns (..., num_heads) float64.
  """
  c = abs(float(params['c']))
  threshold = abs(float(params['threshold_multiplier'])) * 512.0
  psi = lambda x: np.log1p(c * np.asarray(x, np.float64))
  x = (psi(np.abs(np.subtract(q_pos, k_pos))) / (psi(np.maximum(q_pos, threshold)) + 1e-6))[..., None]
  for n, layer in enumerate(params['mlp']):
    x = (np.maximum(x, 0) if n else x) @ np.asarray(layer['kernel'], np.float64) + np.asarray(layer['bias'], np.float64)
  return x


def _rope_decay(distances, head_dim):
  """RoFormer section 3.4.3: with q = k = (1, ..., 1), <R_i q, R_j k> = sum_k 2 cos((j - i) theta_k)."""
  theta = 10000.0 ** (-np.arange(0, head_dim, 2) / head_dim)
  return 2 * np.cos(np.asarray(distances, np.float64)[..., None] * theta).sum(-1)


# ----------------------------------------------------------------------------------------------------------
# Small helpers.


def test_symmetric_limit_is_the_largest_finite_magnitude():
  assert viz.symmetric_limit(np.array([1.0, -3.0, np.nan]), np.array([2.0])) == 3.0
  assert viz.symmetric_limit([[0.5, -0.25]]) == 0.5
  assert viz.symmetric_limit(np.array([-np.inf, np.inf, 0.5])) == 0.5  # inf is not drawn either
  # Nothing non-zero to scale by: a unit scale, not a 0-wide colour range.
  assert viz.symmetric_limit(np.zeros(3)) == 1.0
  assert viz.symmetric_limit(np.array([np.nan]), np.array([])) == 1.0


def test_heads_differ_compares_every_slice_with_the_first():
  same_per_row = np.array([[1.0, 1.0], [2.0, 2.0]])
  assert not viz.heads_differ(same_per_row)  # heads on the last axis: equal within each row
  assert viz.heads_differ(same_per_row, axis=0)
  assert not viz.heads_differ(np.array([[np.nan, np.nan], [3.0, 3.0]]))  # NaN equals NaN (masked keys)
  assert viz.heads_differ(np.array([1.0, 1.001]))
  assert not viz.heads_differ(np.array([1.0, 1.0 + 1e-10]))  # float rounding is not a different head


def test_default_query_positions():
  assert viz.default_query_positions(8) == (8, 128, 512)
  assert viz.default_query_positions(1) == (1, 16, 64)


# ----------------------------------------------------------------------------------------------------------
# Refusals: bad distance ranges and encoders of the wrong kind, each named in the message.


@pytest.mark.parametrize(
    'bad, shown',
    [
        (np.array([0.5, 1.0]), 'float64 (2,)'),
        (np.array([], np.int32), 'int32 (0,)'),
        (np.zeros((2, 2), np.int32), 'int32 (2, 2)'),
        (np.array([True, False]), 'bool (2,)'),
    ],
)
def test_distances_must_be_a_non_empty_1d_int_array(bad, shown):
  # params=None: the range is refused before the encoder is read.
  alibi, t5, rope = encoders.make('alibi'), encoders.make('t5'), encoders.make('rope')
  message = f'distances must be a non-empty 1-D array of ints, got {shown}'
  with pytest.raises(ValueError, match=message.replace('(', r'\(').replace(')', r'\)')):
    viz.bias_curves(alibi, None, bad)
  with pytest.raises(ValueError, match='distances must be a non-empty 1-D array of ints'):
    viz.plot_bias_curve(alibi, None, bad)
  with pytest.raises(ValueError, match='distances must be a non-empty 1-D array of ints'):
    viz.plot_bucket_maps(t5, bad)
  with pytest.raises(ValueError, match='distances must be a non-empty 1-D array of ints'):
    viz.rotary_scores(rope, None, np.ones(8), np.ones(8), bad, 0)
  with pytest.raises(ValueError, match='distances must be a non-empty 1-D array of ints'):
    viz.plot_relative_embeddings(encoders.make('shaw_vector'), None, bad)


def test_query_positions_must_be_ints():
  fire = encoders.make('fire')
  with pytest.raises(ValueError, match=r'query_positions must be a non-empty 1-D array of ints, got float64 \(1,\)'):
    viz.bias_curves(fire, None, np.arange(-2, 3), query_positions=[1.5])


@pytest.mark.parametrize(
    'plot, name, wanted',
    [
        (lambda e, p: viz.bias_curves(e, p, np.arange(3)), 'rope', 'bias_curves.*scalar_bias'),
        # plot_bias_curve: was AttributeError (no is_toeplitz) before viz checked the kind.
        (lambda e, p: viz.plot_bias_curve(e, p, np.arange(3)), 'rope', 'plot_bias_curve.*scalar_bias'),
        (
            lambda e, p: viz.rotary_scores(e, p, np.ones(8), np.ones(8), np.arange(3), 0),
            'alibi',
            'rotary_scores.*rotary',
        ),
        (lambda e, p: viz.rotary_score_matrix(e, p, np.ones(8), np.ones(8), 4), 't5', 'rotary_score_matrix.*rotary'),
        (lambda e, p: viz.plot_rotary_scores(e, p, np.arange(3)), 'alibi', 'plot_rotary_scores.*rotary'),
        (
            lambda e, p: viz.plot_relative_embeddings(e, p, np.arange(3)),
            'rope',
            'plot_relative_embeddings.*vector_relative',
        ),
        (lambda e, p: viz.plot_absolute_embeddings(e, p, 4), 't5', 'plot_absolute_embeddings.*absolute'),
    ],
    ids=[
        'bias_curves',
        'plot_bias_curve',
        'rotary_scores',
        'rotary_score_matrix',
        'plot_rotary_scores',
        'plot_relative_embeddings',
        'plot_absolute_embeddings',
    ],
)
def test_a_plot_of_the_wrong_kind_names_the_function_the_kind_and_the_encoder(plot, name, wanted):
  encoder = encoders.make(name)
  kind = encoder.kind.value
  with pytest.raises(ValueError, match=f"{wanted}; {name} is of kind '{kind}'"):
    plot(encoder, None)  # refused before params are read


def test_other_refusals():
  alibi = encoders.make('alibi')
  with pytest.raises(ValueError, match='plot_normalized_distance needs an encoder with normalized_distance.*alibi has'):
    viz.plot_normalized_distance(alibi, None, np.arange(-3, 1))
  with pytest.raises(ValueError, match='plot_bucket_maps: alibi has no bucket map'):
    viz.bucket_maps(alibi, np.arange(3))
  with pytest.raises(ValueError, match='4 head panels need 4 axes, got 1'):
    viz.plot_bias_heatmaps(alibi, _init(alibi), 6, axes=[plt.subplots()[1]])
  with pytest.raises(ValueError, match='viz: length=0 is invalid; allowed: an int >= 1'):
    viz.plot_bias_heatmaps(alibi, _init(alibi), 0)
  rope = encoders.make('rope')
  with pytest.raises(ValueError, match='params carry no head_dim'):
    viz.plot_rotary_scores(rope, _init(rope, 2), np.arange(3))  # init without head_dim
  with pytest.raises(ValueError, match='viz: head_dim=0 is invalid'):
    viz.plot_rotary_frequencies(0, {'plain': {}})
  with pytest.raises(ValueError, match='rules is empty'):
    viz.plot_rotary_frequencies(8, {})
  with pytest.raises(ValueError, match="rule 'grow' is dynamic NTK.*pass length="):
    viz.plot_rotary_frequencies(8, {'grow': dict(scaling='dynamic', factor=2.0, original_max_position=16)})
  with pytest.raises(ValueError, match='plot_train_positions: batch=0 is invalid'):
    viz.plot_train_positions(alibi, RNG, batch=0)
  learned = encoders.make('learned', max_length=8)
  with pytest.raises(ValueError, match='learned: position 8 is beyond the table of max_length=8'):
    viz.plot_absolute_embeddings(learned, _init(learned, 2, model_dim=4), 9)  # past the table's last row


# Inputs that used to fail deep inside numpy or with an IndexError (viz checks them since this file was written;
# plot_bias_curve of a non-scalar encoder, the AttributeError, is in the wrong-kind sweep above).


def test_normalized_distance_needs_a_key_at_or_before_the_query():
  fire = encoders.make('fire')
  with pytest.raises(ValueError, match=r'plot_normalized_distance: distances hold no j - i <= 0.*got 1 \.\. 3'):
    viz.plot_normalized_distance(fire, _init(fire, 2), np.arange(1, 4))  # was numpy's zero-size max


def test_rotary_scores_of_a_causal_encoder_need_a_key_at_or_before_the_query():
  xpos = encoders.make('xpos')
  with pytest.raises(ValueError, match=r'plot_rotary_scores: xpos is causal.*got 1 \.\. 3'):
    viz.plot_rotary_scores(xpos, _init(xpos, 2, head_dim=8), np.arange(1, 4))  # was 'distances ... got (0,)'


def test_relative_embeddings_check_the_axes_and_the_head():
  txl = encoders.make('transformer_xl')
  params = _init(txl, 2, head_dim=4, model_dim=8)
  with pytest.raises(ValueError, match='transformer_xl draws 2 panels, got 1 axes'):
    viz.plot_relative_embeddings(txl, params, np.arange(-3, 4), axes=[plt.subplots()[1]])  # was IndexError
  for head in (2, -1):
    with pytest.raises(ValueError, match=rf'head={head} is out of range; allowed: 0 \.\. 1'):
      viz.plot_relative_embeddings(txl, params, np.arange(-3, 4), head=head)  # was IndexError / the last head


def test_two_panel_plots_refuse_fewer_than_two_axes():
  """Each draws two panels on given axes; one Axes (or a list of one) was a bare 'not enough values to unpack'."""
  rope, sinusoidal = encoders.make('rope'), encoders.make('sinusoidal')
  one = plt.subplots()[1]
  calls = {
      'plot_rotary_frequencies': lambda axes: viz.plot_rotary_frequencies(8, {'plain': {}}, length=16, axes=axes),
      'plot_rotary_scores': lambda axes: viz.plot_rotary_scores(
          rope, _init(rope, 2, head_dim=8), np.arange(-3, 4), length=4, axes=axes
      ),
      'plot_absolute_embeddings': lambda axes: viz.plot_absolute_embeddings(
          sinusoidal, _init(sinusoidal, 2, model_dim=8), 6, axes=axes
      ),
  }
  for name, call in calls.items():
    for axes in (one, [one]):
      with pytest.raises(ValueError, match=rf'{name} draws 2 panels; axes must hold at least 2 .* got 1'):
        call(axes)
  fig, two = plt.subplots(1, 2)
  assert calls['plot_absolute_embeddings'](two) is fig


# ----------------------------------------------------------------------------------------------------------
# Scalar biases.


def test_plot_bias_curve_draws_one_bias_column_per_head():
  alibi = encoders.make('alibi')
  params = _init(alibi)
  distances = np.arange(-6, 7)
  expected = viz.bias_curves(alibi, params, distances)
  # Causal ALiBi: b_h(d) = m_h d for d <= 0 and the distance-0 value 0 beyond.
  np.testing.assert_allclose(expected, np.minimum(distances, 0)[:, None] * ALIBI_SLOPES_4, rtol=1e-6)
  ax = viz.plot_bias_curve(alibi, params, distances).axes[0]
  lines = _labelled(ax)
  assert [line.get_label() for line in lines] == ['head 0', 'head 1', 'head 2', 'head 3']
  for h, line in enumerate(lines):
    np.testing.assert_array_equal(line.get_xdata(), distances)
    np.testing.assert_array_equal(line.get_ydata(), expected[:, h])
    assert line.get_drawstyle() == 'steps-mid'  # a bias is defined at integers only
  assert ax.get_title() == 'alibi: bias vs j - i' and ax.get_ylabel() == 'bias'
  assert len(_labelled(viz.plot_bias_curve(alibi, params, distances, max_heads=2).axes[0])) == 2
  # Heads that agree are one line.
  nope = encoders.make('nope')
  (line,) = _labelled(viz.plot_bias_curve(nope, _init(nope), distances, title='flat').axes[0])
  assert line.get_label() == 'every head'
  np.testing.assert_array_equal(line.get_ydata(), np.zeros(distances.size))


def test_plot_bias_curve_of_a_query_dependent_bias_draws_head_0_per_query_position():
  fire = encoders.make('fire')
  params = _init(fire, 2)
  distances = np.arange(-6, 7)
  queries = (3, 100, 600)
  ax = viz.plot_bias_curve(fire, params, distances, query_positions=queries).axes[0]
  lines = _labelled(ax)
  assert [line.get_label() for line in lines] == ['query i = 3', 'query i = 100', 'query i = 600']
  assert ax.get_ylabel() == 'bias, head 0'
  curves = viz.bias_curves(fire, params, distances, queries)
  assert curves.shape == (3, distances.size, 2)
  for i, line, curve in zip(queries, lines, curves):
    np.testing.assert_array_equal(line.get_xdata(), distances)
    np.testing.assert_array_equal(line.get_ydata(), curve[:, 0])
    keys = i + distances
    valid = keys >= 0
    # NaN exactly where the key would sit before the sequence; elsewhere FIRE's own pair_bias(i, i + d).
    np.testing.assert_array_equal(np.isnan(line.get_ydata()), ~valid)
    np.testing.assert_allclose(line.get_ydata()[valid], _fire_bias(params, i, keys[valid])[:, 0], rtol=1e-5, atol=1e-6)
  # Below the threshold L = 512 FIRE is Toeplitz (queries 3 and 100 agree where both keys exist); beyond it not.
  y3, y100, y600 = (line.get_ydata() for line in lines)
  np.testing.assert_allclose(y3[distances >= -3], y100[distances >= -3], rtol=1e-5, atol=1e-6)
  assert not np.allclose(y100, y600)
  # Without query_positions: default_query_positions of the largest |d| (6, 96, 384), so no key is before 0.
  lines = _labelled(viz.plot_bias_curve(fire, params, distances).axes[0])
  assert [line.get_label() for line in lines] == ['query i = 6', 'query i = 96', 'query i = 384']
  defaults = viz.bias_curves(fire, params, distances)
  np.testing.assert_array_equal(defaults, viz.bias_curves(fire, params, distances, (6, 96, 384)))
  np.testing.assert_array_equal(np.stack([line.get_ydata() for line in lines]), defaults[..., 0])
  assert np.isfinite(defaults).all()


def test_plot_bias_curve_of_a_toeplitz_bias_at_given_query_positions():
  alibi = encoders.make('alibi')
  distances = np.arange(-3, 4)
  lines = _labelled(viz.plot_bias_curve(alibi, _init(alibi), distances, query_positions=(1, 50)).axes[0])
  at_1, at_50 = (line.get_ydata() for line in lines)
  expected = np.minimum(distances, 0) * ALIBI_SLOPES_4[0]
  np.testing.assert_allclose(at_50, expected, rtol=1e-6)
  np.testing.assert_allclose(at_1[distances >= -1], expected[distances >= -1], rtol=1e-6)
  assert np.isnan(at_1[distances < -1]).all()


def test_plot_normalized_distance_draws_psi_over_psi_of_max_query_threshold():
  fire = encoders.make('fire')
  params = _init(fire, 2)
  ax = viz.plot_normalized_distance(fire, params, np.arange(-6, 4), query_positions=(2, 1000)).axes[0]
  near, far = _labelled(ax)
  assert (near.get_label(), far.get_label()) == ('query i = 2', 'query i = 1000')
  # Keys j <= i that exist (j >= 0) only; FIRE's init: c = 0.1, L = 512, eps = 1e-6 (psi(x) = log(c x + 1)).
  np.testing.assert_array_equal(near.get_xdata(), [-2, -1, 0])
  np.testing.assert_array_equal(far.get_xdata(), np.arange(-6, 1))
  psi = lambda x: np.log1p(0.1 * np.abs(x))
  np.testing.assert_allclose(near.get_ydata(), psi([-2, -1, 0]) / (psi(512) + 1e-6), rtol=1e-5)
  np.testing.assert_allclose(far.get_ydata(), psi(np.arange(-6, 1)) / (psi(1000) + 1e-6), rtol=1e-5)
  assert 'threshold L = 512' in ax.get_title()
  labels = [
      line.get_label() for line in _labelled(viz.plot_normalized_distance(fire, params, np.arange(-6, 1)).axes[0])
  ]
  assert labels == ['query i = 6', 'query i = 96', 'query i = 384']


def test_plot_bias_heatmaps_images_are_the_bias_matrix_on_one_symmetric_scale():
  alibi = encoders.make('alibi')
  params = _init(alibi)
  fig = viz.plot_bias_heatmaps(alibi, params, 6)
  panels = _panels(fig)
  assert [ax.get_title() for ax in panels] == ['head 0', 'head 1', 'head 2', 'head 3']
  # bias_matrix of causal ALiBi (Press et al. 2022): m_h * (j - i) for keys j <= i, 0 after.
  i, j = np.arange(6)[:, None], np.arange(6)[None, :]
  matrix = ALIBI_SLOPES_4[:, None, None] * np.minimum(j - i, 0)
  for h, ax in enumerate(panels):
    (image,) = ax.images
    np.testing.assert_allclose(image.get_array(), matrix[h], rtol=1e-6)
    assert image.get_clim() == (-1.25, 1.25)  # max |b| = m_0 * 5 = 5 / 4, shared by every head
    assert tuple(image.get_extent()) == (-0.5, 5.5, 5.5, -0.5)
  assert fig.get_suptitle() == 'alibi: 6 x 6 bias'
  assert [ax.get_title() for ax in _panels(viz.plot_bias_heatmaps(alibi, params, 6, max_heads=2))] == [
      'head 0',
      'head 1 (of 4)',
  ]


def test_plot_bias_heatmaps_with_a_query_offset_and_given_axes():
  fire = encoders.make('fire')
  params = _init(fire, 2)
  _, axes = plt.subplots(1, 2)
  fig = viz.plot_bias_heatmaps(fire, params, 4, q_offset=600, axes=axes, title='beyond L')
  assert fig is axes[0].figure and fig.get_suptitle() == 'beyond L'
  # Rows are queries 600 .. 603, columns keys 0 .. 3: FIRE's b(i, j) per head.
  pair = _fire_bias(params, np.arange(600, 604)[:, None], np.arange(4)[None, :])
  for h, ax in enumerate(axes):
    np.testing.assert_allclose(ax.images[0].get_array(), pair[..., h], rtol=1e-5, atol=1e-6)
    assert tuple(ax.images[0].get_extent()) == (-0.5, 3.5, 603.5, 599.5)


# ----------------------------------------------------------------------------------------------------------
# Bucket maps.


def test_bucket_maps_are_the_t5_buckets():
  # T5 (Raffel et al. 2020; t5x `_relative_position_bucket`), 32 buckets, max_distance 128.
  # Causal: n = max(i - j, 0); exact below max_exact = 16, else 16 + int(log(n / 16) / log(8) * 16), at most 31.
  causal = encoders.make('t5', bidirectional=False)
  distances = np.array([5, 0, -1, -15, -16, -32, -64, -100, -1000])
  (label, buckets), *others = viz.bucket_maps(causal, distances).items()
  assert label == 't5(bidirectional=False)' and not others
  np.testing.assert_array_equal(buckets, [0, 0, 1, 15, 16, 21, 26, 30, 31])
  # Bidirectional: 16 buckets per direction, keys ahead offset by 16, max_exact = 8; log range 16 = 128 / 8.
  distances = np.array([0, -3, 3, -20, 20, -100, -200])
  (buckets,) = viz.bucket_maps(encoders.make('t5'), distances).values()
  np.testing.assert_array_equal(buckets, [0, 3, 19, 10, 26, 15, 15])
  # Shaw: clip(j - i, -2, 2) + 2.
  (buckets,) = viz.bucket_maps(encoders.make('shaw', max_distance=2), np.arange(-4, 5)).values()
  np.testing.assert_array_equal(buckets, [0, 0, 0, 1, 2, 3, 4, 4, 4])


def test_plot_bucket_maps_draws_each_map():
  causal = encoders.make('t5', bidirectional=False)
  distances = np.arange(-40, 3)
  ax = viz.plot_bucket_maps(causal, distances).axes[0]
  (line,) = _labelled(ax)
  # 16 exact buckets (n = 0..15), then 16 + int(log(n / 16) / log 8 * 16) = 16 .. 23 for n = 16 .. 40.
  assert line.get_label() == 't5(bidirectional=False) (24 rows used)'
  np.testing.assert_array_equal(line.get_xdata(), distances)
  np.testing.assert_array_equal(line.get_ydata(), viz.bucket_maps(causal, distances)['t5(bidirectional=False)'])
  np.testing.assert_array_equal(line.get_ydata()[-18:], np.r_[15:0:-1, 0, 0, 0])  # the exact range, then keys ahead
  assert ax.get_title() == 't5(bidirectional=False): buckets'
  multiscale = encoders.make('multiscale')
  maps = viz.bucket_maps(multiscale, distances)
  assert list(maps) == ['scale 1', 'scale 4', 'scale 16']
  lines = _labelled(viz.plot_bucket_maps(multiscale, distances).axes[0])
  assert [line.get_label().split(' (')[0] for line in lines] == list(maps)
  for line, rows in zip(lines, maps.values()):
    np.testing.assert_array_equal(line.get_ydata(), rows)
    assert line.get_label().endswith(f'({len(np.unique(rows))} rows used)')


# ----------------------------------------------------------------------------------------------------------
# Rotary encoders.


def test_plot_rotary_frequencies_draws_wavelengths_and_ratios_per_rule():
  rules = {
      'plain': {},
      'linear': dict(scaling='linear', factor=4.0),
      'dynamic': dict(scaling='dynamic', factor=2.0, original_max_position=16),
  }
  fig = viz.plot_rotary_frequencies(8, rules, length=64, original_max_position=100)
  wave_ax, ratio_ax = fig.axes
  waves, ratios = _labelled(wave_ax), _labelled(ratio_ax)
  assert [line.get_label() for line in waves] == list(rules) == [line.get_label() for line in ratios]
  plain = 10000.0 ** (-np.arange(0, 8, 2) / 8)  # theta_k = 10000^(-2k / D), D = 8
  np.testing.assert_allclose(waves[0].get_ydata(), 2 * np.pi / plain, rtol=1e-12)
  np.testing.assert_allclose(ratios[0].get_ydata(), np.ones(4))
  np.testing.assert_allclose(waves[1].get_ydata(), 4 * 2 * np.pi / plain, rtol=1e-12)  # positions / s
  np.testing.assert_allclose(ratios[1].get_ydata(), np.full(4, 0.25))
  dynamic = encoders.rope.inverse_frequencies(8, 64, **rules['dynamic'])
  np.testing.assert_allclose(ratios[2].get_ydata(), dynamic / plain, rtol=1e-12)
  np.testing.assert_array_equal(waves[0].get_xdata(), np.arange(4))
  training = [line for line in wave_ax.lines if line not in waves]
  assert [tuple(line.get_ydata()) for line in training] == [(100, 100)]  # the training length, drawn
  assert wave_ax.get_yscale() == 'log' == ratio_ax.get_yscale()
  assert fig.get_suptitle() == 'RoPE frequencies, head_dim = 8'


def test_plot_rotary_scores_draws_rotary_scores_and_the_score_matrix():
  rope = encoders.make('rope')
  params = _init(rope, 2, head_dim=8)
  distances = np.arange(-6, 7)
  fig = viz.plot_rotary_scores(rope, params, distances, query_positions=(0, 40), length=6)
  curve_ax, matrix_ax = fig.axes[:2]
  lines = _labelled(curve_ax)
  assert [line.get_label() for line in lines] == ['query i = 0', 'query i = 40']
  for i, line in zip((0, 40), lines):
    np.testing.assert_array_equal(line.get_xdata(), distances)
    np.testing.assert_array_equal(
        line.get_ydata(), viz.rotary_scores(rope, params, np.ones(8), np.ones(8), distances, i)
    )
    np.testing.assert_allclose(line.get_ydata(), _rope_decay(distances, 8), rtol=1e-5, atol=1e-5)
  (image,) = matrix_ax.images
  np.testing.assert_array_equal(image.get_array(), viz.rotary_score_matrix(rope, params, np.ones(8), np.ones(8), 6))
  positions = np.arange(6)
  np.testing.assert_allclose(image.get_array(), _rope_decay(positions[None] - positions[:, None], 8), atol=1e-5)
  np.testing.assert_allclose(image.get_clim(), (-8, 8), rtol=1e-6)  # the diagonal: |q|^2 = head_dim
  assert matrix_ax.get_title() == '6 x 6 scores'
  assert fig.get_suptitle() == 'rope: rotated score, head_dim = 8'
  # Other q and k: the lines are still rotary_scores of those vectors.
  q, k = np.arange(8.0), np.linspace(1, -1, 8)
  fig = viz.plot_rotary_scores(rope, params, distances, query_positions=(3,), query=q, key=k, length=4)
  (line,) = _labelled(fig.axes[0])
  np.testing.assert_array_equal(line.get_ydata(), viz.rotary_scores(rope, params, q, k, distances, 3))


def test_plot_rotary_scores_of_a_causal_encoder_draws_keys_at_or_before_the_query():
  xpos = encoders.make('xpos')
  params = _init(xpos, 2, head_dim=8)
  distances = np.arange(-5, 6)
  fig = viz.plot_rotary_scores(xpos, params, distances, query_positions=(10,), length=5)
  (line,) = _labelled(fig.axes[0])
  np.testing.assert_array_equal(line.get_xdata(), np.arange(-5, 1))
  np.testing.assert_array_equal(
      line.get_ydata(), viz.rotary_scores(xpos, params, np.ones(8), np.ones(8), np.arange(-5, 1), 10)
  )
  drawn = fig.axes[1].images[0].get_array()
  full = viz.rotary_score_matrix(xpos, params, np.ones(8), np.ones(8), 5)
  lower = np.tril(np.ones((5, 5), bool))
  np.testing.assert_array_equal(np.asarray(drawn)[lower], full[lower])
  assert np.isnan(np.asarray(drawn)[~lower]).all()
  assert fig.axes[1].get_title() == '5 x 5 scores (j <= i)'


# ----------------------------------------------------------------------------------------------------------
# Vector-relative and absolute encoders.


def test_plot_relative_embeddings_panels_hold_the_shaw_tables():
  shaw = encoders.make('shaw_vector', max_distance=2)
  params = _init(shaw, 2, head_dim=4)
  distances = np.arange(-6, 7)
  fig = viz.plot_relative_embeddings(shaw, params, distances, head=1)
  keys_ax, values_ax = _panels(fig)
  rows = np.clip(distances, -2, 2) + 2  # Shaw et al. 2018: a_{clip(j - i, -k, k)}, table row clip + k
  np.testing.assert_array_equal(keys_ax.images[0].get_array(), np.asarray(params['key_table'])[rows, 1].T)
  np.testing.assert_array_equal(values_ax.images[0].get_array(), np.asarray(params['value_table'])[rows, 1].T)
  assert keys_ax.get_title() == 'key embeddings a^K, head 1'
  assert values_ax.get_title() == 'value embeddings a^V, head 1'
  limit = viz.symmetric_limit(np.asarray(params['key_table'])[rows, 1], np.asarray(params['value_table'])[rows, 1])
  assert keys_ax.images[0].get_clim() == (-limit, limit) == values_ax.images[0].get_clim()
  assert tuple(keys_ax.images[0].get_extent()) == (-6.5, 6.5, 3.5, -0.5)  # x: j - i, y: dimension
  assert fig.get_suptitle() == 'shaw_vector(max_distance=2): relative embeddings (clipped at |j - i| = 2)'
  assert not [ax for ax in fig.axes if ax.lines]  # no query bias v, so no position-only term
  _, axes = plt.subplots(1, 2)  # drawn on given axes
  fig = viz.plot_relative_embeddings(shaw, params, distances, axes=axes, title='Shaw')
  assert fig is axes[0].figure and fig.get_suptitle() == 'Shaw'
  np.testing.assert_array_equal(axes[0].images[0].get_array(), np.asarray(params['key_table'])[rows, 0].T)
  shared = encoders.make('shaw_vector', max_distance=2, per_head=False, use_value_embeddings=False)
  (panel,) = _panels(viz.plot_relative_embeddings(shared, _init(shared, 2, head_dim=4), distances))
  assert panel.get_title() == 'key embeddings a^K, shared by every head'


def test_plot_relative_embeddings_draws_transformer_xl_position_term():
  txl = encoders.make('transformer_xl')
  params = _init(txl, 2, head_dim=4, model_dim=8)
  distances = np.arange(-3, 4)
  fig = viz.plot_relative_embeddings(txl, params, distances)
  (keys_ax,) = _panels(fig)  # no value embeddings
  # Dai et al. 2019: R_{i-j} = [sin((i - j) theta_k), cos((i - j) theta_k)], theta_k = 10000^(-2k/d_R); key W_R R_{i-j}.
  angles = -distances[:, None] * 10000.0 ** (-np.arange(0, 8, 2) / 8)
  relative = np.concatenate([np.sin(angles), np.cos(angles)], -1)  # (N, d_R = model_dim = 8)
  keys = np.einsum('nr,rhd->nhd', relative, np.asarray(params['w_r'], np.float64))  # (N, H, D)
  np.testing.assert_allclose(keys_ax.images[0].get_array(), keys[:, 0].T, rtol=1e-5, atol=1e-7)
  (term_ax,) = [ax for ax in fig.axes if _labelled(ax)]
  assert term_ax.get_title() == 'position-only score term'
  lines = _labelled(term_ax)
  assert [line.get_label() for line in lines] == ['head 0', 'head 1']
  for h, line in enumerate(lines):  # Dai et al. 2019, term (d): v . W_R R_{i-j}
    np.testing.assert_allclose(line.get_ydata(), keys[:, h] @ np.asarray(params['v'])[h], rtol=1e-5, atol=1e-7)
  assert fig.get_suptitle() == 'transformer_xl: relative embeddings'


def test_plot_absolute_embeddings_draws_the_sinusoids_and_their_similarity():
  sinusoidal = encoders.make('sinusoidal')
  params = _init(sinusoidal, 2, model_dim=8)
  fig = viz.plot_absolute_embeddings(sinusoidal, params, 6)
  table_ax, sim_ax = _panels(fig)
  assert (table_ax.get_title(), sim_ax.get_title()) == ('embedding p_i', 'p_i . p_j / model_dim')
  # Vaswani et al. 2017: PE(pos, 2k) = sin(pos / 10000^(2k/d)), PE(pos, 2k + 1) = cos(the same).
  angles = np.arange(6)[:, None] / 10000.0 ** (np.arange(0, 8, 2) / 8)
  table = np.stack([np.sin(angles), np.cos(angles)], -1).reshape(6, 8)
  np.testing.assert_allclose(table_ax.images[0].get_array(), table.T, atol=1e-6)
  similarity = sim_ax.images[0].get_array()
  np.testing.assert_allclose(similarity, table @ table.T / 8, atol=1e-6)
  np.testing.assert_allclose(np.diag(similarity), 0.5, rtol=1e-6)  # 4 pairs of sin^2 + cos^2 = 1, over 8
  np.testing.assert_allclose(sim_ax.images[0].get_clim(), (-0.5, 0.5), rtol=1e-6)
  assert fig.get_suptitle() == 'sinusoidal: absolute embeddings'
  learned = encoders.make('learned', max_length=8)
  params = _init(learned, 2, model_dim=4)
  table_ax, _ = _panels(viz.plot_absolute_embeddings(learned, params, 8))
  np.testing.assert_array_equal(table_ax.images[0].get_array(), np.asarray(params['table']).T)


def test_plot_train_positions_draws_the_drawn_positions():
  randomized = spec.from_spec('randomized(alibi, max_position=64)')
  rng = jax.random.key(3)
  ax = viz.plot_train_positions(randomized, rng, batch=3, length=8).axes[0]
  lines = _labelled(ax)
  assert [line.get_label() for line in lines] == ['sequence 0', 'sequence 1', 'sequence 2', 'evaluation: 0 .. L - 1']
  drawn = np.asarray(contract.train_positions(randomized, rng, 3, 8))
  for row, line in zip(drawn, lines):
    np.testing.assert_array_equal(line.get_xdata(), np.arange(8))
    np.testing.assert_array_equal(line.get_ydata(), row)
    assert (np.diff(row) > 0).all() and 0 <= row.min() and row.max() < 64  # sorted, distinct, in range
  np.testing.assert_array_equal(lines[-1].get_ydata(), np.arange(8))
  (line,) = _labelled(viz.plot_train_positions(encoders.make('alibi'), rng, length=5).axes[0])
  assert line.get_label() == '0 .. L - 1 (no randomization)'
  np.testing.assert_array_equal(line.get_ydata(), np.arange(5))


# ----------------------------------------------------------------------------------------------------------
# One call per encoder.


def test_describe_names_the_spec_kind_and_the_cited_paper():
  import relpos_jax.encoders.alibi as alibi_module

  text = viz.describe(encoders.make('alibi', bidirectional=True))
  first_paragraph = ' '.join(alibi_module.__doc__.strip().split('\n\n')[0].split())
  assert text == f'alibi(bidirectional=True)  [scalar_bias]\n  {first_paragraph}'
  assert 'Press, Smith & Lewis 2022' in text

  @dataclasses.dataclass(frozen=True)
  class Unregistered(type(encoders.make('alibi'))):
    name = ''  # no spec names it: titles fall back to the class name

  text = viz.describe(Unregistered())
  assert text == f'Unregistered  [scalar_bias]\n  {" ".join(__doc__.split(chr(10) * 2)[0].split())}'


def test_plot_encoder_picks_the_panels_of_each_kind():
  options = dict(length=6, max_distance=6)  # the shapes of the tests above: their compiled programs serve
  alibi = encoders.make('alibi')
  fig = viz.plot_encoder(alibi, _init(alibi), **options)
  assert _titles(fig) == ['bias vs j - i', 'head 0', 'head 1', 'head 2', 'head 3']
  assert fig.get_suptitle() == 'alibi: bias curves and 6 x 6 bias'
  np.testing.assert_array_equal(_labelled(fig.axes[0])[0].get_xdata(), np.arange(-6, 7))
  # A randomized wrapper is drawn as its base.
  randomized = spec.from_spec('randomized(alibi, max_position=64)')
  fig = viz.plot_encoder(randomized, _init(randomized), **options)
  assert _titles(fig) == ['bias vs j - i', 'head 0', 'head 1', 'head 2', 'head 3']
  assert fig.get_suptitle() == 'alibi: bias curves and 6 x 6 bias'
  # A query-dependent bias: curves per query position (6, 16 * 6, 64 * 6).
  fire = encoders.make('fire')
  fig = viz.plot_encoder(fire, _init(fire, 2), **options)
  assert _titles(fig) == ['bias vs j - i', 'head 0', 'head 1']
  assert [line.get_label() for line in _labelled(fig.axes[0])] == ['query i = 6', 'query i = 96', 'query i = 384']
  assert fig.get_suptitle() == 'fire: bias curves and 6 x 6 bias (query-dependent)'
  # Params from encoder.init when not given; heads that agree share one panel.
  fig = viz.plot_encoder(encoders.make('nope'), num_heads=2, title='no position', **options)
  assert _titles(fig) == ['bias vs j - i', 'every head'] and fig.get_suptitle() == 'no position'
  shaw = encoders.make('shaw_vector', max_distance=2)
  fig = viz.plot_encoder(shaw, _init(shaw, 2, head_dim=4), **options)
  assert _titles(fig) == ['key embeddings a^K, head 0', 'value embeddings a^V, head 0']
  rope = encoders.make('rope')
  fig = viz.plot_encoder(rope, _init(rope, 2, head_dim=8), **options)
  assert _titles(fig) == ['score vs j - i (lines coincide: relative)', '6 x 6 scores']
  assert [line.get_label() for line in _labelled(fig.axes[0])] == ['query i = 6', 'query i = 96']
  sinusoidal = encoders.make('sinusoidal')
  fig = viz.plot_encoder(sinusoidal, _init(sinusoidal, 2, model_dim=8), **options)
  assert _titles(fig) == ['embedding p_i', 'p_i . p_j / model_dim']
  assert _panels(fig)[0].images[0].get_array().shape == (8, 6)  # (model_dim, length)


def test_plot_encoder_refuses_what_has_no_single_picture():
  with pytest.raises(ValueError, match="plot_encoder: 't5' is not an encoder"):
    viz.plot_encoder('t5')
  with pytest.raises(ValueError, match='sum of encoders; plot each of encoder.parts'):
    viz.plot_encoder(combine(encoders.make('sinusoidal'), encoders.make('t5')))
  with pytest.raises(ValueError, match="no picture for kind 'contextual' of cope"):
    viz.plot_encoder(encoders.make('cope'), num_heads=2, head_dim=8)
