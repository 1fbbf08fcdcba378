"""PaPE, Parabolic Position Encoding (Øhrstrøm et al. 2026, "Parabolic Position Encoding: Vision-Centric,
Principled, Extrapolatable, General", arXiv 2602.01418), and its rotation-invariant variant PaPE-RI.

Reference: DTU-PAS/parabolic-position-encoding, pape/nn/positions/pape.py (`ParabolicPositionEncoder`) and
pape/nn/positions/pape_ri.py (`ParabolicRotationInvariantPositionEncoder`), called from pape/nn/encoder.py
(`Attention.forward`), commit 21cb390eafb9398e78c7c786d20505f557c973ec. Transcribed from the code, which is what
the paper's numbers come from.

What it computes. The reference appends features to q and k (`encode_query_key`) so that the fused attention
kernel's q' . k' is q . k plus a bias; written out, that bias is a sum of M parabolas of the offset per head:

    u_i^{h,m} = w_{h,m} . p_i                         (`position`: Linear(axes, H M, bias=False), learned)
    a_i^{h,m} = softplus((A x_i)_{h,m}),  b_i^{h,m} = (B x_i)_{h,m}      (`ab`: Linear(model_dim, 2 H M, bias=False))
    q'_i = [q_i, sum_m -a_i u_i^2, a_i, 2 a_i u_i, sum_m b_i u_i, b_i]      k'_j = [k_j, 1, -u_j^2, u_j, 1, -u_j]
    q'_i . k'_j = q_i . k_j + sum_m ( -a_i^m (u_i^m - u_j^m)^2 + b_i^m (u_i^m - u_j^m) )

and the logit is (q'_i . k'_j) / sqrt(head_dim) (the reference's `scale = head_size ** -0.5`, of the head size
before the features are appended). So the bias of pair (i, j) and head h is sum_m -a (delta_m)^2 + b delta_m, with
delta_m = w_{h,m} . (p_i - p_j) the offset along a learned direction: a downward parabola (a = softplus > 0:
distance decay) shifted by b (directionality), its curvature and tilt read from the query's content x_i (context
awareness: the layer input, which in the reference's pre-norm block is the normed hidden state, as here). It
depends on coordinates only through p_i - p_j (translation invariant) and extrapolates to any grid. M =
`parabolas` (the reference's `config.pape.parabolas`, 50). Initialisation as PyTorch's Linear: U(-1/sqrt(fan_in),
1/sqrt(fan_in)).

PaPE-RI (`pape_ri`): one parabola per head in the Euclidean distance, u_i = s_h p_i with a fixed per-head scale
s_h ~ U(-1/sqrt(axes), 1/sqrt(axes)) (the reference's `position_scales` buffer), a_i = softplus((A x_i)_h)
(`a`: Linear(model_dim, H, bias=False)):

    q'_i = [q_i, -a_i |u_i|^2, a_i (axes times), 2 a_i u_i]      k'_j = [k_j, 1, -u_j^2, u_j]
    q'_i . k'_j = q_i . k_j - a_i s_h^2 |p_i - p_j|_2^2

invariant to rotations of the coordinates as well. The reference's buffer is not a parameter: here it sits in the
params (it is drawn at init, as the reference draws it) behind `jax.lax.stop_gradient`, so its gradient is zero
and no optimizer moves it.

How it is built here. The bias depends on the query's content, so it is a term of the content, kind
VECTOR_RELATIVE as iRPE's contextual mode. The term is computed as the reference computes it, from the appended
features (`features`): (q'_i - [q_i]) . (k'_j - [k_j]) over 3M + 2 (PaPE) or 2 axes + 1 (PaPE-RI) features, never
an (L, L, M) array. The attention layer computes each token's features once (from x and the
coordinates) and hands them to `functional.attend` (relpos_jax.nn.terms.grid.GridFeatureScores): each tile adds
its queries' features . its keys' features to q . k before the softmax scale, as the reference's kernel does with
q' . k', so the blockwise path holds no (L, L) array (memory O(L F)); `attention_weights` adds the whole
(B, H, Lq, Lk) term `contextual_scores(params, q, k, q_pos, k_pos, scale, inputs=x)` to the scaled logits. The coordinates are first centred on the keys' mean (a common shift: the offsets, hence the
exact value, are unchanged), because the expanded form cancels -a u_i^2 - a u_j^2 + 2 a u_i u_j and would lose
float32 digits to the coordinates' magnitude; the reference's padding of the features to a multiple of 8 (zeros,
for its kernel) changes nothing and is not reproduced.

Coordinates: any (..., axes) ints or floats (2: H x W, 3: T x H x W; 1-D positions are refused by name), in
patch units as the reference's (`normalize=False`, its default; its normalised variant divides by the grid size,
which is not relative and is not built). The class token: the reference gives it coordinates 0 and the patches
1 .. n per axis (image_classifier.py, video_classifier.py); on this package's 0-based grid that is the point
(-1, ..., -1), where it is placed here (a fixed point, as the reference's 0: pairs with the class token are not
translation invariant in either).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.grid import positions as positions_lib
from relpos_jax.grid.contract import GridEncoder, check_axes
from relpos_jax.grid.registry import register

# The reference's default (`PaPEConfig.parabolas`); the bound keeps the (H, 3M + 2) features a size that allocates.
DEFAULT_PARABOLAS = 50
MAX_PARABOLAS = 4096
# Where the class token sits: the reference's 0 with patches at 1 .. n, on the 0-based grid.
CLASS_COORDINATE = -1.0


def _uniform(rng, shape, fan_in: int):
  """PyTorch's nn.Linear weight init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
  bound = 1.0 / math.sqrt(fan_in)
  return jax.random.uniform(rng, shape, jnp.float32, -bound, bound)


