"""implementation='blockwise' == the explicit path (outputs and gradients, 1e-4) for every encoder case and
composition, with padding, causal masks, cached decoding, explicit positions and uneven tile remainders; it
never builds an (L, L)-sized array; bad tile sizes and kinds without tiles are clear errors."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.encoders import contract
from relpos_jax.nn import DecoderLM, ModelConfig, RelativeMultiHeadAttention, blockwise, explicit, functional
from relpos_jax.nn import call
from relpos_jax.nn import linen as relpos_linen
from relpos_jax.nn import terms

B, L, DIM, HEADS = 2, 11, 16, 2
BLOCK = (4, 3)  # Uneven remainders on both axes (11 = 2 x 4 + 3 queries, 3 x 3 + 2 keys).
TOL = dict(atol=1e-4, rtol=1e-4)


def _layers(encoder, causal, **kwargs):
  return [
      RelativeMultiHeadAttention(
          HEADS,
          DIM,
          encoder,
          causal=causal,
          implementation=impl,
          block_size=BLOCK if impl == 'blockwise' else None,
          model_adds_absolute=True,
          rngs=nnx.Rngs(0),
          **kwargs,
      )
      for impl in ('blockwise', 'einsum')
  ]


@nnx.jit
def _value_and_grads(layer, x, cotangent, padding_mask, positions):
  def loss(layer, x):
    y = layer(x, padding_mask=padding_mask, positions=positions)
    return jnp.sum(y * cotangent), y

  (_, y), (g_layer, g_x) = nnx.value_and_grad(loss, argnums=(0, 1), has_aux=True)(layer, x)
  return y, g_x, g_layer


def _assert_same(fast, slow, x, padding_mask=None, positions=None):
  cotangent = jax.random.normal(jax.random.key(7), x.shape)
  y1, gx1, gl1 = _value_and_grads(fast, x, cotangent, padding_mask, positions)
  y2, gx2, gl2 = _value_and_grads(slow, x, cotangent, padding_mask, positions)
  np.testing.assert_allclose(y1, y2, **TOL)
  np.testing.assert_allclose(gx1, gx2, **TOL)
  flat1, flat2 = jax.tree.leaves(nnx.state(gl1)), jax.tree.leaves(nnx.state(gl2))
  assert len(flat1) == len(flat2) > 0
  for a, b in zip(flat1, flat2):
    np.testing.assert_allclose(a, b, **TOL)


def _x(length=L, batch=B):
  return jax.random.normal(jax.random.key(1), (batch, length, DIM))


# Every registered kind tiles: FoX (a separable contextual term), CoPE (counts along the keys, a carry per tile),
# PaTH (a per-row carry across key tiles, nearest first: tests/encoders/test_path_tiled.py), the temperatures
# (per row), stick-breaking (a normalizer folded over key tiles) and DAPE (a score transform, with a key halo for
# v2). A part with no per-tile form would be a clear error in the tiled paths.
def _untiled(encoder):
  # An absolute part is embedded at the model's input, never an attention term, so it has nothing to tile.
  attention_parts = [p for p in contract.leaves(encoder) if p.kind is not contract.Kind.ABSOLUTE]
  return [p for p in attention_parts if not terms.term_for(p).tiles]


def test_blockwise_equals_explicit_causal_with_padding(tiled_case):
  """Every encoder case: causal, left padding (queries that see no key output zeros), uneven tiles."""
  _, encoder = tiled_case
  padding = jnp.array([[False] * 2 + [True] * (L - 2), [True] * (L - 3) + [False] * 3])
  fast, slow = _layers(encoder, causal=True)
  if _untiled(encoder):  # Never silently dropped from the tiles: see the test below.
    with pytest.raises(ValueError, match='no per-tile form'):
      fast(_x(), padding_mask=padding)
    return
  _assert_same(fast, slow, _x(), padding_mask=padding)


# Beyond the registry-wide cases above (BLOCK tiles): compositions, options, and other tile shapes.
_TILED_CONTENT = [
    'fox',
    'alibi + logn(train_length=4)',
    'rope + stick_breaking',
    'stick_breaking(attend_current=True, remainder_to_self=False)',
    'fox + stick_breaking + ssmax',
    'transformer_xl + stick_breaking',
    'dape(alibi)',
    'dape(kerple_log, version=2)',
    'dape(fire, version=2) + fox',
    'rope + dape(t5(bidirectional=False), version=2) + ssmax',
    'cope',
    'cope(npos=4) + alibi',
    'rope + cope + stick_breaking',
    'cope + ssmax + fox',
    'transformer_xl + cope',  # CoPE's gates read q . k without the query bias u
    'self_extend(rope, group_size=2, window=4) + cope',  # and without the remap that replaces q . k
]


@pytest.mark.parametrize('block', [(3, 2), 16], ids=['3x2', 'one_tile'])
@pytest.mark.parametrize('spec', _TILED_CONTENT)
def test_content_kinds_tile_like_the_explicit_path(spec, block):
  """FoX, SSMax / log-n, stick-breaking and DAPE (v2: its convolutions read 2 keys on each side, across tile
  edges), alone and composed: outputs and gradients (inputs and every parameter, the forget gates' and DAPE's
  layers included) equal the explicit path's, causal with padding, for tiles that do not divide L and for one
  tile larger than the sequence."""
  encoder = encoders.from_spec(spec)
  assert not _untiled(encoder)
  padding = jnp.array([[False] * 2 + [True] * (L - 2), [True] * (L - 3) + [False] * 3])
  fast, slow = _layers(encoder, causal=True)
  fast.block_size = block
  _assert_same(fast, slow, _x(), padding_mask=padding)


def test_dape_v2_tiles_bidirectional_and_refuses_what_it_cannot_tile():
  """Bidirectional too (the halo reads keys on both sides); a key tile narrower than the halo, or two halos, is
  a clear error naming the encoder (beside a normalizer it tiles: tests/nn/test_composed_parts.py)."""
  encoder = encoders.from_spec('dape(alibi, version=2, kernel_size=5)')
  padding = jnp.array([[False] * 2 + [True] * (L - 2), [True] * (L - 3) + [False] * 3])
  fast, slow = _layers(encoder, causal=False)
  fast.block_size = (3, 4)
  _assert_same(fast, slow, _x(), padding_mask=padding)
  fast.block_size = (3, 2)
  with pytest.raises(ValueError, match=r"key tiles of 2 are narrower than the 4 neighbouring keys 'dape'"):
    fast(_x())
  # Two halos: refused when composed (tests/nn/test_composed_parts.py), and by attention for parts given
  # directly.
  two = (encoders.from_spec('dape(alibi, version=2)'), encoders.from_spec('dape(t5, version=2, kernel_size=5)'))
  with pytest.raises(ValueError, match=r"'dape' and 'dape' each read neighbouring keys .*\(2 and 4\); allowed: one"):
    terms.terms_for(two, True, 1.0, one_tile=True, query_bias=False)


def test_path_beside_a_halo_is_an_error_naming_both():
  """PaTH's carry visits key tiles nearest first; a halo's side strips (DAPE v2) would need the neighbouring
  tiles' carries: refused in the tiled path with both encoders named (the explicit path takes it)."""
  encoder = encoders.from_spec('path + dape(alibi, version=2)')
  layer = RelativeMultiHeadAttention(HEADS, DIM, encoder, causal=True, implementation='blockwise', rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="'path' carries each query .* beside 'dape'.*einsum"):
    layer(_x())
  layer.implementation = 'einsum'
  assert np.isfinite(layer(_x())).all()


