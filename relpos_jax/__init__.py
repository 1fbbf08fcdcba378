"""relpos_jax: relative position encodings for JAX/Flax, and how they generalise to longer sequences.

Sign convention, kept everywhere: the relative position of key j as seen from query i is

    rel = j - i        (key position minus query position)

so keys in the past have negative relative positions (the source lecture's R[i, j] = j - i). A causal model
only ever sees rel <= 0.

The pieces:
  relpos_jax.encoders   pure functional encoders, by kind (scalar bias, vector relative, rotary, absolute)
  relpos_jax.positions  relative_positions, and bias_matrix: a Toeplitz bias built from its 2L - 1 values
  relpos_jax.checks     shape assertions and assert_toeplitz
"""

from relpos_jax import checks
from relpos_jax import encoders
from relpos_jax.positions import (
    bias_at_positions,
    bias_matrix,
    distinct_relative_positions,
    relative_positions,
    toeplitz,
)

__version__ = '0.1.0'
