"""A document mask (segment ids) in attention: a packed sequence gives each document what it gets alone.

Each document's outputs in a packed sequence, with positions restarting at each document (data.packing='reset'),
must equal those of the document run alone at positions 0..n-1: on the explicit path, 'xla'
(jax.nn.dot_product_attention) and the blockwise tiles (tiles of 4 x 3 that straddle every boundary), for a scalar
bias (ALiBi, T5), a vector kind (Shaw), rotary (RoPE), content kinds (FoX, CoPE, stick-breaking, SSMax) and a score
transform reading neighbouring keys (DAPE version 2). Also: cached decoding with segment ids equals the forward,
the tiled path never builds an (L, L) mask, and bad segment ids are refused by name.
"""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.nn import attention, blockwise, functional, linen, models
from relpos_jax.nn import call

DIM, HEADS = 16, 2
PATHS = (('einsum', None), ('xla', None), ('blockwise', (4, 3)))


def packed(lengths):
  """(segment ids, per-document positions) (1, sum(lengths)) int32 for documents of `lengths`."""
  segments = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)])[None].astype(np.int32)
  positions = np.concatenate([np.arange(n) for n in lengths])[None].astype(np.int32)
  return segments, positions


def alone_vs_packed(layer, x, lengths):
  """The largest |difference| between each document alone and its part of the packed output."""
  segments, positions = packed(lengths)
  y = layer(x, positions=positions, segment_ids=segments)
  worst, start = 0.0, 0
  for n in lengths:
    alone = layer(x[:, start : start + n])
    worst = max(worst, float(jnp.max(jnp.abs(alone - y[:, start : start + n]))))
    start += n
  return worst


@pytest.mark.parametrize('implementation,block_size', PATHS)
@pytest.mark.parametrize(
    'spec,causal',
    [
        ('alibi', True),
        ('alibi', False),
        ('shaw', True),
        ('shaw', False),
        ('rope', True),
        ('rope', False),
        ('t5', True),
        ('fox + rope', True),
        ('cope + alibi', True),
        ('rope + stick_breaking', True),
        ('rope + ssmax', False),
        ('dape(alibi, version=2)', True),
    ],
)
def test_a_packed_document_gets_what_it_gets_alone(spec, causal, implementation, block_size):
  layer = attention.RelativeMultiHeadAttention(
      HEADS,
      DIM,
      encoders.from_spec(spec),
      causal=causal,
      implementation=implementation,
      block_size=block_size,
      rngs=nnx.Rngs(0),
  )
  x = jax.random.normal(jax.random.key(1), (1, 12, DIM))
  assert alone_vs_packed(layer, x, (3, 5, 4)) < 1e-5


def test_without_the_mask_documents_do_see_each_other():
  """The property above is not vacuous: without segment ids the later documents' outputs change."""
  layer = attention.RelativeMultiHeadAttention(HEADS, DIM, encoders.make('alibi'), causal=True, rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(1), (1, 12, DIM))
  _, positions = packed((3, 5, 4))
  y = layer(x, positions=positions)
  assert float(jnp.max(jnp.abs(layer(x[:, 3:8]) - y[:, 3:8]))) > 1e-3


@hypothesis.settings(max_examples=6, deadline=None)
@hypothesis.given(
    cuts=st.lists(st.integers(1, 10), min_size=1, max_size=4, unique=True),
    block=st.sampled_from([(2, 3), (4, 4), (3, 5)]),
)
def test_any_packing_any_tiles_blockwise_equals_explicit(cuts, block):
  """Documents cut anywhere in 11 tokens: the blockwise tiles give the explicit path's outputs (ALiBi + RoPE)."""
  bounds = [0] + sorted(cuts) + [11]
  lengths = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
  segments, positions = packed(lengths)
  x = jax.random.normal(jax.random.key(2), (1, 11, DIM))
  encoder = encoders.from_spec('rope + alibi')
  outs = []
  for implementation, block_size in (('einsum', None), ('blockwise', block)):
    layer = attention.RelativeMultiHeadAttention(
        HEADS, DIM, encoder, causal=True, implementation=implementation, block_size=block_size, rngs=nnx.Rngs(0)
    )
    outs.append(layer(x, positions=positions, segment_ids=segments))
  np.testing.assert_allclose(outs[0], outs[1], atol=1e-5)


@pytest.mark.parametrize('implementation,block_size', [('einsum', None), ('blockwise', (2, 2))])
def test_causal_within_a_document(implementation, block_size):
  """Changing a later token of a document changes nothing before it (nor any other document)."""
  layer = attention.RelativeMultiHeadAttention(
      HEADS,
      DIM,
      encoders.make('t5'),
      causal=True,
      implementation=implementation,
      block_size=block_size,
      rngs=nnx.Rngs(0),
  )
  segments, positions = packed((4, 4))
  x = jax.random.normal(jax.random.key(3), (1, 8, DIM))
  y = layer(x, positions=positions, segment_ids=segments)
  changed = layer(x.at[:, 2].add(1.0), positions=positions, segment_ids=segments)
  np.testing.assert_array_equal(y[:, :2], changed[:, :2])
  np.testing.assert_array_equal(y[:, 4:], changed[:, 4:])
  assert float(jnp.max(jnp.abs(y[:, 2:4] - changed[:, 2:4]))) > 1e-4