@pytest.mark.parametrize(
    'spec', ['cope', 'fox', 'path', 'dape(alibi)', 'stick_breaking', 'rope + ssmax', 'alibi + logn(train_length=8)']
)
def test_content_kinds_are_an_error_in_the_pallas_kernel(spec):
  """The Pallas kernel builds Toeplitz biases only: a content kind is refused with the encoder named."""
  encoder = encoders.from_spec(spec)
  part = [
      p
      for p in contract.leaves(encoder)
      if p.kind.value in ('contextual', 'score_transform', 'normalizer', 'temperature')
  ][0]
  layer = RelativeMultiHeadAttention(HEADS, DIM, encoder, causal=True, implementation='pallas', rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=f'"pallas".*{part.name!r}.*(no per-tile form|Toeplitz scalar biases only)'):
    layer(_x())


def test_fox_bias_only_is_a_scalar_bias_that_tiles():
  encoder = encoders.from_spec('fox(bias_only=True)')
  assert encoder.kind is contract.Kind.SCALAR_BIAS and not _untiled(encoder)
  _assert_same(*_layers(encoder, causal=True), _x())


@pytest.mark.parametrize('name', ['t5', 'fire', 'shaw_vector', 'transformer_xl', 'rope + absolute_score'])
def test_blockwise_equals_explicit_bidirectional_and_explicit_positions(name):
  encoder = encoders.from_spec(name)
  padding = jnp.array([[True] * L, [True] * (L - 4) + [False] * 4])
  positions = jnp.sort(jax.random.choice(jax.random.key(3), 64, (B, L), replace=False), axis=1)
  fast, slow = _layers(encoder, causal=False)
  _assert_same(fast, slow, _x(), padding_mask=padding)
  _assert_same(fast, slow, _x(), padding_mask=padding, positions=positions.astype(jnp.int32))


