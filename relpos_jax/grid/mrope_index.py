"""M-RoPE position ids of packed text + image / video sequences, as Qwen2-VL builds them.

Reference: huggingface/transformers models/qwen2_vl/modeling_qwen2_vl.py, `Qwen2VLModel.get_rope_index`. Each
sequence is text tokens, then a vision block (a `vision_start` token, then t h w / merge^2 image or video tokens),
then text, and so on. Text tokens get t = h = w = one running index (1-D RoPE); the tokens of a grid of
(t, h / merge, w / merge) get (frame, row, column) offset by the index where the grid starts, and the text after
it continues from the largest id of the grid + 1. So a 4 x 4 image after 3 text tokens takes ids 3..6 in h and
w and the text after it resumes at 7 (not at 3 + 16): the sequence's positions grow with the grid's side, not its
area. Padding (attention_mask 0) gets id 1, and `deltas` = (largest id + 1) - length per sequence (how far the
ids run behind the token count, used to continue decoding).

`get_videorope_index` builds VideoRoPE's ids (its diagonal layout and temporal spacing) on the same loop.

Host-side numpy, as in the reference (the ids depend on where the vision tokens are: data-dependent shapes). The
layer takes `np.moveaxis(ids, 0, -1)`, coordinates (batch, length, 3), with the `mrope` encoder.
"""

from __future__ import annotations

import numpy as np

from relpos_jax import validation


def _grids(who: str, field: str, value, merge: int) -> list:
  """The rows (t, h, w) of an image or video grid_thw, each checked: ints >= 1, h and w multiples of the merge
  (the reference's h // merge would drop a row of patches without a word)."""
  if value is None:
    return []
  grid = np.asarray(value)
  shaped = grid.ndim == 2 and grid.shape[1] == 3 and (grid.dtype.kind in 'iu' or grid.size == 0)
  validation.require(shaped, who, field, f'<{grid.dtype} {grid.shape}>', 'ints of shape (num_grids, 3): rows (t, h, w)')
  for i, row in enumerate(grid):
    t, h, w = (int(v) for v in row)
    validation.require(
        min(t, h, w) >= 1 and h % merge == 0 and w % merge == 0,
        who,
        f'{field}[{i}]',
        (t, h, w),
        f't, h, w >= 1, h and w multiples of spatial_merge_size={merge}',
    )
  return list(grid)


def _grid(thw, merge):
  t, h, w = (int(v) for v in thw)
  h, w = h // merge, w // merge
  ids = np.stack(np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing='ij')).reshape(3, -1)
  return ids, t * h * w


def get_rope_index(
    input_ids,
    image_grid_thw=None,
    video_grid_thw=None,
    attention_mask=None,
    *,
    spatial_merge_size: int = 2,
    image_token_id: int,
    video_token_id: int,
    vision_start_token_id: int,
):
  """(position_ids (3, batch, length) int64, deltas (batch, 1) int64) for token ids (batch, length)."""
  return _rope_index(
      'get_rope_index',
      input_ids,
      image_grid_thw,
      video_grid_thw,
      attention_mask,
      spatial_merge_size,
      image_token_id,
      video_token_id,
      vision_start_token_id,
      None,
  )


def get_videorope_index(
    input_ids,
    image_grid_thw=None,
    video_grid_thw=None,
    attention_mask=None,
    *,
    spatial_merge_size: int = 2,
    image_token_id: int,
    video_token_id: int,
    vision_start_token_id: int,
    scale_factor: float = 2.0,
):
  """VideoRoPE's ids (Wei et al. 2025; Wiselnn570/VideoRoPE videorope-transformer/modeling_videorope.py
  `get_t_scale_rope_index`, commit 7712ca3f): as `get_rope_index`, except that a vision grid starting at s (after
  its text) takes

      t = s + scale_factor * frame,     h = t + row - (H - 1) // 2,     w = t + column - (W - 1) // 2

  (the diagonal layout: the spatial ids centred on the frame's temporal id, so text and vision tokens advance
  along the diagonal t = h = w; the adjustable temporal spacing: frames scale_factor apart, 2 in the reference's
  training, `which_rope == 'videorope'`), and the text after it resumes at the largest t + 1 (not the largest of
  the three ids). Deltas likewise read t. Float64 ids (a fractional scale_factor gives fractional ids), for the
  `videorope` encoder: (position_ids (3, batch, length), deltas (batch, 1))."""
  scale = validation.number('get_videorope_index', 'scale_factor', scale_factor, above=0, at_most=2**10)
  return _rope_index(
      'get_videorope_index',
      input_ids,
      image_grid_thw,
      video_grid_thw,
      attention_mask,
      spatial_merge_size,
      image_token_id,
      video_token_id,
      vision_start_token_id,
      scale,
  )


