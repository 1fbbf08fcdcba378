"""Positions on a grid: relative (and absolute) encodings in 2-D and 3-D, in the 1-D package's functional API.

    from relpos_jax import grid
    coords = grid.grid_positions((7, 7), class_token=True)        # (50, 2) int32, raster order
    enc = grid.from_spec("irpe(method='product')")                 # or grid.make('alibi2d'), ...
    params = enc.init(jax.random.key(0), num_heads=4, head_dim=16, model_dim=64)
    bias = grid.grid_bias_matrix(enc, params, (7, 7))              # (4, 49, 49) from (2*7-1)^2 offsets

Offsets are delta = p_i - p_j (query minus key) per axis, as the grid references write them (positions.py).
The attention layer takes coordinates (batch, length, axes) or a static `grid_shape` (relpos_jax.nn.attention);
`relpos_jax.nn.vit.ViT` builds them from an image's patch grid. Families (relpos_jax/grid/encoders):

  distance2d     -slope_h * |delta|_1 or |delta|_2 (the lecture's relative distance on a grid)
  shaw2d         Shaw's clipped table per axis, summed
  irpe           iRPE (Wu et al. 2021): piecewise index, methods euclidean / quant / cross / product; bias mode, and
                 contextual mode on keys / queries / values (kind VECTOR_RELATIVE, per tile on the blockwise path)
  swin           Swin v1's learned (2M - 1)^2 table (refuses grids beyond its window)
  swin_v2_cpb    Swin v2's continuous position bias (MLP on log-spaced offsets, 16 sigmoid)
  alibi2d        -m_h |delta|_2 with ALiBi's slopes (CROMA's 2D-ALiBi)
  kerple2d       -r1_h log(1 + r2_h |delta|_2) (KERPLE's log kernel on the Euclidean distance)
  augment_coords DINOv3's coordinate augmentation in training (shift, jitter, rescale) around any of them
  randomize_coords  Ruoss et al.'s randomized positions per axis in training (coordinates drawn from a larger grid)
  fire2d         FIRE's MLP on psi(|delta|_2) / psi(max(|p_i|_2, L)) (query-dependent)
  lookhere       LookHere (Fuller et al. 2024): each head masked outside a 2-D direction cone, distance penalty inside
  pape           PaPE (Øhrstrøm et al. 2026): sum_m -a_i (w_m . delta)^2 + b_i (w_m . delta), a_i, b_i from the query's
                 content (a content term, kind VECTOR_RELATIVE); pape_ri: -a_i s_h^2 |delta|_2^2 (rotation invariant)
  rope_axial     rope-vit's axial RoPE (frequency pairs split across the axes)
  rope_mixed     rope-vit's RoPE-Mixed (learned 2-D frequencies per head, per layer)
  string         STRING (Schenck et al. 2025): R(r) = P^T RoPE(r) P, P orthogonal and learned (Cayley or expm)
  mrope          Qwen2-VL's M-RoPE (chunked sections) or Qwen3-VL's interleaved layout
  videorope      VideoRoPE (Wei et al. 2025): M-RoPE's (t, h, w) with t on the lowest frequencies, h / w interleaved
  sincos2d       MAE's fixed 2-D sin-cos absolute embedding (not relative)
  learned2d      ViT's learned absolute embedding, a table of max_size^2 rows (refuses larger grids; with
                 resize=bicubic it is resized to the grid, as is sincos2d(resize=bicubic, size=n) and swin's table:
                 relpos_jax.grid.resize)

`mrope_index.get_rope_index` builds the (t, h, w) ids of packed text + image / video sequences as Qwen2-VL does;
`mrope_index.get_videorope_index` VideoRoPE's (diagonal layout, frames scale_factor apart).
"""

from relpos_jax.grid.checks import assert_block_toeplitz
from relpos_jax.grid.contract import GridAbsoluteEncoder, GridBiasEncoder, GridRotaryEncoder, is_grid
from relpos_jax.grid.matrices import grid_bias_at_positions, grid_bias_matrix, grid_bias_table
from relpos_jax.grid.positions import (
    CLASS_TOKEN,
    block_toeplitz,
    block_toeplitz_index,
    check_coordinates,
    distinct_offsets,
    grid_positions,
    is_class_token,
    offsets,
)
from relpos_jax.grid.registry import from_spec, make, names, to_spec
from relpos_jax.grid import encoders  # noqa: E402,F401  (registers the families)
from relpos_jax.grid.encoders.augment import augments, check_augmentation, check_train_grid, train_coordinates