_decode = nnx.jit(lambda layer, x, cache: layer.decode(x, cache))


@pytest.mark.parametrize(
    'name', ['t5', 'fire', 'rope', 'shaw_vector', 'transformer_xl', 'fox', 'rope + stick_breaking', 'rope + ssmax']
)
def test_blockwise_cached_decoding_equals_explicit_forward(name):
  """Chunks at q_offset = cache index (a traced offset inside jit), keys past the index masked."""
  fast, slow = _layers(encoders.from_spec(name), causal=True)
  x = _x()
  full = nnx.jit(lambda layer, x: layer(x))(slow, x)
  cache = fast.init_cache(B, L + 2)
  outs, start = [], 0
  for size in (5, 1, 3, 2):
    y, cache = _decode(fast, x[:, start : start + size], cache)
    outs.append(y)
    start += size
  np.testing.assert_allclose(jnp.concatenate(outs, axis=1), full, **TOL)


def test_causal_tiles_ahead_of_the_queries_are_skipped():
  """With q_offset the visited key tiles stop at the last visible key: the forward's loop count."""
  cfg = blockwise.TileConfig(
      parts=(),
      part_terms=(),
      given_bias=False,
      causal=True,
      scale=1.0,
      bq=4,
      bk=3,
      num_q_tiles=3,
      num_k_tiles=6,
      k_len=18,
      has_key_mask=False,
      has_mask=False,
  )
  aux = {'q_offset': jnp.int32(2)}
  # Query tile qs sees keys up to qs + 3 + 2: 5, 9, 13 -> key tiles 0..1, 0..3, 0..4 of the 6.
  assert [int(blockwise._key_tile_range(cfg, aux, jnp.int32(qs))[1]) for qs in (0, 4, 8)] == [2, 4, 5]
  bidirectional = blockwise.TileConfig(**{**cfg.__dict__, 'causal': False})
  assert blockwise._key_tile_range(bidirectional, aux, jnp.int32(0)) == (0, 6)


def test_functional_attend_with_mask_and_given_bias():
  """An arbitrary mask and a precomputed position_bias (sliced per tile), gradients included."""
  encoder = encoders.make('t5')
  parts = terms.parts.attention_parts(encoder)
  params = terms.parts.init_params(parts, jax.random.key(0), num_heads=HEADS, head_dim=8, model_dim=16)
  q, k, v, ct = (jax.random.normal(r, (B, L, HEADS, 8)) for r in jax.random.split(jax.random.key(2), 4))
  mask = jax.random.bernoulli(jax.random.key(4), 0.7, (B, 1, L, L))

  def run(impl, bias, q, k, v):
    out = functional.attend(
        call.AttentionInputs.checked(q, k, v, mask=mask, bias=bias),
        parts,
        params,
        call.AttentionSettings.checked(
            causal=True, implementation=impl, block_size=BLOCK if impl == 'blockwise' else None
        ),
    )
    return jnp.sum(out * ct)

  bias = terms.parts.scalar_bias(parts, params, L, L)
  for impl_args in ((bias,), (None,)):
    a = jax.jit(jax.value_and_grad(lambda *a: run('blockwise', *a), argnums=(0, 1, 2, 3)))(*impl_args, q, k, v)
    b = jax.jit(jax.value_and_grad(lambda *a: run('einsum', *a), argnums=(0, 1, 2, 3)))(*impl_args, q, k, v)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
      np.testing.assert_allclose(x, y, **TOL)


