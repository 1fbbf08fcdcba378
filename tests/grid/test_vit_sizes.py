"""The ViT's size arguments: each width is bounded, and so are the products that allocate (issue 53)."""

from __future__ import annotations

import pytest
from flax import nnx

from relpos_jax import validation
from relpos_jax.nn import vit


def _vit(**sizes):
  return vit.ViT(encoder='nope', num_classes=2, rngs=nnx.Rngs(0), **sizes)


@pytest.mark.parametrize(
    'sizes, message',
    [
        # Each under 2^16 alone; the MLP's hidden width 2^28 allocated without end.
        (dict(model_dim=2**14, num_heads=1, mlp_ratio=2**14), r'ViT: mlp_ratio=16384 is invalid; allowed: mlp_ratio \* '
         r'model_dim \(the MLP hidden width\) <= 65536; with model_dim=16384: mlp_ratio <= 4'),
        # Widths that pass, blocks of 2^16 layers x 12 x 2^24 parameters (1.3e13).
        (dict(model_dim=2**12, num_heads=1, mlp_ratio=4, num_layers=2**16), r'ViT: num_layers=65536 is invalid; '
         r'allowed: blocks of at most 68,719,476,736 parameters .*13,194,139,533,312 here'),
    ],
)  # fmt: skip
def test_the_products_of_the_widths_are_bounded_before_anything_is_allocated(sizes, message):
  with pytest.raises(validation.InvalidValue, match=message):
    nnx.eval_shape(lambda: _vit(**sizes))


def test_a_hidden_width_at_the_bound_builds():
  import jax

  model = nnx.eval_shape(lambda: _vit(model_dim=2**14, num_heads=2**6, mlp_ratio=4))
  shapes = [x.shape for x in jax.tree.leaves(nnx.state(model, nnx.Param))]
  assert (2**14, 2**16) in shapes and (2**16, 2**14) in shapes  # the MLP at the bound, 2^16 wide
