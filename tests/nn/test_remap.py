"""Position remaps (Self-Extend, ReRoPE, leaky ReRoPE, Dual Chunk) against NumPy transcriptions of their
reference code's merged score matrices, their identities (a window past the sequence is the base itself),
and their validation. Causality and decode == forward: the registry-wide cases of tests/nn/conftest.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders
from relpos_jax.encoders import spec
from relpos_jax.nn import terms
from relpos_jax.nn import call

B, L, H, D = 1, 23, 2, 8


def _np_rope(x, positions):
  """HF rotate_half RoPE at (possibly fractional) float64 positions: x (L, H, D)."""
  inv = 1.0 / (10000.0 ** (np.arange(0, D, 2) / D))
  emb = np.concatenate([np.outer(positions, inv)] * 2, axis=-1)[:, None, :]
  half = np.concatenate([-x[..., D // 2 :], x[..., : D // 2]], axis=-1)
  return x * np.cos(emb) + half * np.sin(emb)


def _scores(q, k, q_pos, k_pos):
  return np.einsum('ihd,jhd->hij', _np_rope(q, q_pos), _np_rope(k, k_pos))


def _qk(seed=0):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(L, H, D)), rng.normal(size=(L, H, D))


def _ours(text, q, k):
  encoder = spec.from_spec(text)
  params = encoder.init(jax.random.PRNGKey(0), H, head_dim=D)
  pos = jnp.arange(L, dtype=jnp.int32)[None]
  scores, bias = terms.parts.remap_scores(
      encoder, params, jnp.asarray(q, jnp.float32)[None], jnp.asarray(k, jnp.float32)[None], pos, pos
  )
  return np.asarray(scores[0]), bias


def _causal(x):
  return np.where(np.tril(np.ones((L, L), bool)), x, 0.0)


@pytest.mark.parametrize('g,w', [(2, 4), (3, 5), (4, 8)])
def test_self_extend_merges_neighbour_and_grouped_scores_as_longlm(g, w):
  q, k = _qk()
  pos = np.arange(L)
  neighbour = _scores(q, k, pos, pos)
  grouped = _scores(q, k, pos // g + w - w // g, pos // g)
  # LongLM's prefill mask: tril(ones) minus tril(ones) shifted down by the window.
  mask = np.tril(np.ones((L, L)))
  mask[w:, :-w] -= np.tril(np.ones((L - w, L - w)))
  want = np.where(mask.astype(bool), neighbour, grouped)
  got, _ = _ours(f'self_extend(rope, group_size={g}, window={w})', q, k)
  np.testing.assert_allclose(_causal(got), _causal(want), atol=2e-4)


@pytest.mark.parametrize('w,leak', [(4, None), (7, None), (4, 2), (5, 16)])
def test_rerope_clips_or_compresses_distances_past_the_window(w, leak):
  q, k = _qk(1)
  pos = np.arange(L, dtype=np.float64)
  near = _scores(q, k, pos, pos)
  if leak is None:
    far = _scores(q, k, np.full(L, w), np.zeros(L))
  else:  # Su's leaky form: queries at i / k + W (1 - 1 / k), keys at j / k (fractional positions).
    far = _scores(q, k, pos / leak + w * (1 - 1 / leak), pos / leak)
  d = pos[:, None] - pos[None, :]
  want = np.where(d < w, near, far)
  text = f'rerope(rope, window={w})' if leak is None else f'rerope(rope, window={w}, leak={leak})'
  got, _ = _ours(text, q, k)
  np.testing.assert_allclose(_causal(got), _causal(want), atol=2e-4)


@pytest.mark.parametrize('chunk,local', [(6, 2), (8, 3), (6, 4), (9, 5)])
def test_dual_chunk_intra_successive_inter_as_chunkllama(chunk, local):
  q, k = _qk(2)
  size = chunk - local
  pos = np.arange(L)
  k_t = pos % size
  intra = _scores(q, k, pos % size, k_t)
  successive = _scores(q, k, np.minimum(pos % size + size, chunk), k_t)
  # ChunkLlama's inter-chunk queries: qc_t[chunk_len - 1] = min(chunk_len - 1 + chunk_len, chunk_size).
  inter = _scores(q, k, np.full(L, min(size - 1 + size, chunk)), k_t)
  cq, ck = (pos // size)[:, None], (pos // size)[None, :]
  want = np.where(cq == ck, intra, np.where(cq - ck == 1, successive, inter))
  got, _ = _ours(f'dual_chunk(rope, chunk={chunk}, local_window={local})', q, k)
  np.testing.assert_allclose(_causal(got), _causal(want), atol=2e-4)


def test_a_scalar_base_reads_its_bias_at_the_remapped_distance():
  q, k = _qk(3)
  _, bias = _ours('rerope(alibi, window=5)', q, k)
  d = np.arange(L)[:, None] - np.arange(L)[None, :]
  clipped = np.minimum(d, 5)
  plain = encoders.make('alibi')
  params = plain.init(jax.random.PRNGKey(0), H)
  want = np.moveaxis(np.asarray(plain.bias(params, jnp.asarray(-clipped))), -1, 0)
  np.testing.assert_allclose(_causal(np.asarray(bias[0])), _causal(want), atol=1e-6)


@pytest.mark.parametrize(
    'text',
    [
        'self_extend(rope, group_size=1, window=3)',
        f'rerope(rope, window={L})',
        f'dual_chunk(rope, chunk={L + 2}, local_window=1)',
    ],
)
def test_remaps_that_cannot_act_are_the_base(text):
  q, k = _qk(4)
  pos = np.arange(L)
  got, _ = _ours(text, q, k)
  np.testing.assert_allclose(_causal(got), _causal(_scores(q, k, pos, pos)), atol=2e-4)


@pytest.mark.parametrize(
    'text,field',
    [
        ('self_extend(shaw_vector)', 'base'),
        ('rerope(rope, window=0)', 'window'),
        ('rerope(alibi, leak=4)', 'leak'),
        ('rerope(rope, leak=1)', 'leak'),
        ('self_extend(rope, group_size=0)', 'group_size'),
        ('dual_chunk(rope, chunk=4, local_window=4)', 'local_window'),
    ],
)
def test_bad_remaps_name_the_field(text, field):
  with pytest.raises(ValueError, match=field):
    spec.from_spec(text)


def test_remap_params_are_the_base_params():
  base = encoders.make('t5', bidirectional=False)
  remap = encoders.make('self_extend', base=base, group_size=2, window=4)
  a = base.init(jax.random.PRNGKey(0), H)
  b = remap.init(jax.random.PRNGKey(0), H)
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)


_TILED_REMAPS = [
    'self_extend(rope, group_size=2, window=4)',
    'rerope(rope, window=4)',
    'rerope(rope, window=3, leak=2)',
    'dual_chunk(rope, chunk=6, local_window=4)',
    'dual_chunk(t5(bidirectional=False), chunk=8, local_window=2)',
    'self_extend(alibi, group_size=3, window=2) + transformer_xl',
]


@pytest.mark.parametrize('block', [(4, 3), 32], ids=['4x3', 'one_tile'])
@pytest.mark.parametrize('text', _TILED_REMAPS)
def test_blockwise_merges_each_tile_like_the_explicit_path(text, block):
  """Each tile merges its score sets by region: outputs and gradients (q, k, v, params) equal the explicit
  path's, causal with padding and a cache offset, for tiles that do not divide L and for one tile > L."""
  from relpos_jax.nn import functional

  encoder = spec.from_spec(text)
  parts = terms.parts.attention_parts(encoder)
  params = terms.parts.init_params(parts, jax.random.PRNGKey(0), num_heads=H, head_dim=D, model_dim=H * D)
  params = jax.tree.map(lambda x: x + 0.1 * jax.random.normal(jax.random.PRNGKey(5), x.shape), params)
  q, k, v, ct = (jax.random.normal(r, (2, L, H, D)) for r in jax.random.split(jax.random.PRNGKey(2), 4))
  key_mask = jnp.arange(L)[None, :] >= jnp.array([[0], [3]])

  def loss(impl, q, k, v, params):
    out = functional.attend(
        call.AttentionInputs.checked(q, k, v, call.Positions(offset=2), key_mask=key_mask),
        parts,
        params,
        call.AttentionSettings.checked(
            causal=True, implementation=impl, block_size=block if impl == 'blockwise' else None
        ),
    )
    return jnp.sum(out[:, : L - 2] * ct[:, : L - 2]), out

  grads = {
      impl: jax.jit(jax.value_and_grad(lambda *a: loss(impl, *a), argnums=(0, 1, 2, 3), has_aux=True))(q, k, v, params)
      for impl in ('blockwise', 'einsum')
  }
  leaves = [jax.tree.leaves(grads[impl]) for impl in ('blockwise', 'einsum')]
  assert len(leaves[0]) == len(leaves[1]) >= 5
  for a, b in zip(*leaves):
    np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    'text',
    [
        'self_extend(rope, group_size=2, window=4)',
        'rerope(rope, window=4)',
        'dual_chunk(t5(bidirectional=False), chunk=8, local_window=2)',
    ],
)
def test_the_pallas_kernel_refuses_a_remap_by_name(text):
  """The Pallas kernel builds Toeplitz biases only: a remap is a ValueError naming it, never dropped."""
  from relpos_jax.nn import functional

  encoder = spec.from_spec(text)
  parts = terms.parts.attention_parts(encoder)
  params = [p.init(jax.random.PRNGKey(0), H, head_dim=D) for p in parts]
  q = jnp.ones((B, L, H, D), jnp.float32)
  with pytest.raises(ValueError, match=f"\"pallas\".*{encoder.name}'.*'position_remap'"):
    functional.attend(
        call.AttentionInputs.checked(q, q, q),
        parts,
        params,
        call.AttentionSettings.checked(causal=True, implementation='pallas'),
    )


def test_the_tiled_paths_refuse_pope_sized_queries():
  from relpos_jax.nn import functional

  q = jnp.ones((B, L, H, 2 * D), jnp.float32)
  v = jnp.ones((B, L, H, D), jnp.float32)
  with pytest.raises(ValueError, match='differ in size'):
    functional.attend(
        call.AttentionInputs.checked(q, q, v),
        (),
        [],
        call.AttentionSettings.checked(causal=True, implementation='blockwise'),
    )
