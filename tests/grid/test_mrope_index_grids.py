"""get_rope_index (and get_videorope_index, the same loop) checks its grids against the tokens instead of trusting
them: a grid of fewer cells than its block's image tokens gave the rest text positions, zero or negative sides
ended in numpy errors, equal image and video token ids read every block with the video grids. Each is refused,
naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from relpos_jax import validation
from relpos_jax.grid.mrope_index import get_rope_index, get_videorope_index

TEXT, START, END, IMG, VID = 1, 90, 91, 92, 93
IDS = dict(image_token_id=IMG, video_token_id=VID, vision_start_token_id=START)


def _ids(*blocks):
  """Two text tokens, then per block [START, kind * n, END, TEXT] (batch of one)."""
  seq = [TEXT, TEXT]
  for kind, n in blocks:
    seq += [START] + [kind] * n + [END, TEXT]
  return np.array([seq])


@pytest.mark.parametrize('index_fn', [get_rope_index, get_videorope_index])
@pytest.mark.parametrize(
    'blocks, images, message',
    [
        # 8 image tokens, a 2 x 2 grid (4 cells): the last 4 were read as text
        ([(IMG, 8)], [[1, 4, 4]], r'image_grid_thw\[0\]=\(1, 4, 4\) is invalid; .*sequence 0 has 8 at token 3'),
        # 4 image tokens, a 2 x 4 grid (8 cells): END, TEXT and more read as the grid
        (
            [(IMG, 4)],
            [[1, 4, 8]],
            r'image_grid_thw\[0\]=\(1, 4, 8\) is invalid; .*has 4 at token 3 .* grid 8 = 1 x 2 x 4',
        ),
        ([(IMG, 4)], [[1, 0, 4]], r'image_grid_thw\[0\]=\(1, 0, 4\) is invalid; allowed: t, h, w >= 1'),
        ([(IMG, 4)], [[-1, 4, 4]], r'image_grid_thw\[0\]=\(-1, 4, 4\) is invalid'),
        ([(IMG, 4)], [[1, 3, 4]], r'image_grid_thw\[0\]=\(1, 3, 4\) is invalid; .*multiples of spatial_merge_size=2'),
        ([(IMG, 4)], [[1.0, 4.0, 4.0]], r"image_grid_thw='<float64 \(1, 3\)>' is invalid; allowed: ints of shape"),
        (
            [(IMG, 4)],
            [[1, 4, 4], [1, 4, 4]],
            r"image_grid_thw='<2 grids>' is invalid; allowed: one grid per image block",
        ),
    ],
)
def test_grids_that_disagree_with_the_tokens_are_refused(index_fn, blocks, images, message):
  with pytest.raises(validation.InvalidValue, match=message):
    index_fn(_ids(*blocks), np.array(images), **IDS)


def test_token_ids_must_differ():
  """With image_token_id == video_token_id every block took the video grids."""
  ids = _ids((IMG, 4))
  with pytest.raises(
      validation.InvalidValue,
      match=r'image_token_id=92 is invalid; allowed: an id of its own \(it equals video_token_id\)',
  ):
    get_rope_index(
        ids,
        np.array([[1, 4, 4]]),
        np.array([[1, 4, 8]]),
        image_token_id=IMG,
        video_token_id=IMG,
        vision_start_token_id=START,
    )
  with pytest.raises(validation.InvalidValue, match=r'image_token_id=92 is invalid; .*it equals vision_start_token_id'):
    get_rope_index(ids, np.array([[1, 4, 4]]), image_token_id=IMG, video_token_id=VID, vision_start_token_id=IMG)
  with pytest.raises(validation.InvalidValue, match=r'image_token_id=True is invalid; allowed: an int token id'):
    get_rope_index(ids, np.array([[1, 4, 4]]), image_token_id=True, video_token_id=VID, vision_start_token_id=START)


def test_grids_that_match_give_the_grid_positions():
  pos, _ = get_rope_index(_ids((IMG, 4), (VID, 8)), np.array([[1, 4, 4]]), np.array([[2, 4, 4]]), **IDS)
  np.testing.assert_array_equal(pos[1, 0, 3:7], [3, 3, 4, 4])  # the image's rows
  # END, TEXT, START take 5..7 and the video's two frames start at 8
  np.testing.assert_array_equal(pos[0, 0, 10:18], [8] * 4 + [9] * 4)
