"""M-RoPE position ids of mixed text, image and video sequences against transformers' `Qwen2VLModel.get_rope_index`.

Which rule relpos_jax follows: the original Qwen2-VL code's (relpos_jax.grid.mrope_index), where the text after a
vision block resumes at the block's largest id + 1. transformers 5.x resumes at start + max(h, w) / merge instead;
the two agree on every image (t = 1) and on every video with no more temporal patches than spatial ones per side,
which the first test compares against transformers itself; the second pins where they part (a video with t > h / 2,
w / 2) and says which value each gives. Padding is left out: transformers 5.x gives padded tokens id 0, the original
code (and relpos_jax) 1.
"""

import functools
import types

import numpy as np
import pytest

from relpos_jax.grid.mrope_index import get_rope_index

pytestmark = pytest.mark.reference
torch = pytest.importorskip('torch', reason='the reference tests need torch (pip install -e ".[reference]")')
pytest.importorskip('transformers', reason='the reference tests need transformers (pip install -e ".[reference]")')
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel  # noqa: E402

# Qwen2-VL's token ids (its config.json) and spatial merge.
IMAGE, VIDEO, START, END, MERGE = 151655, 151656, 151652, 151653, 2
TEXT = 7


def _sequence(pieces):
  """pieces: ints (that many text tokens) or ('image' | 'video', (t, h, w)) -> ids, token types, grids."""
  ids, kinds, grids = [], [], {IMAGE: [], VIDEO: []}
  for piece in pieces:
    if isinstance(piece, int):
      ids += [TEXT] * piece
      kinds += [0] * piece
      continue
    kind, thw = piece
    token = IMAGE if kind == 'image' else VIDEO
    n = thw[0] * thw[1] * thw[2] // MERGE**2
    ids += [START] + [token] * n + [END]
    kinds += [0] + [1 if kind == 'image' else 2] * n + [0]
    grids[token].append(thw)
  return np.array([ids]), np.array([kinds]), grids


def _transformers(ids, kinds, grids):
  model = types.SimpleNamespace(
      config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=MERGE))
  )
  model.get_vision_position_ids = functools.partial(Qwen2VLModel.get_vision_position_ids, model)
  as_grid = lambda g: torch.tensor(g) if g else None  # noqa: E731
  position_ids, deltas = Qwen2VLModel.get_rope_index(
      model, torch.from_numpy(ids), torch.from_numpy(kinds), as_grid(grids[IMAGE]), as_grid(grids[VIDEO])
  )
  return position_ids.numpy(), deltas.numpy()


def _ours(ids, grids):
  return get_rope_index(
      ids,
      np.array(grids[IMAGE]) if grids[IMAGE] else None,
      np.array(grids[VIDEO]) if grids[VIDEO] else None,
      spatial_merge_size=MERGE,
      image_token_id=IMAGE,
      video_token_id=VIDEO,
      vision_start_token_id=START,
  )


@pytest.mark.parametrize(
    'pieces',
    [
        [3, ('image', (1, 8, 12)), 5],
        [2, ('image', (1, 4, 4)), 1, ('video', (2, 8, 8)), 4, ('image', (1, 12, 6)), 2],
        [('video', (3, 8, 6)), 6],  # t = 3 <= max(h, w) / 2 = 4
    ],
)
def test_position_ids_equal_transformers_where_the_two_rules_agree(pieces):
  ids, kinds, grids = _sequence(pieces)
  theirs, their_deltas = _transformers(ids, kinds, grids)
  ours, our_deltas = _ours(ids, grids)
  np.testing.assert_array_equal(ours, theirs)
  np.testing.assert_array_equal(our_deltas, their_deltas)


def test_a_video_longer_than_wide_is_where_the_rules_part():
  """6 frames of 2 x 2 merged patches after 1 text token (the vision_start): the original continues at 1 + 6."""
  ids, kinds, grids = _sequence([('video', (6, 4, 4)), 1])
  theirs, _ = _transformers(ids, kinds, grids)
  ours, _ = _ours(ids, grids)
  np.testing.assert_array_equal(ours[:, 0, :-2], theirs[:, 0, :-2])  # the vision block itself agrees
  assert ours[0, 0, -2] == 1 + 6  # vision_end: the block's largest id (t = 1 + 5) + 1, Qwen2-VL's original code
  assert theirs[0, 0, -2] == 1 + 4 // MERGE  # transformers 5.x: start + max(h, w) / merge