def test_gradients_blockwise_equal_explicit():
  encoder = encoders.from_spec('shaw')
  segments, positions = packed((5, 2, 5))
  x = jax.random.normal(jax.random.key(4), (2, 12, DIM))
  segments, positions = np.repeat(segments, 2, 0), np.repeat(positions, 2, 0)
  grads = []
  for implementation, block_size in (('einsum', None), ('blockwise', (4, 3))):
    layer = attention.RelativeMultiHeadAttention(
        HEADS, DIM, encoder, causal=True, implementation=implementation, block_size=block_size, rngs=nnx.Rngs(0)
    )
    grads.append(jax.grad(lambda x_: jnp.sum(layer(x_, positions=positions, segment_ids=segments) ** 2))(x))
  np.testing.assert_allclose(grads[0], grads[1], atol=1e-4)


def test_a_nan_in_another_document_stays_there():
  """A non-finite key poisons the rows that see it (as without packing), not the other documents' rows."""
  q = jax.random.normal(jax.random.key(5), (1, 8, HEADS, 4))
  v = q.at[:, 1].set(jnp.nan)
  segments = np.array([[0, 0, 0, 1, 1, 1, 1, 1]], np.int32)
  for implementation, block_size in (('einsum', None), ('blockwise', (2, 2))):
    out = functional.attend(
        call.AttentionInputs.checked(q, q, v, call.Positions(query_segments=segments, key_segments=segments)),
        (),
        [],
        call.AttentionSettings.checked(causal=True, implementation=implementation, block_size=block_size),
    )
    rows = np.asarray(jnp.isnan(out).any(axis=(-1, -2)))[0]
    np.testing.assert_array_equal(rows, [False, True, True, False, False, False, False, False])


def test_segment_visibility_counts():
  """Hand-counted: ids [0 0 1 1 1 2], causal, the last key padded."""
  seg = np.array([[0, 0, 1, 1, 1, 2]], np.int32)
  key_mask = np.array([[True, True, True, True, False, True]])
  counts, _ = blockwise.segment_visibility(seg, seg, causal=True, key_mask=key_mask, chunk=4)
  np.testing.assert_array_equal(counts, [[1, 2, 1, 2, 2, 1]])
  counts, _ = blockwise.segment_visibility(seg, seg, causal=False, chunk=5)
  np.testing.assert_array_equal(counts, [[2, 2, 3, 3, 3, 1]])


def test_blockwise_builds_no_length_squared_mask():
  """The tiled path compares ids per tile: no (L, L)-sized array in its program (L = 256, tiles of 32)."""
  length = 256
  q = jnp.zeros((1, length, 1, 8))
  segments = jnp.asarray(np.repeat(np.arange(8), 32)[None], jnp.int32)
  fn = lambda q_: functional.attend(
      call.AttentionInputs.checked(q_, q_, q_, call.Positions(query_segments=segments, key_segments=segments)),
      (),
      [],
      call.AttentionSettings.checked(causal=True, implementation='blockwise', block_size=32),
  )
  text = jax.jit(fn).lower(q).as_text()
  assert f'{length}x{length}' not in text


def test_explicit_attention_mask():
  seg = np.array([[0, 0, 1]], np.int32)
  mask = functional.attention_mask(3, 3, causal=True, q_segment_ids=seg, k_segment_ids=seg)
  np.testing.assert_array_equal(mask[0, 0], [[1, 0, 0], [1, 1, 0], [0, 0, 1]])


def test_decode_with_segment_ids_equals_the_forward():
  """Cached decoding stores each slot's document: token by token equals the packed forward (per-document
  positions), for a DecoderLM with ALiBi + RoPE."""
  config = models.ModelConfig(
      vocab_size=11, num_layers=2, model_dim=DIM, num_heads=HEADS, encoder='rope + alibi', mlp_ratio=2
  )
  model = models.DecoderLM(config, rngs=nnx.Rngs(0))
  segments, positions = packed((3, 4))
  tokens = jax.random.randint(jax.random.key(6), (1, 7), 0, 11)
  full = model(tokens, positions=positions, segment_ids=segments)
  cache = model.init_cache(1, 8)
  steps = []
  for i in range(7):
    logits, cache = model.decode(
        tokens[:, i : i + 1], cache, positions=positions[:, i : i + 1], segment_ids=segments[:, i : i + 1]
    )
    steps.append(logits)
  np.testing.assert_allclose(jnp.concatenate(steps, axis=1), full, atol=1e-5)
  np.testing.assert_array_equal(cache[0].segment_ids[0, :7], segments[0])