@dataclasses.dataclass(frozen=True)
class _Parabolic(GridEncoder, contract.Encoder):
  """What PaPE and PaPE-RI share: a content term from appended features, read by its grid Term (relpos_jax.nn.terms.grid.GridFeatureScores)."""

  kind = contract.Kind.VECTOR_RELATIVE
  needs_model_dim = True
  reads_inputs = True  # a and b are projections of the query token's x (terms.grid.GridFeatureScores)

  axes: int = 2

  def __post_init__(self):
    check_axes(self.name, self.axes)

  def _coords(self, q_pos, k_pos):
    """Float32 query and key coordinates (..., L, axes), the class token at CLASS_COORDINATE, both centred on
    the keys' mean (a common shift: every offset, hence the term, is unchanged)."""
    out = []
    for field, pos in (('q_pos', q_pos), ('k_pos', k_pos)):
      c = self.coordinates(pos, field)
      cls = positions_lib.is_class_token(c)[..., None]
      out.append(jnp.where(cls, CLASS_COORDINATE, c.astype(jnp.float32)))
    q, k = out
    centre = jax.lax.stop_gradient(jnp.mean(k, axis=-2, keepdims=True))
    return q - centre, k - centre

  def _operands(self, params, inputs, q_pos, k_pos):
    """(q, k, x): the centred coordinates and the layer input, float32, their leading (batch) axes broadcast."""
    q, k = self._coords(q_pos, k_pos)
    who = self.name
    dims_ = contract.dims(params)
    shape = None if inputs is None else tuple(jnp.shape(inputs))
    try:
      ok = shape is not None and len(shape) >= 2 and shape[-2:] == (q.shape[-2], dims_.model_dim)
      lead = jnp.broadcast_shapes(q.shape[:-2], k.shape[:-2], shape[:-2]) if ok else None
    except ValueError:
      ok = False
    validation.require(
        ok,
        who,
        'inputs',
        None if shape is None else f'<shape {shape}>',
        f'the layer input x of the queries, (..., Lq={q.shape[-2]}, model_dim={dims_.model_dim}) with leading axes '
        f"that broadcast with the coordinates' {q.shape[:-2]}: its content sets the parabolas (the attention layer "
        'passes it)',
    )
    q, k = (jnp.broadcast_to(c, lead + c.shape[-2:]) for c in (q, k))
    return q, k, jnp.broadcast_to(jnp.asarray(inputs, jnp.float32), lead + shape[-2:])

  def features(self, params, inputs, q_pos, k_pos):
    """(query features (..., H, Lq, F), key features (..., H, Lk, F)) float32: what the reference appends to q
    and k (after the common centring of the coordinates), F = `feature_size()`."""
    raise NotImplementedError

  def parabola_term(self, params, inputs, q_pos, k_pos):
    """The unscaled term q'_i . k'_j - q_i . k_j: (..., H, Lq, Lk) float32."""
    qf, kf = self.features(params, inputs, q_pos, k_pos)
    return jnp.einsum('...hif,...hjf->...hij', qf, kf, precision=jax.lax.Precision.HIGHEST)

  def contextual_scores(self, params, query, key, q_pos, k_pos, scale, inputs=None):
    """(B, H, Lq, Lk) float32: the term the reference adds to the scaled logits, scale * (q' . k' - q . k), for
    queries at q_pos (B, Lq, axes) with layer inputs `inputs` (B, Lq, model_dim) and keys at k_pos (B, Lk, axes).
    query and key (B, L, H, D) are not read (the term is the content's through x, not through q and k)."""
    del query, key
    return self.parabola_term(params, inputs, q_pos, k_pos) * jnp.float32(scale)


