"""relpos_jax's grid encoders against timm itself: the 2-D rotaries (axial and mixed, RoPE-ViT's, as timm's
`build_rotary_pos_embed` and `RotaryEmbeddingMixed` compute them) and Swin v2's log-spaced coordinate table
(`gen_relative_log_coords`). Marker `reference`; skipped where torch or timm are missing. float32 on both sides:
rotations agree to 1e-5 at coordinates below 16, the log table to 1e-6."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax.grid.encoders.rope import RopeAxial, RopeMixed
from relpos_jax.grid.encoders.swin import SwinV2CPB

pytestmark = pytest.mark.reference
torch = pytest.importorskip('torch', reason='the reference tests need torch (pip install -e ".[reference]")')

H, W, HEADS, D = 5, 7, 2, 32


def _coordinates():
  rows, cols = np.meshgrid(np.arange(H), np.arange(W), indexing='ij')
  return np.stack([rows, cols], -1).reshape(1, H * W, 2)  # (row, column) per token, row-major: timm's token order


def _x():
  return np.random.default_rng(0).standard_normal((1, H * W, HEADS, D)).astype(np.float32)


def test_axial_rotary_equals_timm_build_rotary_pos_embed(timm_layers):
  """RoPE-Axial (theta = 100): timm's inverse-frequency bands at the 'xy' grid (x = column first), interleaved."""
  sincos = timm_layers('pos_embed_sincos')
  sin, cos = sincos.build_rotary_pos_embed([H, W], dim=D, in_pixels=False, temperature=100.0, grid_indexing='xy')
  x = _x()
  theirs = sincos.apply_rot_embed(torch.from_numpy(x).transpose(1, 2), sin, cos).transpose(1, 2).numpy()
  encoder = RopeAxial(axes=2)
  params = encoder.init(jax.random.PRNGKey(0), HEADS, head_dim=D)
  ours = encoder.rotate(params, jnp.asarray(x), jnp.asarray(_coordinates()))
  np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-5)


def test_mixed_rotary_equals_timm_get_mixed_freqs_given_the_same_frequencies(timm_layers):
  """RoPE-Mixed: per-head learned 2-D frequencies, x = column and y = row, from timm's own initialiser."""
  sincos = timm_layers('pos_embed_sincos')
  torch.manual_seed(0)
  freqs = sincos.init_random_2d_freqs(D, depth=1, num_heads=HEADS, temperature=10.0)[:, 0]  # (2, heads, D/2)
  t_x, t_y = sincos.get_mixed_grid([H, W], grid_indexing='xy')
  emb = sincos.get_mixed_freqs(freqs, t_x, t_y)  # (heads, N, 2 D)
  x = _x()
  theirs = sincos.apply_rot_embed_cat(torch.from_numpy(x).transpose(1, 2), emb).transpose(1, 2).numpy()
  encoder = RopeMixed(axes=2)
  params = encoder.init(jax.random.PRNGKey(0), HEADS, head_dim=D)
  # relpos_jax's initialiser draws frequencies of timm's shape and magnitudes (its own random angles).
  np.testing.assert_allclose(np.hypot(*np.asarray(params['freqs'])), np.hypot(*freqs.numpy()), rtol=1e-6)
  params = {**params, 'freqs': jnp.asarray(freqs.numpy())}
  ours = encoder.rotate(params, jnp.asarray(x), jnp.asarray(_coordinates()))
  np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-5)


@pytest.mark.parametrize('window, pretrained', [(8, 8), (12, 8)])
def test_swin_v2_log_coordinates_equal_timm(timm_layers, window, pretrained):
  """Swin v2's continuous position bias input: sign(t) log2(1 + |t|) / log2(8), t = 8 delta / (pretrained - 1)."""
  rel = timm_layers('pos_embed_rel')
  theirs = rel.gen_relative_log_coords((window, window), (pretrained, pretrained) if pretrained != window else (0, 0))
  d = np.arange(-(window - 1), window)
  delta = np.stack(np.meshgrid(d, d, indexing='ij'), -1)
  ours = SwinV2CPB(pretrained_window=pretrained).log_coordinates(jnp.asarray(delta))
  np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), atol=1e-6)
