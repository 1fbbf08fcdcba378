"""A small Vision Transformer that takes any position encoder, 1-D or on the grid (relpos_jax.grid).

    model = ViT(encoder='irpe', num_classes=10, patch_size=2, in_channels=1, rngs=nnx.Rngs(0))
    logits = model(images)                                  # images (B, H, W, C) float -> (B, num_classes)
    logits, entropy = model(images, return_entropy=True)    # entropy (num_layers,): nats, per layer

Layout (Dosovitskiy et al. 2021, pre-norm): patches of p x p pixels flattened and projected (a linear patch
embedding, the same map as ViT's stride-p convolution), a learned class token first when pool='cls', the
absolute parts' embedding added when the encoder has one (sincos2d, or a 1-D absolute encoder), num_layers
pre-norm blocks (LayerNorm, `RelativeMultiHeadAttention`, MLP of mlp_ratio * model_dim), a final LayerNorm, then

    pool='mean'   the mean over the patch tokens -> Linear -> (B, num_classes)
    pool='cls'    the class token -> Linear -> (B, num_classes)
    pool='none'   every patch -> Linear -> (B, H/p, W/p, num_classes) (per-cell tasks)

Positions come from the image at call time, so any grid size runs with the same parameters (what the resolution
study asks): a grid encoder gets the patch grid (h, w) = (H/p, W/p) as `grid_shape` (its bias built from the
(2h - 1)(2w - 1) distinct offsets), or (1, h, w) for an encoder of 3 axes (M-RoPE: an image is one frame, t = 0,
as Qwen2-VL places it); the class token takes no position (grid.positions). A 1-D encoder (nope, rope, alibi,
...; relpos_jax.encoders) reads the raster index 0 .. N-1 of the tokens (the class token first): the usual
"1-D RoPE over flattened patches" baseline. `encoder` is a spec string (grid specs first, then 1-D ones) or an
Encoder; a per-layer pattern '(rope_axial, rope_axial, alibi2d)' repeats over the layers as in the 1-D models.

Attention entropy (`return_entropy`): per layer, the mean over batch, heads and queries of -sum_j a_ij log a_ij
of the attention distribution (nats), rebuilt explicitly by `RelativeMultiHeadAttention.attention_weights`
(rotary, scalar-bias and position-free encoders; others are refused by name when asked). The model has no
dropout: `train=True` changes only an encoder that augments its coordinates in training (grid augment_coords,
DINOv3's shift / jitter / rescale; randomize_coords, Ruoss et al.'s positions drawn from a larger grid), which then
needs `rng` (one draw per call, shared by the layers). An absolute table with `resize` (learned2d, sincos2d;
relpos_jax.grid.resize) is resized to the patch grid it meets (`embed_grid`), as ViTs are at a new resolution.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from relpos_jax import grid, validation
from relpos_jax.encoders import contract, spec as spec_1d
from relpos_jax.nn import attention as attention_lib
from relpos_jax.nn import blocks, call, terms

POOLS = ('mean', 'cls', 'none')
# Every width (model_dim, the MLP's hidden width mlp_ratio x model_dim, heads, classes, patch pixels) is at most
# 2^16 (ViT-22B's widest, its MLP, is 24,576), and the blocks' parameters at most 2^36 (ViT-22B: 2.2e10): what
# passes can still be too large for a device, which a study checks with its memory estimate.
MAX_WIDTH = 2**16
MAX_PARAMETERS = 2**36


def resolve_encoder(encoder) -> contract.Encoder:
  """An Encoder as it is; a spec string as a grid spec (relpos_jax.grid) if it names grid encoders, else a 1-D one."""

  if isinstance(encoder, contract.Encoder):
    return encoder
  validation.require(isinstance(encoder, str), 'ViT', 'encoder', encoder, 'a spec string or an Encoder')
  try:
    return grid.from_spec(encoder)
  except ValueError as grid_error:
    try:
      return spec_1d.from_spec(encoder)
    except ValueError as one_d_error:
      raise validation.invalid(
          'ViT',
          'encoder',
          encoder,
          f'a grid encoder spec ({", ".join(grid.names())}) or a 1-D one; as a grid spec: {grid_error} As a 1-D '
          f'spec: {one_d_error}',
      ) from None


def resolve_layers(encoder, num_layers: int) -> tuple:
  items = spec_1d.layer_specs(encoder) if isinstance(encoder, str) else None
  if isinstance(encoder, (tuple, list)):
    items = tuple(encoder)
  if items is None:
    return (resolve_encoder(encoder),) * num_layers
  validation.require(
      0 < len(items) <= num_layers,
      'ViT',
      'encoder',
      encoder,
      f'one encoder per layer, or a shorter pattern repeated over them (at most num_layers={num_layers})',
  )
  resolved = [resolve_encoder(item) for item in items]
  return tuple(resolved[i % len(resolved)] for i in range(num_layers))


def _grid_axes(encoder) -> int | None:
  """The coordinates' axes a layer's encoder reads (2 or 3), or None for 1-D / position-free encoders."""

  axes = {terms.select.coordinate_axes(leaf) for leaf in contract.leaves(encoder)} - {None}
  validation.require(len(axes) <= 1, 'ViT', 'encoder', encoder, 'grid parts of one number of axes')
  return axes.pop() if axes else None


class ViT(nnx.Module):
  """See the module docstring."""

  def __init__(
      self,
      *,
      encoder,
      num_classes: int,
      patch_size: int = 1,
      in_channels: int = 1,
      model_dim: int = 64,
      num_heads: int = 4,
      num_layers: int = 2,
      mlp_ratio: int = 4,
      pool: str = 'mean',
      rngs: nnx.Rngs,
  ):
    who = 'ViT'
    for field, value in dict(
        num_classes=num_classes,
        patch_size=patch_size,
        in_channels=in_channels,
        model_dim=model_dim,
        num_heads=num_heads,
        num_layers=num_layers,
        mlp_ratio=mlp_ratio,
    ).items():
      validation.positive_int(who, field, value, maximum=MAX_WIDTH)
    # Each width alone is bounded above; their products are what allocates: the MLP's hidden width (model_dim
    # 2^14 x mlp_ratio 2^14 passed every bound and allocated without end) and the blocks' parameters.
    validation.require(
        mlp_ratio * model_dim <= MAX_WIDTH,
        who,
        'mlp_ratio',
        mlp_ratio,
        f'mlp_ratio * model_dim (the MLP hidden width) <= {MAX_WIDTH}; with model_dim={model_dim}: mlp_ratio <= '
        f'{max(1, MAX_WIDTH // model_dim)}',
        depends_on=('model_dim',),
    )
    block_params = num_layers * (4 * model_dim * model_dim + 2 * mlp_ratio * model_dim * model_dim)
    validation.require(
        block_params <= MAX_PARAMETERS,
        who,
        'num_layers',
        num_layers,
        f'blocks of at most {MAX_PARAMETERS:,} parameters (num_layers x (4 + 2 mlp_ratio) x model_dim^2 = '
        f'{block_params:,} here; ViT-22B has 2.2e10)',
        depends_on=('model_dim', 'mlp_ratio'),
    )
    validation.head_dim(who, model_dim, num_heads)
    validation.choice(who, 'pool', pool, POOLS)
    self.layer_encoders = resolve_layers(encoder, num_layers)
    contract.check_model_encoders(who, 'encoder', encoder, self.layer_encoders, causal=False)
    for e in self.layer_encoders:
      grid.check_augmentation(who, e)
    self.patch_size, self.in_channels, self.model_dim, self.pool = patch_size, in_channels, model_dim, pool
    self.num_classes, self.num_layers = num_classes, num_layers
    self.layer_axes = tuple(_grid_axes(e) for e in self.layer_encoders)
    linear = dict(param_dtype=jnp.float32, rngs=rngs)
    self.patch_embed = nnx.Linear(patch_size * patch_size * in_channels, model_dim, **linear)
    self.cls_token = (
        nnx.Param(0.02 * jax.random.truncated_normal(rngs.params(), -2, 2, (1, 1, model_dim)))
        if (pool == 'cls')
        else None
    )
    # The absolute parts (x + p_i) of the first layer's encoder, added once at the input, as the 1-D models do.
    self.input_parts = terms.parts.input_parts(self.layer_encoders[0])
    self.input_params = nnx.List(
        [
            attention_lib.as_variables(p)
            for p in terms.parts.init_params(
                self.input_parts,
                rngs.params(),
                num_heads=num_heads,
                head_dim=model_dim // num_heads,
                model_dim=model_dim,
            )
        ]
    )
    self.blocks = nnx.List(
        [
            blocks.TransformerBlock(
                model_dim,
                num_heads,
                e,
                mlp_hidden_dim=mlp_ratio * model_dim,
                causal=False,
                norm='layernorm',
                model_adds_absolute=True,
                rngs=rngs,
            )
            for e in self.layer_encoders
        ]
    )
    self.norm = blocks.make_norm('layernorm', model_dim, rngs)
    self.head = nnx.Linear(model_dim, num_classes, **linear)

  def _patches(self, images):
    who, p = 'ViT', self.patch_size
    shape = tuple(np.shape(images))
    ok = len(shape) == 4 and shape[-1] == self.in_channels and min(shape) > 0
    validation.require(ok, who, 'images', f'<shape {shape}>', f'float (batch, H, W, in_channels={self.in_channels})')
    validation.require(
        shape[1] % p == 0 and shape[2] % p == 0,
        who,
        'images',
        f'<shape {shape}>',
        f'H and W multiples of patch_size={p}',
    )
    images = jnp.asarray(images, jnp.float32)
    b, h, w = shape[0], shape[1] // p, shape[2] // p
    x = images.reshape(b, h, p, w, p, self.in_channels).transpose(0, 1, 3, 2, 4, 5).reshape(b, h * w, -1)
    return self.patch_embed(x), (h, w)

  def _layer_positions(self, axes, grid_hw):
    """A layer's positions: the patch grid (`call.Grid`), or None for a 1-D / position-free encoder."""
    if axes is None:
      return None
    shape = grid_hw if axes == 2 else (1,) + grid_hw
    return call.Grid(shape, self.pool == 'cls')

  def _train_positions(self, encoder, axes, grid_hw, b, rng):
    """A layer's positions in training when its encoder augments coordinates (grid augment_coords): the grid's
    coordinates, augmented with `rng` (the same key for every layer: one draw shared by the model)."""
    shape = grid_hw if axes == 2 else (1,) + grid_hw
    grid.check_train_grid(encoder, shape)  # randomize_coords: its draw range covers the grid (refused by name)
    coords = grid.train_coordinates(encoder, rng, grid.grid_positions(shape, class_token=self.pool == 'cls'))
    return call.Coordinates(jnp.broadcast_to(coords, (b,) + coords.shape))

  def __call__(self, images, *, train: bool = False, rng=None, return_entropy: bool = False):
    # No dropout in this model: `train` only moves the coordinates of an encoder that augments them in training
    # (grid augment_coords, DINOv3's), drawn with `rng`; evaluation (train=False) reads the clean grid.
    augmenting = [grid.augments(e) for e in self.layer_encoders] if train else [False] * self.num_layers
    validation.require(
        not any(augmenting) or rng is not None,
        'ViT',
        'rng',
        rng,
        'a jax.random key when train=True and the encoder augments coordinates (augment_coords): the draw needs it',
    )
    x, grid_hw = self._patches(images)
    b, n = x.shape[:2]
    cls = self.pool == 'cls'
    if self.input_parts:

      params = [attention_lib.variable_values(p) for p in self.input_params]
      emb = 0.0
      for part, p in zip(self.input_parts, params):
        if terms.select.coordinate_axes(part) is not None:
          shape = grid_hw if part.axes == 2 else (1,) + grid_hw
          part.check_grid(shape)  # a learned table refuses a grid beyond it (unless it is resized to it)
          if not augmenting[0]:  # the grid's embedding: a table with `resize` is resized to the grid here
            emb = emb + jnp.asarray(part.embed_grid(p, shape, class_token=cls), jnp.float32)
            continue
          grid.check_train_grid(self.layer_encoders[0], shape)
          coords = grid.train_coordinates(self.layer_encoders[0], rng, grid.grid_positions(shape, class_token=cls))
        else:
          part.check_positions(n + int(cls))  # a learned 1-D table refuses a grid with more tokens than it has
          coords = jnp.arange(n + int(cls), dtype=jnp.int32)
        emb = emb + jnp.asarray(part.embed(p, coords), jnp.float32)
      if cls:
        x = jnp.concatenate([jnp.broadcast_to(self.cls_token[...], (b, 1, self.model_dim)), x], axis=1)
      x = x + emb
    elif cls:
      x = jnp.concatenate([jnp.broadcast_to(self.cls_token[...], (b, 1, self.model_dim)), x], axis=1)
    entropies = []
    for block, axes, encoder, moved in zip(self.blocks, self.layer_axes, self.layer_encoders, augmenting):
      where = self._train_positions(encoder, axes, grid_hw, b, rng) if moved else self._layer_positions(axes, grid_hw)
      if return_entropy:
        w = block.attention_weights(x, positions=where)
        entropies.append(jnp.mean(-jnp.sum(w * jnp.log(jnp.maximum(w, 1e-30)), axis=-1)))
      x = block(x, positions=where)
    x = self.norm(x)
    if self.pool == 'cls':
      logits = self.head(x[:, 0])
    elif self.pool == 'mean':
      logits = self.head(jnp.mean(x, axis=1))
    else:
      logits = self.head(x).reshape(b, grid_hw[0], grid_hw[1], self.num_classes)
    if return_entropy:
      return logits, jnp.stack(entropies)
    return logits


_NO_DECAY = ('position_params', 'input_params', 'cls_token')


def weight_decay_mask(params):
  """For `optax.adamw(..., mask=weight_decay_mask)` on a ViT's params: True for the matrices to decay (ndim >= 2,
  the package's rule, relpos_jax.train.optim), False for the position encoders' parameters (RoPE-Mixed's
  frequencies, iRPE's and Swin's tables, the CPB MLP), the absolute embedding and the class token, which rope-vit
  excludes from weight decay (`no_weight_decay`: 'pos_embed', 'cls_token', 'freqs')."""

  def decide(path, leaf):
    name = jax.tree_util.keystr(path)
    return bool(jnp.ndim(leaf) >= 2 and not any(key in name for key in _NO_DECAY))

  return jax.tree_util.tree_map_with_path(decide, params)