def _largest_intermediate(jaxpr) -> int:
  biggest = 0
  for eqn in jaxpr.eqns:
    for var in eqn.outvars:
      biggest = max(biggest, int(np.prod(getattr(var.aval, 'shape', ()))))
    for param in eqn.params.values():
      for sub in (param if isinstance(param, (tuple, list)) else (param,)):
        inner = getattr(sub, 'jaxpr', None)
        if inner is not None:
          biggest = max(biggest, _largest_intermediate(getattr(inner, 'jaxpr', inner)))
        elif hasattr(sub, 'eqns'):
          biggest = max(biggest, _largest_intermediate(sub))
  return biggest


@pytest.mark.parametrize(
    'name',
    [
        't5',
        'fire',
        'shaw_vector',
        'transformer_xl',
        'rope + ssmax',
        'alibi + logn',
        'rope + stick_breaking',
        'self_extend(rope, group_size=2, window=4)',
        'dual_chunk(alibi, chunk=8, local_window=2)',
    ],
)
def test_no_length_squared_array_in_forward_or_backward(name):
  """The traced program (forward and gradient, loops included) has no intermediate of L^2 elements."""
  length, heads, head_dim = 256, 2, 4
  encoder = encoders.from_spec(name)
  parts = terms.parts.attention_parts(encoder)
  params = terms.parts.init_params(
      parts, jax.random.key(0), num_heads=heads, head_dim=head_dim, model_dim=heads * head_dim
  )
  q = jnp.ones((1, length, heads, head_dim))

  def loss(q, k, v, params, impl):
    return jnp.sum(
        functional.attend(
            call.AttentionInputs.checked(q, k, v),
            parts,
            params,
            call.AttentionSettings.checked(
                causal=True, implementation=impl, block_size=32 if impl == 'blockwise' else None
            ),
        )
    )

  grad = lambda impl: jax.make_jaxpr(jax.grad(lambda *a: loss(*a, impl), argnums=(0, 1, 2, 3)))(q, q, q, params)
  assert _largest_intermediate(grad('blockwise').jaxpr) < length * length
  assert _largest_intermediate(grad('einsum').jaxpr) >= length * length  # The check can fail.


def test_shared_bias_model_and_linen_twin():
  """A model sharing its T5 bias across layers, and the Linen twin, give the explicit path's outputs."""

  def model(impl):
    config = ModelConfig(
        vocab_size=32,
        encoder='t5(bidirectional=False)',
        num_layers=2,
        model_dim=DIM,
        num_heads=HEADS,
        share_position_bias=True,
        attention_implementation=impl,
        attention_block_size=BLOCK if impl == 'blockwise' else None,
    )
    return DecoderLM(config, rngs=nnx.Rngs(0))

  tokens = jax.random.randint(jax.random.key(0), (B, L), 0, 32)
  np.testing.assert_allclose(model('blockwise')(tokens), model('einsum')(tokens), **TOL)
  fast, _ = _layers(encoders.make('fire'), causal=True)
  twin = relpos_linen.RelativeMultiHeadAttention(
      num_heads=HEADS, encoder=encoders.make('fire'), causal=True, implementation='blockwise', block_size=BLOCK
  )
  x = _x()
  np.testing.assert_allclose(twin.apply({'params': relpos_linen.params_from_nnx(fast)}, x), fast(x), **TOL)


@pytest.mark.parametrize('block_size', [0, -4, (4,), (4, 0), 2.5, (True, 4), 'big'])
def test_bad_block_sizes_are_errors(block_size):
  with pytest.raises(ValueError, match='block_size'):
    RelativeMultiHeadAttention(
        HEADS, DIM, encoders.make('alibi'), implementation='blockwise', block_size=block_size, rngs=nnx.Rngs(0)
    )
  with pytest.raises(ValueError, match='attention_block_size'):
    ModelConfig(vocab_size=8, encoder='alibi', attention_implementation='blockwise', attention_block_size=block_size)


def test_every_part_gets_a_term_that_declares_its_stage():
  """terms.select gives every leaf of every registered encoder a Term with a declared Stage (what the tile loops
  and the layer ask instead of the kind), and the layer's attention and input parts split the leaves by it."""
  cases = [encoders.make(name) for name in encoders.names() if not _needs_a_base(name)]
  cases += [encoders.from_spec(s) for s in ('dape(alibi, version=2)', 'rope + stick_breaking', 'path + fox')]
  for encoder in cases:
    leaves = contract.leaves(encoder)
    for part in leaves:
      term = terms.term_for(part)
      assert isinstance(term.stage, terms.Stage), (part, term)
      assert (term.stage is terms.Stage.INPUT) == (part.kind is contract.Kind.ABSOLUTE), (part, term)
    inside, outside = terms.parts.attention_parts(encoder), terms.parts.input_parts(encoder)
    assert sorted(map(id, inside + outside)) == sorted(map(id, leaves))


