"""relpos_jax: relative position encodings for JAX/Flax, and how they generalise to longer sequences.

Sign convention, kept everywhere: the relative position of key j as seen from query i is

    rel = j - i        (key position minus query position)

so keys in the past have negative relative positions (the lecture's R[i, j] = j - i). A causal model
only ever sees rel <= 0.

"The lecture", wherever a module cites it, is the document this project started from: a lecture (in Chinese) on
improving the generalization of relative position encodings. It is not part of the repository: docs/lecture.md
describes it, and what the code takes from it is listed here, section by section; docs/lecture_variants.md
records what making its learned tables extrapolate took. Its sections, as the modules cite them:
  1   absolute vs relative encodings (`encoders.absolute`: sinusoids, learned tables)
  2   the relative distance matrix R[i, j] = j - i (`positions`; `encoders.distance`)
  3   a relative bias added to the attention scores: softmax(Q K^T / sqrt(d_k) + R) V (`nn.attention`)
  4   Shaw's learnable relative embeddings, 2k + 1 of them, the distance clipped to [-k, k] (`encoders.shaw`)
  5a  the range extended by piecewise-linear or logarithmic scaling of far distances (`encoders.piecewise`,
      `encoders.t5`)
  5b  multi-scale relative encodings: several tables, each at its own granularity (`encoders.multiscale`)
  5c  absolute and relative combined: scores + R + P (`encoders.combine`, `encoders.absolute`)
Where this package departs from the lecture's code (its sign, its unclipped indices), the module says so.

The pieces:
  relpos_jax.encoders   pure functional encoders, by kind (scalar bias, vector relative, rotary, absolute)
  relpos_jax.positions  relative_positions, toeplitz; bias_matrix (encoders.matrices): a bias from its 2L - 1 values
  relpos_jax.checks     shape assertions and assert_toeplitz
  relpos_jax.interop    Hugging Face rope configs in (from_hf: the encoders a model's config needs) and out (to_hf)
"""

from relpos_jax import checks
from relpos_jax import encoders
from relpos_jax.encoders.matrices import bias_at_positions, bias_matrix
from relpos_jax.positions import distinct_relative_positions, relative_positions, toeplitz

__version__ = '0.1.0'