def _rope_index(
    who,
    input_ids,
    image_grid_thw,
    video_grid_thw,
    attention_mask,
    spatial_merge_size,
    image_token_id,
    video_token_id,
    vision_start_token_id,
    scale,
):
  """The shared loop; `scale` None: Qwen2-VL's ids, else VideoRoPE's with that temporal spacing."""
  ids = np.asarray(input_ids)
  validation.require(
      ids.ndim == 2 and ids.dtype.kind in 'iu', who, 'input_ids', f'<{ids.dtype} {ids.shape}>', 'int (batch, length)'
  )
  merge = validation.positive_int(who, 'spatial_merge_size', spatial_merge_size)
  batch, length = ids.shape
  mask = np.ones_like(ids) if attention_mask is None else np.asarray(attention_mask)
  validation.require(mask.shape == ids.shape, who, 'attention_mask', f'<shape {mask.shape}>', f'shape {ids.shape}')
  if image_grid_thw is None and video_grid_thw is None:
    if attention_mask is None:
      pos = np.broadcast_to(np.arange(length), (3, batch, length)).astype(np.int64)
      return pos, np.zeros((batch, 1), np.int64)
    pos = np.cumsum(mask.astype(np.int64), -1) - 1
    pos = np.where(mask == 0, 1, pos)
    pos = np.broadcast_to(pos, (3, batch, length)).copy()
    return pos, pos.max(0).max(-1, keepdims=True) + 1 - length
  # Equal ids would make every block the video's (the dicts below are keyed by id): each token its own id.
  named = {'image_token_id': image_token_id, 'video_token_id': video_token_id}
  named['vision_start_token_id'] = vision_start_token_id
  for field, value in named.items():
    validation.require(validation.is_int(value), who, field, value, 'an int token id')
    others = [f for f, v in named.items() if f != field and v == value]
    validation.require(not others, who, field, value, f'an id of its own (it equals {", ".join(others)})')
  grids = {
      image_token_id: _grids(who, 'image_grid_thw', image_grid_thw, merge),
      video_token_id: _grids(who, 'video_grid_thw', video_grid_thw, merge),
  }
  names = {image_token_id: 'image', video_token_id: 'video'}
  used = {image_token_id: 0, video_token_id: 0}
  position_ids = np.ones((3, batch, length), np.int64 if scale is None else np.float64)
  deltas = []
  for b in range(batch):
    tokens = ids[b][mask[b] == 1]
    starts = np.flatnonzero(tokens[:-1] == vision_start_token_id)
    blocks = [int(tokens[s + 1]) for s in starts if tokens[s + 1] in (image_token_id, video_token_id)]
    pieces, cursor, next_id = [], 0, 0
    # Blocks are taken in order of where their first vision token is found, images and videos alike.
    remaining = {image_token_id: blocks.count(image_token_id), video_token_id: blocks.count(video_token_id)}
    for _ in range(len(blocks)):
      found = {}
      for kind in (image_token_id, video_token_id):
        hits = np.flatnonzero(tokens[cursor:] == kind)
        found[kind] = cursor + int(hits[0]) if remaining[kind] > 0 and hits.size else len(tokens) + 1
      kind = image_token_id if found[image_token_id] < found[video_token_id] else video_token_id
      end = found[kind]
      remaining[kind] -= 1
      if used[kind] >= len(grids[kind]):
        raise ValueError(f'{who}: more vision blocks of token {kind} than grids given ({len(grids[kind])}).')
      grid_ids, size = _grid(grids[kind][used[kind]], merge)
      run = int(np.argmax(np.append(tokens[end:], kind + 1) != kind))  # the block's tokens of its kind
      if run != size:  # fewer grid cells: the rest read as text; more: the text after read as the grid
        t, h, w = (int(v) for v in grids[kind][used[kind]])
        raise validation.invalid(
            who,
            f'{names[kind]}_grid_thw[{used[kind]}]',
            (t, h, w),
            f'a grid of as many cells as its block has {names[kind]} tokens: sequence {b} has {run} at token {end} '
            f'(after padding is removed), the grid {size} = {t} x {h // merge} x {w // merge} after the '
            f'{merge} x {merge} merge',
        )
      used[kind] += 1
      text = end - cursor
      pieces.append(np.broadcast_to(np.arange(text) + next_id, (3, text)))
      if scale is None:
        pieces.append(grid_ids + text + next_id)
        next_id = int(pieces[-1].max()) + 1
      else:  # VideoRoPE: frames scale apart, rows and columns centred on their frame's t (the diagonal layout)
        _, h, w = (int(v) for v in grids[kind][used[kind] - 1])
        h, w = h // merge, w // merge
        t = grid_ids[0] * scale + text + next_id
        pieces.append(np.stack([t, grid_ids[1] - (h - 1) // 2 + t, grid_ids[2] - (w - 1) // 2 + t]))
        next_id = float(pieces[-1][0].max()) + 1
      cursor = end + size
    if cursor < len(tokens):
      text = len(tokens) - cursor
      pieces.append(np.broadcast_to(np.arange(text) + next_id, (3, text)))
    ids_b = np.concatenate(pieces, axis=1)
    position_ids[:, b, mask[b] == 1] = ids_b
    if scale is None:
      deltas.append(int(ids_b.max()) + 1 - length)
    else:
      deltas.append(float(ids_b[0].max()) + 1 - length)
  for kind, given in grids.items():  # a grid no block used: the grids and the tokens disagree
    validation.require(
        used[kind] == len(given),
        who,
        f'{names[kind]}_grid_thw',
        f'<{len(given)} grids>',
        f'one grid per {names[kind]} block of input_ids ({used[kind]} blocks)',
    )
  return position_ids, np.asarray(deltas, np.int64 if scale is None else np.float64)[:, None]
