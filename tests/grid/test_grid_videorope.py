"""VideoRoPE against numpy transcriptions of Wiselnn570/VideoRoPE videorope-transformer/modeling_videorope.py
(commit 7712ca3f): the frequency layout of `apply_m_modify_multimodal_rotary_pos_emb` and the ids of
`get_t_scale_rope_index`; and the encoder through the attention layer's grid path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders, grid
from relpos_jax.grid.mrope_index import get_rope_index, get_videorope_index
from relpos_jax.nn import RelativeMultiHeadAttention

IMG, VID, START, END = 151655, 151656, 151652, 151653


def ref_rotate_half(x):
  half = x.shape[-1] // 2
  return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def ref_videorope_rotate(q, position_ids, mrope_section, base=10000.0):
  """Qwen2VLRotaryEmbedding.forward, then apply_m_modify_multimodal_rotary_pos_emb (unsqueeze_dim=2: q (B, L, H, D))."""
  dim = q.shape[-1]
  inv_freq = 1.0 / (base ** (np.arange(0, dim, 2).astype(np.float32) / dim))
  freqs = position_ids[..., None].astype(np.float32) * inv_freq  # (3, B, L, D/2)
  emb = np.concatenate([freqs, freqs], -1)
  cos, sin = np.cos(emb), np.sin(emb)
  mrope_section = [mrope_section[0], mrope_section[1] + mrope_section[2]]
  mrope_section = mrope_section * 2
  mrope_section = mrope_section[::-1]
  index = 0
  result_cos, result_sin = [], []
  for i, section in enumerate(mrope_section):
    if i % 2 == 0:
      for j in range(section):
        row = 1 if j % 2 == 0 else 2
        result_cos.append(cos[row, ..., index : index + 1])
        result_sin.append(sin[row, ..., index : index + 1])
        index += 1
    else:
      result_cos.append(cos[0, ..., index : index + section])
      result_sin.append(sin[0, ..., index : index + section])
      index += section
  cos = np.concatenate(result_cos, axis=-1)[:, :, None]
  sin = np.concatenate(result_sin, axis=-1)[:, :, None]
  return q * cos + ref_rotate_half(q) * sin


@pytest.mark.parametrize('head_dim, sections', [(128, (16, 24, 24)), (32, (4, 6, 6)), (16, None), (32, (6, 5, 5))])
def test_videorope_rotation_matches_reference(head_dim, sections):
  enc = grid.make('videorope', sections=sections)
  params = enc.init(jax.random.key(0), 2, head_dim=head_dim)
  ids = np.random.default_rng(0).integers(0, 60, size=(3, 2, 7)).astype(np.float64) * 0.5  # fractional ids too
  q = jax.random.normal(jax.random.key(1), (2, 7, 2, head_dim))
  ours = np.asarray(enc.rotate(params, q, jnp.asarray(np.moveaxis(ids, 0, -1), jnp.float32)))
  ref = ref_videorope_rotate(np.asarray(q), ids, enc.sections_for(head_dim))
  np.testing.assert_allclose(ours, ref, rtol=2e-4, atol=2e-4)
  # Not M-RoPE's allocation: the same ids rotate differently under mrope (the test can fail).
  mrope = grid.make('mrope', sections=sections)
  assert not np.allclose(
      ours, mrope.rotate(mrope.init(jax.random.key(0), 2, head_dim=head_dim), q, np.moveaxis(ids, 0, -1))
  )


def test_frequency_allocation_hand_values():
  """D = 128: frequencies 0..47 alternate h, w (highest first), 48..63 read t (the lowest)."""
  which = grid.make('videorope').axis_of_frequency(128)
  assert list(which[:4]) == [1, 2, 1, 2] and (which[:48] > 0).all() and (which[48:] == 0).all()
  assert (which[:48] == 1).sum() == 24


def ref_get_t_scale_rope_index(input_ids, image_grid_thw, video_grid_thw, attention_mask, scale_factor, merge=2):
  """A numpy transcription of get_t_scale_rope_index (the vision branch; attention_mask given)."""
  mrope_position_deltas = []
  total_input_ids = input_ids
  position_ids = np.ones((3, input_ids.shape[0], input_ids.shape[1]), dtype=np.float64)
  image_index, video_index = 0, 0
  for i, input_ids in enumerate(total_input_ids):
    input_ids = input_ids[attention_mask[i] == 1]
    vision_start_indices = np.argwhere(input_ids == START).squeeze(1)
    vision_tokens = input_ids[vision_start_indices + 1]
    image_nums = (vision_tokens == IMG).sum()
    video_nums = (vision_tokens == VID).sum()
    input_tokens = input_ids.tolist()
    llm_pos_ids_list = []
    st = 0
    remain_images, remain_videos = image_nums, video_nums
    for _ in range(image_nums + video_nums):
      ed_image = input_tokens.index(IMG, st) if IMG in input_tokens and remain_images > 0 else len(input_tokens) + 1
      ed_video = input_tokens.index(VID, st) if VID in input_tokens and remain_videos > 0 else len(input_tokens) + 1
      if ed_image < ed_video:
        t, h, w = image_grid_thw[image_index]
        image_index += 1
        remain_images -= 1
        ed = ed_image
      else:
        t, h, w = video_grid_thw[video_index]
        video_index += 1
        remain_videos -= 1
        ed = ed_video
      llm_grid_t, llm_grid_h, llm_grid_w = int(t), int(h) // merge, int(w) // merge
      text_len = ed - st
      st_idx = llm_pos_ids_list[-1][0].max() + 1 if len(llm_pos_ids_list) > 0 else 0
      llm_pos_ids_list.append(np.broadcast_to(np.arange(text_len).reshape(1, -1), (3, text_len)) + st_idx)
      t_index = np.broadcast_to(np.arange(llm_grid_t).reshape(-1, 1), (llm_grid_t, llm_grid_h * llm_grid_w)).flatten()
      h_index = (
          np.broadcast_to(np.arange(llm_grid_h).reshape(1, -1, 1), (llm_grid_t, llm_grid_h, llm_grid_w)).flatten()
          - (llm_grid_h - 1) // 2
      )
      w_index = (
          np.broadcast_to(np.arange(llm_grid_w).reshape(1, 1, -1), (llm_grid_t, llm_grid_h, llm_grid_w)).flatten()
          - (llm_grid_w - 1) // 2
      )
      t_index = t_index * scale_factor
      t_index = t_index + text_len + st_idx
      h_index = h_index + t_index
      w_index = w_index + t_index
      llm_pos_ids_list.append(np.stack([t_index, h_index, w_index]))
      st = ed + llm_grid_t * llm_grid_h * llm_grid_w
    if st < len(input_tokens):
      st_idx = llm_pos_ids_list[-1][0].max() + 1 if len(llm_pos_ids_list) > 0 else 0
      text_len = len(input_tokens) - st
      llm_pos_ids_list.append(np.broadcast_to(np.arange(text_len).reshape(1, -1), (3, text_len)) + st_idx)
    llm_positions = np.concatenate(llm_pos_ids_list, axis=1).reshape(3, -1)
    position_ids[..., i, attention_mask[i] == 1] = llm_positions
    mrope_position_deltas.append(llm_positions[0].max() + 1 - len(total_input_ids[i]))
  return position_ids, np.asarray(mrope_position_deltas)[:, None]


def _sequence(blocks, text=2):
  seq = list(range(1, text + 1))
  for kind, n in blocks:
    seq += [START] + [kind] * n + [END] + [7, 8]
  return seq


@pytest.mark.parametrize('scale', [2.0, 1.0, 0.5])
@pytest.mark.parametrize('case', ['image', 'video', 'video_then_image', 'left_padding'])
def test_videorope_index_matches_reference(case, scale):
  images, videos = None, None
  if case == 'image':
    ids = np.array([_sequence([(IMG, 6)])])
    images = np.array([[1, 4, 6]])
  elif case == 'video':
    ids = np.array([_sequence([(VID, 12)], text=3)])
    videos = np.array([[3, 4, 4]])
  elif case == 'video_then_image':
    ids = np.array([_sequence([(VID, 8), (IMG, 4)])])
    videos, images = np.array([[2, 4, 4]]), np.array([[1, 4, 4]])
  else:
    a, b = _sequence([(VID, 8)]), _sequence([(VID, 8)], text=5)
    ids = np.array([[0] * (len(b) - len(a)) + a, b])
    videos = np.array([[2, 4, 4], [2, 4, 4]])
  mask = np.ones_like(ids) if case != 'left_padding' else (ids != 0).astype(np.int64)
  ours, ours_delta = get_videorope_index(
      ids, images, videos, mask, image_token_id=IMG, video_token_id=VID, vision_start_token_id=START, scale_factor=scale
  )
  ref, ref_delta = ref_get_t_scale_rope_index(ids, images, videos, mask, scale)
  np.testing.assert_array_equal(ours, ref)
  np.testing.assert_array_equal(ours_delta, ref_delta)


def test_videorope_index_hand_values_and_text_only():
  """Two text tokens, START, a 2-frame 2 x 3 video (after merge), END. The grid starts at s = 3: frame f has
  t = 3 + 2 f; rows h = t + row - 0, columns w = t + col - 1; the text after it resumes at max t + 1 = 6."""
  ids = np.array([[1, 2, START] + [VID] * 12 + [END]])
  pos, delta = get_videorope_index(
      ids, video_grid_thw=np.array([[2, 4, 6]]), image_token_id=IMG, video_token_id=VID, vision_start_token_id=START
  )
  np.testing.assert_array_equal(pos[:, 0, :3], [[0, 1, 2]] * 3)
  np.testing.assert_array_equal(pos[0, 0, 3:15], [3] * 6 + [5] * 6)
  np.testing.assert_array_equal(pos[1, 0, 3:9], [3, 3, 3, 4, 4, 4])
  np.testing.assert_array_equal(pos[2, 0, 3:9], [2, 3, 4, 2, 3, 4])
  np.testing.assert_array_equal(pos[2, 0, 9:12], [4, 5, 6])
  assert pos[0, 0, 15] == 6 and delta[0, 0] == 7 - 16
  # Without vision, VideoRoPE's ids are Qwen2-VL's (1-D positions on every axis).
  text = np.array([[5, 6, 7, 8]])
  kw = dict(image_token_id=IMG, video_token_id=VID, vision_start_token_id=START)
  np.testing.assert_array_equal(get_videorope_index(text, **kw)[0], get_rope_index(text, **kw)[0])
  with pytest.raises(ValueError, match='scale_factor'):
    get_videorope_index(text, scale_factor=0.0, **kw)


def test_spec_registry_and_refusals():
  for spec in ['videorope', 'videorope(sections=(4, 6, 6), base=500.0)']:
    enc = grid.from_spec(spec)
    assert grid.from_spec(grid.to_spec(enc)) == enc and repr(enc) == grid.to_spec(enc)
  assert 'videorope' in grid.names() and 'videorope' not in encoders.names()
  with pytest.raises(ValueError, match='videorope.*axes'):
    grid.make('videorope', axes=2)
  with pytest.raises(ValueError, match='videorope.*sections'):
    grid.make('videorope', sections=(1, 1, 1)).init(jax.random.key(0), 2, head_dim=16)
  enc = grid.make('videorope')
  with pytest.raises(ValueError, match=r'videorope.*trailing axis of 3.*got shape \(1, 4\)'):
    enc.rotate(enc.init(jax.random.key(0), 2, head_dim=16), jnp.zeros((1, 4, 2, 16)), jnp.arange(4)[None])


def test_text_is_one_d_rope_and_the_layer_grid_path():
  enc = grid.make('videorope')
  rope = encoders.make('rope')
  params = enc.init(jax.random.key(0), 2, head_dim=16)
  q = jax.random.normal(jax.random.key(1), (1, 9, 2, 16))
  pos = jnp.arange(9, dtype=jnp.int32)[None]
  np.testing.assert_allclose(
      enc.rotate(params, q, jnp.repeat(pos[..., None], 3, -1)),
      rope.rotate(rope.init(jax.random.key(0), 2), q, pos),
      rtol=1e-5,
      atol=1e-5,
  )
  layer = RelativeMultiHeadAttention(4, 64, enc, rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(2), (2, 12, 64))
  coords = jnp.broadcast_to(grid.grid_positions((2, 2, 3)), (2, 12, 3))
  a = layer(x, grid_shape=(2, 2, 3))
  np.testing.assert_allclose(a, layer(x, positions=coords), rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(a, layer(x, positions=coords + jnp.asarray([4, -2, 7])), rtol=2e-4, atol=2e-4)
  with pytest.raises(ValueError, match=r"\['videorope'\] read coordinates.*got positions of shape \(2, 12\)"):
    layer(x, positions=jnp.broadcast_to(jnp.arange(12), (2, 12)))
