"""NoPE, no position encoding (Kazemnejad, Padhi, Natesan Ramamurthy, Das & Reddy 2023, "The Impact of
Positional Encoding on Length Generalization in Transformers", NeurIPS 2023).

    b_h(j - i) = 0

Nothing is learned and nothing about position reaches the scores. Kazemnejad et al. find that causal
decoders without any position encoding length-generalise as well as or better than ALiBi, RoPE or T5 on
their reasoning tasks: the causal mask itself lets a decoder infer absolute position (e.g. by counting the
keys it can attend to), and they show the first layer can recover it. A bidirectional encoder cannot: with
no mask and no encoding, attention is permutation-equivariant, so the model sees a bag of tokens. Hence
`carries_position = False`, which the training code checks to warn about NoPE without a causal mask.

It is a scalar-bias encoder so that it drops into every experiment as the baseline; the zeros cost one
(2L - 1, H) array and XLA folds the addition away.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


@register('nope')
@dataclasses.dataclass(frozen=True)
class NoPE(contract.ScalarBiasEncoder):
  carries_position = False
  reads_positions = False

  def bias(self, params, rel):
    rel = jnp.asarray(rel)
    return jnp.zeros(rel.shape + (contract.dims(params).num_heads,), jnp.float32)