@register('pape')
@dataclasses.dataclass(frozen=True)
class PaPE(_Parabolic):
  parabolas: int = DEFAULT_PARABOLAS

  def __post_init__(self):
    super().__post_init__()
    validation.positive_int(self.name, 'parabolas', self.parabolas, maximum=MAX_PARABOLAS)

  def feature_size(self) -> int:
    """F, the features appended to each query and key."""
    return 3 * self.parabolas + 2

  def init_params(self, rng, dims_):
    h, m = dims_.num_heads, self.parabolas
    r_pos, r_ab = jax.random.split(rng)
    # position: the reference's Linear(axes, H M) weight, transposed to (axes, H, M); ab: Linear(model_dim, 2 H M)
    # transposed to (model_dim, 2, H, M) (its view (.., 2, H, M): a first, then b).
    return {
        'position': _uniform(r_pos, (self.axes, h, m), self.axes),
        'ab': _uniform(r_ab, (dims_.model_dim, 2, h, m), dims_.model_dim),
    }

  def features(self, params, inputs, q_pos, k_pos):
    q, k, x = self._operands(params, inputs, q_pos, k_pos)
    u_q = jnp.einsum('...la,ahm->...hlm', q, params['position'])  # (..., H, Lq, M)
    u_k = jnp.einsum('...la,ahm->...hlm', k, params['position'])
    ab = jnp.einsum('...ld,dchm->...chlm', x, params['ab'])  # (..., 2, H, Lq, M)
    a, b = jax.nn.softplus(ab[..., 0, :, :, :]), ab[..., 1, :, :, :]
    ones = jnp.ones(u_k.shape[:-1] + (1,), jnp.float32)
    qf = jnp.concatenate(
        [jnp.sum(-a * u_q**2, -1, keepdims=True), a, 2 * a * u_q, jnp.sum(b * u_q, -1, keepdims=True), b], -1
    )
    kf = jnp.concatenate([ones, -(u_k**2), u_k, ones, -u_k], -1)
    return qf, kf


@register('pape_ri')
@dataclasses.dataclass(frozen=True)
class PaPERI(_Parabolic):

  def feature_size(self) -> int:
    """F, the features appended to each query and key."""
    return 2 * self.axes + 1

  def init_params(self, rng, dims_):
    r_scale, r_a = jax.random.split(rng)
    return {
        # The reference's buffer (2 rand - 1) * sqrt(1 / axes): fixed, read behind stop_gradient.
        'position_scales': _uniform(r_scale, (dims_.num_heads,), self.axes),
        'a': _uniform(r_a, (dims_.model_dim, dims_.num_heads), dims_.model_dim),
    }

  def features(self, params, inputs, q_pos, k_pos):
    q, k, x = self._operands(params, inputs, q_pos, k_pos)
    s = jax.lax.stop_gradient(params['position_scales'])[:, None, None]  # (H, 1, 1)
    u_q, u_k = q[..., None, :, :] * s, k[..., None, :, :] * s  # (..., H, L, axes)
    a = jax.nn.softplus(jnp.einsum('...ld,dh->...hl', x, params['a']))[..., None]  # (..., H, Lq, 1)
    ones = jnp.ones(u_k.shape[:-1] + (1,), jnp.float32)
    qf = jnp.concatenate([jnp.sum(-a * u_q**2, -1, keepdims=True), jnp.broadcast_to(a, u_q.shape), 2 * a * u_q], -1)
    kf = jnp.concatenate([ones, -(u_k**2), u_k], -1)
    return qf, kf
