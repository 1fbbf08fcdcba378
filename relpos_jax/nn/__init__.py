"""Flax layers and models that take any relpos_jax encoder.

RelativeMultiHeadAttention   NNX attention dispatching on encoder kind (attention.py)
jit_decode                   compiled cached decoding of a layer or DecoderLM, the cache room checked first
DecoderLM, BidirectionalModel      NNX transformers configured by ModelConfig (models.py)
attend, attention_mask       the pure attention core shared with the Linen twin (functional.py):
                             attend(AttentionInputs, parts, params, AttentionSettings)
AttentionInputs, AttentionSettings, Positions, Grid, Coordinates
                             what one attention call takes, as values, each checked where built (call.py)
terms                        the Terms: what each kind of part contributes to attention, chosen per kind in
                             one place (terms.select); terms.parts: what the layer asks of its parts
skew                         the vector-relative table kernels (rows to evaluate, skew gather, custom VJPs)
ViT                          a small Vision Transformer over any encoder, 1-D or on the grid (vit.py)
linen                        the Linen twin of the layer, for t5x / big_vision style models (import
                             relpos_jax.nn.linen)
"""

from __future__ import annotations

from relpos_jax.nn import call, skew, terms
from relpos_jax.nn.attention import KVCache, RelativeMultiHeadAttention, jit_decode
from relpos_jax.nn.call import AttentionInputs, AttentionSettings, Coordinates, Grid, Positions
from relpos_jax.nn.blocks import MLP, TransformerBlock
from relpos_jax.nn.functional import attend, attention_mask
from relpos_jax.nn.models import DecoderLM, BidirectionalModel, ModelConfig
from relpos_jax.nn.vit import ViT
