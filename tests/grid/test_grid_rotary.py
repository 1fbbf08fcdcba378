"""Grid rotary encoders against numpy transcriptions of naver-ai/rope-vit (axial, mixed) and Hugging Face's
Qwen2-VL / Qwen3-VL (M-RoPE chunked and interleaved), and M-RoPE ids against Qwen2-VL's `get_rope_index`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax import encoders, grid
from relpos_jax.grid.mrope_index import get_rope_index


def _q(shape, seed=0):
  return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


# --- rope-vit: compute_axial_cis / compute_mixed_cis / apply_rotary_emb (complex pairs (2k, 2k + 1)) --------


def ref_init_t_xy(end_x, end_y):
  t = np.arange(end_x * end_y, dtype=np.float32)
  return (t % end_x).astype(np.float32), np.floor_divide(t, end_x).astype(np.float32)


def ref_axial_cis(dim, end_x, end_y, theta=100.0):
  freqs_x = 1.0 / (theta ** (np.arange(0, dim, 4)[: dim // 4].astype(np.float32) / dim))
  freqs_y = 1.0 / (theta ** (np.arange(0, dim, 4)[: dim // 4].astype(np.float32) / dim))
  t_x, t_y = ref_init_t_xy(end_x, end_y)
  return np.concatenate([np.exp(1j * np.outer(t_x, freqs_x)), np.exp(1j * np.outer(t_y, freqs_y))], axis=-1)


def ref_apply_rotary(x, freqs_cis):
  """x (B, H, N, D) real -> rotated, freqs_cis (N, D/2) or (H, N, D/2)."""
  xc = x.reshape(*x.shape[:-1], -1, 2)
  xc = xc[..., 0] + 1j * xc[..., 1]
  out = xc * freqs_cis
  return np.stack([out.real, out.imag], axis=-1).reshape(x.shape)


def test_rope_axial_matches_rope_vit():
  enc = grid.make('rope_axial')
  params = enc.init(jax.random.key(0), 2, head_dim=16)
  h, w = 3, 5
  q = _q((1, h * w, 2, 16))
  ours = np.asarray(enc.rotate(params, q, grid.grid_positions((h, w))[None]))
  ref = ref_apply_rotary(np.asarray(q).transpose(0, 2, 1, 3), ref_axial_cis(16, end_x=w, end_y=h)).transpose(0, 2, 1, 3)
  np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def ref_init_random_2d_freqs(dim, angles, theta=10.0):
  mag = 1 / (theta ** (np.arange(0, dim, 4)[: dim // 4].astype(np.float32) / dim))
  fx = [np.concatenate([mag * np.cos(a), mag * np.cos(np.pi / 2 + a)]) for a in angles]
  fy = [np.concatenate([mag * np.sin(a), mag * np.sin(np.pi / 2 + a)]) for a in angles]
  return np.stack([np.stack(fx), np.stack(fy)])  # (2, heads, dim / 2)


def ref_mixed_cis(freqs, t_x, t_y, num_heads):
  n = t_x.shape[0]
  fx = (t_x[:, None] @ freqs[0].reshape(1, -1)).reshape(n, num_heads, -1).transpose(1, 0, 2)
  fy = (t_y[:, None] @ freqs[1].reshape(1, -1)).reshape(n, num_heads, -1).transpose(1, 0, 2)
  return np.exp(1j * (fx + fy))  # (heads, N, dim / 2)


def test_rope_mixed_matches_rope_vit():
  enc = grid.make('rope_mixed')
  heads, dim, h, w = 3, 16, 4, 3
  params = enc.init(jax.random.key(1), heads, head_dim=dim)
  freqs = np.asarray(params['freqs'])
  # The initialisation is the reference's, at the head angles it drew.
  angles = np.arctan2(freqs[1, :, 0], freqs[0, :, 0])
  np.testing.assert_allclose(freqs, ref_init_random_2d_freqs(dim, angles), rtol=1e-5, atol=1e-6)
  q = _q((1, h * w, heads, dim), 2)
  ours = np.asarray(enc.rotate(params, q, grid.grid_positions((h, w))[None]))
  t_x, t_y = ref_init_t_xy(w, h)
  ref = ref_apply_rotary(np.asarray(q).transpose(0, 2, 1, 3), ref_mixed_cis(freqs, t_x, t_y, heads))
  np.testing.assert_allclose(ours, ref.transpose(0, 2, 1, 3), rtol=1e-5, atol=1e-5)


# --- Qwen2-VL / Qwen3-VL ------------------------------------------------------------------------------------


def ref_rotate_half(x):
  half = x.shape[-1] // 2
  return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def ref_qwen_freqs(position_ids, dim, base):
  inv_freq = 1.0 / (base ** (np.arange(0, dim, 2).astype(np.float32) / dim))
  return position_ids[..., None].astype(np.float32) * inv_freq  # (3, B, L, dim / 2)


def ref_qwen2_mrope(q, position_ids, mrope_section, base=10000.0):
  """Qwen2VLRotaryEmbedding.forward + apply_multimodal_rotary_pos_emb (unsqueeze_dim=2: q is (B, L, H, D))."""
  freqs = ref_qwen_freqs(position_ids, q.shape[-1], base)
  emb = np.concatenate([freqs, freqs], -1)
  cos, sin = np.cos(emb), np.sin(emb)
  sections = list(mrope_section) * 2
  split = np.cumsum(sections)[:-1]
  cos = np.concatenate([m[i % 3] for i, m in enumerate(np.split(cos, split, axis=-1))], -1)[:, :, None]
  sin = np.concatenate([m[i % 3] for i, m in enumerate(np.split(sin, split, axis=-1))], -1)[:, :, None]
  return q * cos + ref_rotate_half(q) * sin


def ref_qwen3_mrope(q, position_ids, mrope_section, base=10000.0):
  """Qwen3-VL: apply_interleaved_mrope on the frequencies, then the plain rotate_half rotation."""
  freqs = ref_qwen_freqs(position_ids, q.shape[-1], base)
  freqs_t = freqs[0].copy()
  for dim, offset in enumerate((1, 2), start=1):
    length = mrope_section[dim] * 3
    idx = slice(offset, length, 3)
    freqs_t[..., idx] = freqs[dim, ..., idx]
  emb = np.concatenate([freqs_t, freqs_t], -1)
  return q * np.cos(emb)[:, :, None] + ref_rotate_half(q) * np.sin(emb)[:, :, None]


@pytest.mark.parametrize(
    'interleaved, head_dim, sections',
    [(False, 32, (4, 6, 6)), (True, 32, (6, 5, 5)), (False, 16, None), (True, 128, (24, 20, 20))],
)
def test_mrope_matches_qwen(interleaved, head_dim, sections):
  enc = grid.make('mrope', interleaved=interleaved, sections=sections)
  params = enc.init(jax.random.key(0), 2, head_dim=head_dim)
  rng = np.random.default_rng(0)
  ids = rng.integers(0, 50, size=(3, 2, 7))
  q = _q((2, 7, 2, head_dim))
  ours = np.asarray(enc.rotate(params, q, jnp.asarray(np.moveaxis(ids, 0, -1), jnp.int32)))
  used = enc.sections_for(head_dim)
  ref = (ref_qwen3_mrope if interleaved else ref_qwen2_mrope)(np.asarray(q), ids, used)
  np.testing.assert_allclose(ours, ref, rtol=2e-4, atol=2e-4)


def test_mrope_default_sections_are_qwens_at_128():
  assert grid.make('mrope').sections_for(128) == (16, 24, 24)
  assert grid.make('mrope', interleaved=True).sections_for(128) == (24, 20, 20)
  with pytest.raises(ValueError, match='sections'):
    grid.make('mrope', sections=(1, 2, 3)).init(jax.random.key(0), 2, head_dim=16)


def test_mrope_on_text_is_one_d_rope():
  """Text tokens (t = h = w) are rotated exactly as 1-D RoPE in the half layout."""
  enc = grid.make('mrope')
  rope = encoders.make('rope')
  params = enc.init(jax.random.key(0), 2, head_dim=16)
  q = _q((1, 9, 2, 16))
  pos = jnp.arange(9, dtype=jnp.int32)[None]
  ours = enc.rotate(params, q, jnp.repeat(pos[..., None], 3, -1))
  np.testing.assert_allclose(ours, rope.rotate(rope.init(jax.random.key(0), 2), q, pos), rtol=1e-5, atol=1e-5)


def test_class_token_is_not_rotated():
  for spec in ['rope_axial', 'rope_mixed']:
    enc = grid.from_spec(spec)
    params = enc.init(jax.random.key(0), 2, head_dim=16)
    q = _q((1, 5, 2, 16))
    out = np.asarray(enc.rotate(params, q, grid.grid_positions((2, 2), class_token=True)[None]))
    np.testing.assert_allclose(out[0, 0], np.asarray(q)[0, 0], rtol=1e-6)


def test_rotary_refuses_one_d_positions_and_bad_head_dims():
  enc = grid.make('rope_axial')
  params = enc.init(jax.random.key(0), 2)
  with pytest.raises(ValueError, match=r'rope_axial.*trailing axis of 2.*got shape \(1, 4\)'):
    enc.rotate(params, _q((1, 4, 2, 16)), jnp.arange(4)[None])
  with pytest.raises(ValueError, match='rope_axial.*head_dim'):
    enc.rotate(params, _q((1, 4, 2, 6)), grid.grid_positions((2, 2))[None])


# --- get_rope_index -------------------------------------------------------------------------------------------

IMG, VID, START, END = 151655, 151656, 151652, 151653


def ref_get_rope_index(input_ids, image_grid_thw, video_grid_thw, attention_mask, spatial_merge_size=2):
  """A numpy transcription of Qwen2VLModel.get_rope_index (transformers modeling_qwen2_vl.py)."""
  mrope_position_deltas = []
  if input_ids is not None and (image_grid_thw is not None or video_grid_thw is not None):
    total_input_ids = input_ids
    if attention_mask is None:
      attention_mask = np.ones_like(total_input_ids)
    position_ids = np.ones((3, input_ids.shape[0], input_ids.shape[1]), dtype=input_ids.dtype)
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
        if IMG in input_tokens and remain_images > 0:
          ed_image = input_tokens.index(IMG, st)
        else:
          ed_image = len(input_tokens) + 1
        if VID in input_tokens and remain_videos > 0:
          ed_video = input_tokens.index(VID, st)
        else:
          ed_video = len(input_tokens) + 1
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
        llm_grid_t, llm_grid_h, llm_grid_w = int(t), int(h) // spatial_merge_size, int(w) // spatial_merge_size
        text_len = ed - st
        st_idx = llm_pos_ids_list[-1].max() + 1 if len(llm_pos_ids_list) > 0 else 0
        llm_pos_ids_list.append(np.broadcast_to(np.arange(text_len).reshape(1, -1), (3, text_len)) + st_idx)
        t_index = np.broadcast_to(np.arange(llm_grid_t).reshape(-1, 1), (llm_grid_t, llm_grid_h * llm_grid_w)).flatten()
        h_index = np.broadcast_to(
            np.arange(llm_grid_h).reshape(1, -1, 1), (llm_grid_t, llm_grid_h, llm_grid_w)
        ).flatten()
        w_index = np.broadcast_to(
            np.arange(llm_grid_w).reshape(1, 1, -1), (llm_grid_t, llm_grid_h, llm_grid_w)
        ).flatten()
        llm_pos_ids_list.append(np.stack([t_index, h_index, w_index]) + text_len + st_idx)
        st = ed + llm_grid_t * llm_grid_h * llm_grid_w
      if st < len(input_tokens):
        st_idx = llm_pos_ids_list[-1].max() + 1 if len(llm_pos_ids_list) > 0 else 0
        text_len = len(input_tokens) - st
        llm_pos_ids_list.append(np.broadcast_to(np.arange(text_len).reshape(1, -1), (3, text_len)) + st_idx)
      llm_positions = np.concatenate(llm_pos_ids_list, axis=1).reshape(3, -1)
      position_ids[..., i, attention_mask[i] == 1] = llm_positions
      mrope_position_deltas.append(llm_positions.max() + 1 - len(total_input_ids[i]))
    return position_ids, np.asarray(mrope_position_deltas)[:, None]
  if attention_mask is not None:
    position_ids = np.cumsum(attention_mask.astype(np.int64), -1) - 1
    position_ids = np.where(attention_mask == 0, 1, position_ids)
    position_ids = np.broadcast_to(position_ids[None], (3,) + position_ids.shape)
    max_position_ids = position_ids.max(0).max(-1, keepdims=True)
    return position_ids, max_position_ids + 1 - attention_mask.shape[-1]
  return (
      np.broadcast_to(np.arange(input_ids.shape[1]).reshape(1, 1, -1), (3, input_ids.shape[0], input_ids.shape[1])),
      np.zeros((input_ids.shape[0], 1), np.int64),
  )


def _sequence(blocks, text=2):
  """Text, then per block [START, kind * n, END], then text."""
  seq = list(range(1, text + 1))
  for kind, n in blocks:
    seq += [START] + [kind] * n + [END] + [7, 8]
  return seq


@pytest.mark.parametrize('case', ['image', 'two_images', 'video_then_image', 'left_padding', 'text_only', 'text_mask'])
def test_get_rope_index_matches_qwen2_vl(case):
  images, videos, mask = None, None, None
  if case == 'image':
    ids = np.array([_sequence([(IMG, 6)])])
    images = np.array([[1, 4, 6]])  # 2 x 3 after the 2 x 2 merge
  elif case == 'two_images':
    ids = np.array([_sequence([(IMG, 4), (IMG, 2)], text=3)])
    images = np.array([[1, 4, 4], [1, 2, 4]])
  elif case == 'video_then_image':
    ids = np.array([_sequence([(VID, 8), (IMG, 4)])])
    videos, images = np.array([[2, 4, 4]]), np.array([[1, 4, 4]])
  elif case == 'left_padding':
    a = _sequence([(IMG, 4)])
    b = _sequence([(IMG, 4)], text=5)
    ids = np.array([[0] * (len(b) - len(a)) + a, b])
    mask = (np.arange(len(b))[None] >= np.array([[len(b) - len(a)], [0]])).astype(np.int64)
    images = np.array([[1, 4, 4], [1, 4, 4]])
  elif case == 'text_only':
    ids = np.array([[5, 6, 7, 8]])
  else:
    ids = np.array([[0, 6, 7, 8], [5, 6, 7, 8]])
    mask = np.array([[0, 1, 1, 1], [1, 1, 1, 1]])
  ours, ours_delta = get_rope_index(
      ids, images, videos, mask, image_token_id=IMG, video_token_id=VID, vision_start_token_id=START
  )
  ref, ref_delta = ref_get_rope_index(ids, images, videos, mask)
  np.testing.assert_array_equal(ours, ref)
  np.testing.assert_array_equal(ours_delta, ref_delta)


def test_get_rope_index_hand_values():
  """Two text tokens, START, a 2 x 3 grid, END: the grid starts at 3, the text after it at 3 + 3 = 6."""
  ids = np.array([[1, 2, START] + [IMG] * 6 + [END]])
  pos, delta = get_rope_index(
      ids, np.array([[1, 4, 6]]), image_token_id=IMG, video_token_id=VID, vision_start_token_id=START
  )
  np.testing.assert_array_equal(pos[:, 0, :3], [[0, 1, 2]] * 3)
  np.testing.assert_array_equal(pos[1, 0, 3:9], [3, 3, 3, 4, 4, 4])  # rows
  np.testing.assert_array_equal(pos[2, 0, 3:9], [3, 4, 5, 3, 4, 5])  # columns
  np.testing.assert_array_equal(pos[0, 0, 3:9], [3] * 6)  # one frame
  assert pos[0, 0, 9] == 6 and delta[0, 0] == 7 - 10
