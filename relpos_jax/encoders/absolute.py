"""Absolute position encodings: a vector per position (the lecture's section 1), and its score term P.

  sinusoidal      Vaswani et al. 2017, "Attention Is All You Need", section 3.5:
                    PE(pos, 2i) = sin(pos / 10000^(2i / d)),  PE(pos, 2i + 1) = cos(pos / 10000^(2i / d))
                  interleaved as in the paper (not the concatenated [sin, cos] of tensor2tensor). Defined at
                  every position; d = model_dim, 10000 = max_wavelength.
  learned         a learnable (max_length, model_dim) table (BERT, GPT-2). It has no row for positions
                  >= max_length and never clips: asking for one is a ValueError.
  absolute_score  the lecture's P in scores += R + P, a per-head score term between absolute positions
                  (TUPE: Ke, He & Liu 2021, "Rethinking Positional Encoding in Language Pre-training"):
                    P_h[i, j] = (p_i U^Q_h) . (p_j U^K_h) / sqrt(2 d_head)
                  with p from a wrapped absolute encoder (`base`, sinusoidal by default) and learnable
                  U^Q, U^K of shape (model_dim, num_heads, head_dim). It is a scalar bias that is neither
                  relative nor Toeplitz, so `bias_matrix` evaluates it on the position grid (pair_bias).

The first two are added to the token embeddings (x + p_i); the model calls `check_positions(length)` with the
static length before it embeds, since under jit `embed` cannot inspect traced positions.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract, rope
from relpos_jax.encoders.registry import register


def sinusoids(positions: jax.Array, model_dim: int, max_wavelength: float = 10_000.0) -> jax.Array:
  """PE(pos, 2i) = sin(pos / w^(2i/d)), PE(pos, 2i+1) = cos(pos / w^(2i/d)): positions.shape + (d,) float32.

  For odd d the last feature is the sine of frequency index i = (d - 1) / 2: the formula restricted to
  feature indices < d, nothing dropped or padded.
  """
  num_frequencies = (model_dim + 1) // 2
  # 2i / d for i = 0 .. ceil(d/2) - 1, computed in float64 numpy: exact constants, no float32 drift.
  exponents = 2.0 * np.arange(num_frequencies) / model_dim
  # The phase pos / w^(2i/d) reduced mod 2 pi exactly (RoPE's fixed-point arithmetic): a float32 product
  # loses the phase of the fast frequencies from ~1e5 on and collapses every feature beyond ~1e8.
  angles = rope.rotary_angles(
      validation.int_array('sinusoids', 'positions', positions), np.asarray(max_wavelength, np.float64) ** -exponents
  )
  # Stack on a new last axis then merge: feature 2i is sin, 2i + 1 is cos (the paper's interleaving).
  pe = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)
  return pe.reshape(pe.shape[:-2] + (2 * num_frequencies,))[..., :model_dim]


@register('sinusoidal')
@dataclasses.dataclass(frozen=True)
class Sinusoidal(contract.AbsoluteEncoder):
  """Fixed sinusoids of Vaswani et al. 2017; defined at every position (max_length None)."""

  max_wavelength: float = 10_000.0

  def __post_init__(self):
    validation.number(self.name, 'max_wavelength', self.max_wavelength, above=0)

  def embed(self, params, positions):
    return sinusoids(positions, contract.dims(params).model_dim, self.max_wavelength)


@register('learned')
@dataclasses.dataclass(frozen=True)
class Learned(contract.AbsoluteEncoder):
  """A learnable (max_length, model_dim) table, one row per position 0 .. max_length - 1.

  max_length = 2048: room for the usual training lengths and their first extrapolation multiples (the
  table is what stops a learned encoding at its trained range; GPT-2 used 1024, BERT 512). Rows start at
  N(0, 0.02^2), BERT's initializer, small next to unit-scale token embeddings.
  """

  # A field shadowing AbsoluteEncoder.max_length (a property, None there): the table's size is the hparam.
  max_length: int = 2048

  table_init_stddev = 0.02

  def __post_init__(self):
    validation.positive_int(self.name, 'max_length', self.max_length, maximum=validation.MAX_TABLE_ROWS)

  def init_params(self, rng, dims_):
    init = jax.nn.initializers.normal(self.table_init_stddev)
    return {'table': init(rng, (self.max_length, dims_.model_dim), jnp.float32)}

  def embed(self, params, positions):
    """Rows of the table at int positions (any shape) -> positions.shape + (model_dim,).

    Concrete positions outside 0 .. max_length - 1 raise ValueError. Traced positions cannot be checked
    here (call `check_positions(length)` with the static length first, as the model does); should an
    out-of-range one slip through anyway, negative or past the end, it reads NaN (gather mode 'fill'), loud
    in any loss, never a silently clipped or wrapped row.
    """
    index = validation.int_array(self.name, 'positions', positions)
    values = validation.concrete(positions)
    if values is not None and values.size:
      low, high = int(values.min()), int(values.max())
      if low < 0:
        raise ValueError(
            f'{self.name}: position {low} is negative; the table has positions ' f'0..{self.max_length - 1}.'
        )
      self.check_positions(high + 1)
    # A negative index would wrap to a row from the end: send it past the end, where the gather fills NaN.
    index = jnp.where(index < 0, self.max_length, index)
    return jnp.take(params['table'], index, axis=0, mode='fill', fill_value=jnp.nan)


@register('absolute_score')
@dataclasses.dataclass(frozen=True)
class AbsoluteScore(contract.ScalarBiasEncoder):
  """TUPE's absolute score term, P_h[i, j] = (p_i U^Q_h) . (p_j U^K_h) / sqrt(2 d_head).

  The sqrt(2 d_head) (not sqrt(d_head)) is TUPE's: the content and position terms are each scaled so their
  sum keeps the variance of one ordinary score. p is the wrapped absolute encoder's embedding (`base`);
  its parameters live under params['base'] (a learned table is trained through this term). U^Q and U^K
  start at N(0, 1 / model_dim), LeCun's fan-in scale for a projection of model_dim features.
  """

  base: contract.Encoder = Sinusoidal()

  is_toeplitz = False
  is_relative = False
  needs_head_dim = True
  needs_model_dim = True

  def __post_init__(self):
    ok = isinstance(self.base, contract.Encoder) and self.base.kind is contract.Kind.ABSOLUTE
    validation.require(
        ok, self.name, 'base', self.base, 'an absolute encoder (kind ABSOLUTE), e.g. sinusoidal or learned'
    )

  @property
  def max_length(self) -> int | None:
    return self.base.max_length

  def children(self):
    return (self.base,)

  def init_params(self, rng, dims_):
    base_rng, query_rng, key_rng = jax.random.split(rng, 3)
    init = jax.nn.initializers.normal(dims_.model_dim**-0.5)
    shape = (dims_.model_dim, dims_.num_heads, dims_.head_dim)
    return {
        'base': self.base.init(base_rng, dims_.num_heads, model_dim=dims_.model_dim),
        'query_proj': init(query_rng, shape, jnp.float32),
        'key_proj': init(key_rng, shape, jnp.float32),
    }

  def _project(self, params, proj, positions):
    p = self.base.embed(params['base'], positions)  # positions.shape + (model_dim,)
    return jnp.einsum('...m,mhd->...hd', p, params[proj])

  def bias(self, params, rel):
    raise ValueError(
        f'{self.name} depends on the absolute positions i and j, not on j - i alone: evaluate it with '
        f'pair_bias(params, q_pos, k_pos), relpos_jax.bias_matrix or relpos_jax.bias_at_positions.'
    )

  def pair_bias(self, params, q_pos, k_pos):
    """q_pos, k_pos: broadcastable int arrays -> broadcast shape + (num_heads,)."""
    q = self._project(params, 'query_proj', q_pos)
    k = self._project(params, 'key_proj', k_pos)
    head_dim = contract.dims(params).head_dim
    # Projections are made once per position; the pairing broadcasts (Lq, 1) against (1, Lk).
    return jnp.einsum('...hd,...hd->...h', q, k) / np.sqrt(2.0 * head_dim).astype(np.float32)