def _needs_a_base(name) -> bool:
  missing = dataclasses.MISSING
  fields = dataclasses.fields(encoders.encoder_class(name))
  return any(f.init and f.default is missing and f.default_factory is missing for f in fields)


def test_block_size_without_tiles_and_kinds_without_tiles_are_errors():
  with pytest.raises(ValueError, match='no tiles'):
    RelativeMultiHeadAttention(
        HEADS, DIM, encoders.make('alibi'), implementation='einsum', block_size=64, rngs=nnx.Rngs(0)
    )
  assert blockwise.block_sizes(None) == blockwise.DEFAULT_BLOCK_SIZE
  assert blockwise.block_sizes(64) == (64, 64) and blockwise.block_sizes((8, 16)) == (8, 16)
  absolute = encoders.make('sinusoidal')  # A kind with no per-tile form stands in for a future one.
  assert absolute.kind is contract.Kind.ABSOLUTE
  assert not terms.term_for(absolute, True).tiles
  with pytest.raises(ValueError, match="'sinusoidal'.*'absolute'"):
    terms.terms_for((absolute,), True, 1.0, one_tile=False, query_bias=False)


def test_terms_with_per_pair_work_take_smaller_default_tiles_on_cpu(monkeypatch):
  """A normalizer, a score transform and counts along the keys default to PER_PAIR_BLOCK_SIZE on a CPU (their
  intermediates per pair outgrow the cache at 512 x 512); table and rotary kinds keep the default."""
  assert jax.default_backend() == 'cpu'
  assert blockwise.block_sizes(None, per_pair_work=True) == blockwise.PER_PAIR_BLOCK_SIZE
  assert blockwise.block_sizes(None) == blockwise.DEFAULT_BLOCK_SIZE
  seen = []
  original = blockwise.prepare

  def spy(*args, **kwargs):
    prepared = original(*args, **kwargs)
    seen.append((prepared.cfg.bq, prepared.cfg.bk))
    return prepared

  monkeypatch.setattr(blockwise, 'prepare', spy)
  x = jnp.zeros((1, 600, DIM), jnp.float32)
  for spec, expected in (('stick_breaking', 256), ('cope', 256), ('dape(alibi)', 256), ('alibi', 512), ('rope', 512)):
    seen.clear()
    layer = RelativeMultiHeadAttention(
        HEADS, DIM, encoders.from_spec(spec), causal=True, implementation='blockwise', rngs=nnx.Rngs(0)
    )
    jax.eval_shape(lambda x: layer(x), x)  # traced only: the tile sizes are static
    assert seen == [(expected, expected)], spec


def test_the_default_implementation_tiles_beyond_one_default_tile_on_cpu(monkeypatch):
  """implementation=None on a CPU: the explicit path up to one default tile, the blockwise path beyond (the
  same numbers); PaTH tiles too."""
  calls = []
  for module, name in ((blockwise, 'blockwise'), (explicit, 'explicit')):
    original = module.attend
    monkeypatch.setattr(
        module, 'attend', lambda *a, _name=name, _f=original, **k: (calls.append(_name), _f(*a, **k))[1]
    )
  monkeypatch.setattr(blockwise, 'DEFAULT_BLOCK_SIZE', (8, 8))
  parts = (encoders.make('transformer_xl'),)
  params = [parts[0].init(jax.random.key(0), HEADS, head_dim=DIM // HEADS, model_dim=DIM)]
  for length, path in ((8, 'explicit'), (20, 'blockwise')):
    q, k, v = jax.random.normal(jax.random.key(length), (3, 1, length, HEADS, DIM // HEADS))
    calls.clear()
    out = functional.attend(
        call.AttentionInputs.checked(q, k, v), parts, params, call.AttentionSettings.checked(causal=True)
    )
    assert calls == [path]
    einsum = functional.attend(
        call.AttentionInputs.checked(q, k, v),
        parts,
        params,
        call.AttentionSettings.checked(causal=True, implementation='einsum'),
    )
    np.testing.assert_allclose(out, einsum, **TOL)
  assert functional.default_is_tiled((encoders.make('path'),), q, v)
