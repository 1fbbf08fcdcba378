"""A Linen twin of `RelativeMultiHeadAttention`, for Linen models (t5x, big_vision style).

    from relpos_jax.nn import linen as relpos_linen

    class Block(nn.Module):
      @nn.compact
      def __call__(self, x):
        return x + relpos_linen.RelativeMultiHeadAttention(num_heads=4, encoder=encoders.make('t5'))(x)

It is built on the same pure functions as the NNX layer (`terms.parts`, `functional.attend`), so given
the same weights the two agree; `params_from_nnx(layer)` converts an NNX layer's weights into this
module's params. Params are a plain Linen tree:

    query/kernel, key/kernel, value/kernel   (model_dim, H * D)
    out/kernel                               (H * D, model_dim)
    position_<i>/<path>                      the learnable arrays of attention part i, flat by path
                                             (e.g. position_0/table); parameter-free parts have none

Encoder params are stored flat (no static `Dims` node inside Linen collections, which keeps them friendly
to any checkpointer) and rebuilt around the part's own params structure at call time.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.nn import attention as attention_lib
from relpos_jax.nn import call, functional, terms


def _path_name(path) -> str:
  names = []
  for entry in path:
    for attribute in ('key', 'idx', 'name'):
      if hasattr(entry, attribute):
        names.append(str(getattr(entry, attribute)))
        break
    else:
      names.append(str(entry))
  return '/'.join(names)


def flatten_params(params) -> dict[str, jax.Array]:
  """An encoder's params pytree -> {path: array} (the Dims node has no leaves and disappears)."""
  return {_path_name(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]}


def unflatten_params(like, flat: dict[str, jax.Array]):
  """The inverse of `flatten_params`, around the structure of `like` (e.g. from jax.eval_shape)."""
  paths_and_leaves, treedef = jax.tree_util.tree_flatten_with_path(like)
  return jax.tree_util.tree_unflatten(treedef, [flat[_path_name(path)] for path, _ in paths_and_leaves])


class RelativeMultiHeadAttention(nn.Module):
  """Linen multi-head self-attention with any encoder; same arguments and semantics as the NNX layer.

  Attributes: num_heads, encoder, head_dim (None: model_dim // num_heads, model_dim read from the input),
  causal, dtype ('float32' | 'bfloat16'), implementation (None | 'xla' | 'cudnn' | 'einsum' | 'blockwise'),
  block_size (the tiles of 'blockwise'), debug_checks. Grid encoders (relpos_jax.grid) take coordinates
  (B, L, axes) or a static grid_shape, as the NNX layer does (`__call__`).
  """

  num_heads: int
  encoder: contract.Encoder
  head_dim: int | None = None
  causal: bool = False
  dtype: Any = 'float32'
  implementation: str | None = None
  block_size: Any = None
  debug_checks: bool = False
  window: int | None = None  # Sliding-window local attention (None: global), as the NNX layer's.

  def _part_params(self, index: int, part, model_dim: int, head_dim: int):
    init = functools.partial(part.init, num_heads=self.num_heads, head_dim=head_dim, model_dim=model_dim)
    like = jax.eval_shape(init, jax.random.key(0))
    if not jax.tree_util.tree_leaves(like):
      return init(jax.random.key(0))  # Nothing to learn: only the static Dims.
    flat = self.param(f'position_{index}', lambda rng: flatten_params(init(rng)))
    return unflatten_params(like, flat)

  @nn.compact
  def __call__(
      self,
      x: jax.Array,
      *,
      positions: jax.Array | None = None,
      padding_mask: jax.Array | None = None,
      position_bias: jax.Array | None = None,
      segment_ids: jax.Array | None = None,
      grid_shape=None,
      class_token: bool = False,
  ) -> jax.Array:
    """x (B, L, model_dim) -> (B, L, model_dim); positions (B, L) int or None; padding_mask (B, L) bool;
    segment_ids (B, L) int document ids of packed sequences (a token attends to its own document only).

    Grid encoders (relpos_jax.grid) read coordinates instead, as the NNX layer's: positions (B, L, axes), int or
    float, or a static `grid_shape` (H, W) / (T, H, W) (the tokens are that grid in raster order, after a class
    token first when `class_token`). Both layers build their inputs with `attention.self_attention_inputs`, 1-D or
    grid alike (the grid parts are Terms chosen by `terms.select`), and attend with `functional.attend`: the same
    outputs and the same refusals, by name."""
    who = 'linen.RelativeMultiHeadAttention'
    validation.shaped(who, 'x', x, ('batch', 'length', 'model_dim'))  # model_dim is read from x
    dtype = attention_lib.canonical_dtype(self.dtype)
    b, length, model_dim = x.shape
    num_heads = validation.positive_int(who, 'num_heads', self.num_heads)
    head_dim = validation.head_dim(who, model_dim, num_heads, self.head_dim)
    terms.parts.check_causal(who, self.encoder, validation.boolean(who, 'causal', self.causal))
    settings = call.AttentionSettings.checked(
        self.implementation, self.block_size, self.window, self.causal, self.debug_checks, dtype
    )
    parts = terms.parts.attention_parts(self.encoder)
    dense = functools.partial(nn.Dense, use_bias=False, dtype=dtype, param_dtype=jnp.float32)
    inner = self.num_heads * head_dim
    get_params = lambda: [self._part_params(i, part, model_dim, head_dim) for i, part in enumerate(parts)]
    project = lambda x: tuple(
        attention_lib.split_heads(dense(inner, name=name)(x), self.num_heads) for name in ('query', 'key', 'value')
    )
    if segment_ids is not None:
      segment_ids = validation.positions(who, segment_ids, (b, length), 'segment_ids')
    where = call.position_value(who, positions, grid_shape, class_token, segment_ids)
    layer = attention_lib.Layer(who, self.encoder, parts, get_params, project)
    inputs, params = attention_lib.self_attention_inputs(layer, x, where, padding_mask, position_bias, settings)
    out = functional.attend(inputs, parts, params, settings)
    return dense(model_dim, name='out')(attention_lib.merge_heads(out).astype(dtype))


def params_from_nnx(layer: attention_lib.RelativeMultiHeadAttention) -> dict:
  """The Linen twin's params holding the weights of an NNX `RelativeMultiHeadAttention` (which must own
  its position params). Use as `twin.apply({'params': params_from_nnx(layer)}, x)`."""
  if layer.position_params is None:
    raise ValueError(
        'params_from_nnx: the layer does not own its position params (own_position_params=False); '
        'its model holds them.'
    )
  params = {name: {'kernel': getattr(layer, name).kernel[...]} for name in ('query', 'key', 'value', 'out')}
  for i, part_params in enumerate(layer.position_params):
    flat = flatten_params(attention_lib.variable_values(part_params))
    if flat:
      params[f'position_{i}'] = flat
  return params