def test_linen_twin_takes_segment_ids():
  encoder = encoders.make('alibi')
  layer = attention.RelativeMultiHeadAttention(HEADS, DIM, encoder, causal=True, rngs=nnx.Rngs(0))
  twin = linen.RelativeMultiHeadAttention(num_heads=HEADS, encoder=encoder, causal=True)
  segments, positions = packed((5, 3))
  x = jax.random.normal(jax.random.key(7), (1, 8, DIM))
  got = twin.apply({'params': linen.params_from_nnx(layer)}, x, positions=positions, segment_ids=segments)
  np.testing.assert_allclose(got, layer(x, positions=positions, segment_ids=segments), atol=1e-6)


def test_bad_segment_ids_are_refused_by_name():
  layer = attention.RelativeMultiHeadAttention(HEADS, DIM, encoders.make('alibi'), causal=True, rngs=nnx.Rngs(0))
  x = jnp.zeros((1, 4, DIM))
  with pytest.raises(ValueError, match='segment_ids'):
    layer(x, segment_ids=np.zeros((1, 3), np.int32))
  with pytest.raises(ValueError, match='segment_ids'):
    layer(x, segment_ids=np.zeros((1, 4), np.float32))
  q = jnp.zeros((1, 4, 1, 4))
  with pytest.raises(ValueError, match='k_segment_ids'):
    functional.attend(
        call.AttentionInputs.checked(q, q, q, call.Positions(query_segments=np.zeros((1, 4), np.int32))), (), []
    )
  with pytest.raises(ValueError, match='pallas'):
    seg = np.zeros((1, 4), np.int32)
    functional.attend(
        call.AttentionInputs.checked(q, q, q, call.Positions(query_segments=seg, key_segments=seg)),
        (),
        [],
        call.AttentionSettings.checked(implementation='pallas'),
    )
  path = attention.RelativeMultiHeadAttention(
      HEADS, DIM, encoders.from_spec('path + fox'), causal=True, rngs=nnx.Rngs(0)
  )
  with pytest.raises(ValueError, match='segment_ids'):
    path(x, segment_ids=np.zeros((1, 4), np.int32))


@pytest.mark.parametrize('implementation,block_size', [(None, None), ('blockwise', 4)])
@pytest.mark.parametrize('spec,share', [('rope + alibi', False), ('t5(bidirectional=False)', True)])
def test_model_logits_of_a_packed_document_equal_the_document_alone(spec, share, implementation, block_size):
  """DecoderLM logits (2 layers; T5 shares one bias across its layers) per document, packed with 'reset'
  positions vs alone."""
  config = models.ModelConfig(
      vocab_size=11,
      num_layers=2,
      model_dim=DIM,
      num_heads=HEADS,
      encoder=spec,
      mlp_ratio=2,
      share_position_bias=share,
      attention_implementation=implementation,
      attention_block_size=block_size,
  )
  model = models.DecoderLM(config, rngs=nnx.Rngs(0))
  lengths = (4, 6, 3)
  segments, positions = packed(lengths)
  tokens = jax.random.randint(jax.random.key(8), (1, sum(lengths)), 0, 11)
  full = model(tokens, positions=positions, segment_ids=segments)
  start = 0
  for n in lengths:
    np.testing.assert_allclose(model(tokens[:, start : start + n]), full[:, start : start + n], atol=1e-5)
    start += n


@pytest.mark.parametrize('causal,window', [(True, None), (False, None), (True, 2), (False, 2)])
def test_padding_and_windows_with_documents_blockwise_equals_explicit(causal, window):
  """Segment ids beside a padding mask (a padded tail, a document wholly padded: its rows see no key and output
  zeros) and sliding windows: the tiled path (tiles 3 x 2) gives the explicit path's outputs."""
  q, k, v = (jax.random.normal(jax.random.key(i), (2, 9, HEADS, 4)) for i in (9, 10, 11))
  segments = np.array([[0, 0, 0, 1, 1, 1, 1, 2, 2], [0, 0, 1, 1, 1, 1, 1, 1, 1]], np.int32)
  key_mask = np.array([[True] * 7 + [False] * 2, [True] * 6 + [False] * 3])
  outs = [
      functional.attend(
          call.AttentionInputs.checked(
              q, k, v, call.Positions(query_segments=segments, key_segments=segments), key_mask=key_mask
          ),
          (),
          [],
          call.AttentionSettings.checked(
              causal=causal, window=window, implementation=implementation, block_size=block_size
          ),
      )
      for implementation, block_size in (('einsum', None), ('blockwise', (3, 2)))
  ]
  np.testing.assert_allclose(outs[0], outs[1], atol=1e-5)
  np.testing.assert_array_equal(outs[1][0, 7:], 0.0)  # document 2 of row 0 is all padding


def test_attention_weights_respect_documents():
  layer = attention.RelativeMultiHeadAttention(HEADS, DIM, encoders.make('alibi'), causal=False, rngs=nnx.Rngs(0))
  segments, positions = packed((2, 3))
  x = jax.random.normal(jax.random.key(12), (1, 5, DIM))
  weights = layer.attention_weights(x, positions=positions, segment_ids=segments)
  np.testing.assert_array_equal(weights[0, :, :2, 2:], 0.0)
  np.testing.assert_array_equal(weights[0, :, 2:, :2], 0.0)
  np.testing.assert_allclose(jnp.sum(weights, -1), 1.0, rtol=1e-6)
