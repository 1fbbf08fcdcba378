"""The encoder contract: kinds, base classes and the helpers every encoder module uses.

An encoder is a frozen (hashable) dataclass of hyperparameters, so it can be a static argument of `jax.jit`,
plus pure functions of its parameters:

    params = encoder.init(rng, num_heads)      # a pytree; nothing learnable -> no array leaves
    bias   = encoder.bias(params, rel)         # scalar-bias kind: rel.shape + (num_heads,)

The attention layer dispatches on `encoder.kind` only (never on a particular encoder), in one place:
`relpos_jax.nn.terms.select` gives each leaf part a Term (`relpos_jax.nn.terms.base.Term`), and the Term calls
the encoder. The table lists what the Terms call (the attention paths call nothing else):

| kind             | the Terms call                                         | used as                              |
|------------------|--------------------------------------------------------|--------------------------------------|
| SCALAR_BIAS      | bias(params, rel) (Toeplitz), pair_bias(params, q_pos, | b_h(j - i) added to the scores       |
|                  | k_pos) (otherwise), is_toeplitz                        |                                      |
| VECTOR_RELATIVE  | key_embeddings / value_embeddings / query_biases,      | q . a_{j-i} in scores, sum w a_{j-i} |
|                  | clip_distance                                          |                                      |
| ROTARY           | rotate_queries / rotate_keys                           | q, k rotated at their positions      |
| ABSOLUTE         | embed(params, positions)                               | x + p_i at the model's input         |
| COMBINED         | children() (`leaves`: each leaf gets its own Term)     | the sum of its parts' terms (a sum,  |
|                  |                                                        | or a wrapper of one part: randomized)|
| POSITION_REMAP   | base, score_sets(q_pos, k_pos), the base's rotate /    | the base's term at remapped (query,  |
|                  | rotate_divided or pair_bias                            | key) positions, merged per region    |
| CONTEXTUAL       | num_features / token_features(x); separable:           | a term computed from q, k (and x)    |
|                  | row_column_terms; counts_along_keys: gates,            |                                      |
|                  | counted_term; replaces_content: score_term(params,     |                                      |
|                  | ctx) (the explicit path only)                          |                                      |
| SCORE_TRANSFORM  | base (a scalar bias), key_halo,                        | f(content scores, bias) replaces sum |
|                  | transform(params, scores, bias, valid)                 |                                      |
| NORMALIZER       | tiles, allowed(valid, q_index, k_index),               | replaces the softmax                 |
|                  | initial_carry, tile_weights(logits, allowed, carry),   |                                      |
|                  | remainder_to_self                                      |                                      |
| TEMPERATURE      | temperature(params, num_visible, q_index)              | multiplies the logits per query      |

`ContextualEncoder.score_term` of a separable or counting encoder and `NormalizerEncoder.weights` are the
whole-matrix forms of those terms: references the tests compare the Terms' tiled forms against, which no
attention path calls.

Scalar-bias encoders say whether they are Toeplitz (`is_toeplitz`): a bias that depends on the query
position too (FIRE) is not, and takes its own path in `bias_matrix`.

Relative positions follow the package convention rel = j - i (key minus query).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation

Params = Any  # A pytree of arrays; may contain `Dims` (a leafless node).


class Kind(enum.Enum):
  SCALAR_BIAS = 'scalar_bias'
  VECTOR_RELATIVE = 'vector_relative'
  ROTARY = 'rotary'
  ABSOLUTE = 'absolute'
  COMBINED = 'combined'
  POSITION_REMAP = 'position_remap'
  # Position from content, and what happens to the scores after they are computed.
  CONTEXTUAL = 'contextual'
  SCORE_TRANSFORM = 'score_transform'
  NORMALIZER = 'normalizer'
  TEMPERATURE = 'temperature'


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Dims:
  """The sizes an encoder was initialised for (and its name), carried inside its params.

  A static pytree node: it has no leaves, so it is never trained, traced or checkpointed as data, yet a
  parameter-free encoder (ALiBi with fixed slopes, NoPE, sinusoids) still knows its head count from its params,
  and params handed to the wrong encoder or layer are named in the error (`check_params`).
  """

  num_heads: int
  head_dim: int | None = None
  model_dim: int | None = None
  # Only for messages: not compared, so params of equal sizes have one tree structure whoever built them.
  encoder: str | None = dataclasses.field(default=None, compare=False)


def dims(params: Params) -> Dims:
  return params['dims']


@functools.lru_cache(maxsize=256)
def _expected_shapes(encoder, dims_: Dims):
  params = jax.eval_shape(
      lambda rng: encoder.init(rng, dims_.num_heads, head_dim=dims_.head_dim, model_dim=dims_.model_dim),
      jax.random.key(0),
  )
  return jax.tree.structure(params), tuple(leaf.shape for leaf in jax.tree.leaves(params))


def check_params(encoder: Encoder, params: Params, num_heads: int | None = None) -> None:
  """Raises ValueError unless `params` are what `encoder.init` returns (for `num_heads` heads, if given).

  The error names what the params were initialised for (another encoder, another head count), instead of the
  KeyError or shape error a mismatch would raise deep inside the encoder.
  """
  who = encoder.name or type(encoder).__name__
  found = params.get('dims') if isinstance(params, dict) else None
  if not isinstance(found, Dims):
    raise ValueError(
        f'{who}: params must be the pytree {who}.init(...) returned (a dict with its "dims"), got '
        f'{type(params).__name__}.'
    )
  if num_heads is not None and found.num_heads != num_heads:
    raise ValueError(f'{who}: params were initialised for {found.num_heads} heads, but this layer has ' f'{num_heads}.')
  structure, shapes = _expected_shapes(encoder, found)
  if jax.tree.structure(params) != structure or tuple(jnp.shape(leaf) for leaf in jax.tree.leaves(params)) != shapes:
    raise ValueError(
        f'{who}: params were initialised for encoder {found.encoder} ({found}), not for {encoder!r}; '
        f'pass the params that {who}.init returned.'
    )


# The position arguments of the encoder methods below the public functions, and the range each is checked
# against (`validation`'s supported positions): a relative position -2^31 or a position 2^31 - 1 gave NaN.
_POSITION_ARGUMENTS = {
    'bias': ('rel', validation.MAX_RELATIVE),
    'pair_bias': ('q_pos', validation.MAX_POSITION, 'k_pos', validation.MAX_POSITION),
    'rotate': ('positions', validation.MAX_POSITION),
    'rotate_queries': ('positions', validation.MAX_POSITION),
    'rotate_keys': ('positions', validation.MAX_POSITION),
    'embed': ('positions', validation.MAX_POSITION),
}


def _range_checked(method, checks):
  """`method` that first checks its integer position arguments, when concrete, against their range."""
  signature = inspect.signature(method)
  limits = dict(zip(checks[::2], checks[1::2]))

  @functools.wraps(method)
  def checked(self, *args, **kwargs):
    bound = signature.bind(self, *args, **kwargs)
    for field, limit in limits.items():
      value = bound.arguments.get(field)
      values = None if value is None else validation.concrete(value)
      if values is not None and values.dtype.kind in 'iu':
        validation.check_range(self.name or type(self).__name__, field, values, limit)
    return method(self, *args, **kwargs)

  checked.range_checked = True
  return checked


@dataclasses.dataclass(frozen=True)
class Encoder:
  """Base of every encoder. Subclasses are frozen dataclasses of hyperparameters.

  Every subclass's `bias`, `pair_bias`, `rotate*` and `embed` check their position arguments at entry
  (`_POSITION_ARGUMENTS`), so calling an encoder below the public functions is as safe as through them.
  """

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    for name, checks in _POSITION_ARGUMENTS.items():
      method = cls.__dict__.get(name)
      if callable(method) and not getattr(method, 'range_checked', False):
        setattr(cls, name, _range_checked(method, checks))

  kind: ClassVar[Kind]
  name: ClassVar[str] = ''  # Set by `registry.register`.
  # Whether the encoder lets a model tell position j - i from j' - i' at equal content (NoPE does not).
  carries_position: ClassVar[bool] = True
  # Whether the encoder's contribution depends on absolute positions (not only on j - i).
  is_relative: ClassVar[bool] = True
  # Whether the encoder is only defined for causal attention (xPos: keys ahead would grow without bound).
  requires_causal: ClassVar[bool] = False
  # Training draws positions from [0, train_position_limit) instead of 0..L-1 (randomized positions); None:
  # training uses 0..L-1. At most one encoder of a model draws; a run trains on at most this many tokens.
  train_position_limit: ClassVar[int | None] = None
  # Which sizes `init` must be given (vector-relative tables need head_dim, absolute ones model_dim).
  needs_head_dim: ClassVar[bool] = False
  needs_model_dim: ClassVar[bool] = False
  # Whether the encoder's term reads the integer positions (or distances) of queries and keys. Those that do
  # not (NoPE; CoPE, FoX and PaTH, whose positions come from the content; stick-breaking and the
  # temperatures, which read the causal order and the key count) are left unchanged by a wrapper that only
  # moves positions (randomized, a remap), so such a wrapper around them is refused as a no-op.
  reads_positions: ClassVar[bool] = True
  # Whether the term multiplies the (rotated) queries or keys by vectors of its own of head_dim features
  # (Shaw's a^K, Transformer-XL's u and v, CoPE's position embeddings, PaTH's directions): such a part cannot
  # sit beside a rotation that changes their size (`RotaryEncoder.widens_head`, PoPE).
  uses_head_vectors: ClassVar[bool] = False

  def init(
      self, rng: jax.Array, num_heads: int, *, head_dim: int | None = None, model_dim: int | None = None
  ) -> Params:
    """Parameters for a layer of `num_heads` heads (head_dim / model_dim where the kind needs them)."""
    dims_ = self.init_dims(num_heads, head_dim=head_dim, model_dim=model_dim)
    return check_finite_params(self, {'dims': dims_, **self.init_params(rng, dims_)})

  def init_dims(self, num_heads: int, *, head_dim: int | None = None, model_dim: int | None = None) -> Dims:
    """The checked sizes `init` records (for an encoder that overrides `init`, as a wrapper does)."""
    who = self.name or type(self).__name__
    sizes = {'head_dim': (head_dim, self.needs_head_dim), 'model_dim': (model_dim, self.needs_model_dim)}
    checked = {
        field: None if value is None and not needed else validation.positive_int(who, field, value)
        for field, (value, needed) in sizes.items()
    }
    dims_ = Dims(num_heads=validation.positive_int(who, 'num_heads', num_heads), encoder=self.name or None, **checked)
    self.check_dims(dims_)
    return dims_

  def children(self) -> tuple[Encoder, ...]:
    """The encoders this one is built from (a sum's parts, a wrapper's base); () for a leaf."""
    return ()

  def check_dims(self, dims_: Dims) -> None:
    """Raises ValueError for sizes this encoder cannot work with (rotary: an odd head_dim)."""
    del dims_

  def init_params(self, rng: jax.Array, dims_: Dims) -> dict:
    """The learnable arrays; `{}` when there is nothing to learn."""
    del rng, dims_
    return {}

  def check_positions(self, positions_upper_bound: int) -> None:
    """Raises ValueError if the encoder (or one it is built from) cannot handle positions 0..bound-1.

    Relative encoders handle any position; only finite absolute tables restrict (AbsoluteEncoder).
    """
    for child in self.children():
      child.check_positions(positions_upper_bound)


def check_finite_params(encoder: Encoder, params: Params) -> Params:
  """`params`, or ValueError naming the encoder and the parameter when an initial value is not finite (a
  hyperparameter whose initial values overflow: they would give NaN outputs from the first step). Traced
  params (under `jax.eval_shape` or jit) are not inspected."""
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    values = validation.concrete(leaf)
    if values is not None and values.dtype.kind == 'f' and not np.isfinite(values).all():
      raise ValueError(
          f'{encoder!r}: its initial parameter {jax.tree_util.keystr(path)} is not finite; allowed: hyperparameters '
          'whose initial values are finite in float32 (lower the scale that multiplies them).'
      )
  return params


def walk(encoder: Encoder):
  """Every encoder of the tree, the encoder itself first, then each child's tree (depth first): the one walker."""
  yield encoder
  for child in encoder.children():
    yield from walk(child)


def leaves(encoder: Encoder) -> tuple[Encoder, ...]:
  """The encoders that contribute terms, in order: a COMBINED encoder (a sum, or a wrapper such as randomized)
  stands for its children; any other kind is a leaf (even one built around another, as absolute_score)."""
  if encoder.kind is Kind.COMBINED:
    return tuple(leaf for child in encoder.children() for leaf in leaves(child))
  return (encoder,)


def train_positions(encoder: Encoder, rng: jax.Array, batch: int, length: int) -> jax.Array | None:
  """The positions a training batch of (batch, length) tokens uses: drawn by the encoder of the tree that draws
  its own (randomized; at most one), or None for the default 0 .. length - 1. The training pipeline's one
  question to an encoder about positions."""
  for node in walk(encoder):
    if node.train_position_limit is not None:
      return node.train_positions(rng, batch, length)
  return None


def check_position_draws(who: str, field: str, value, encoders) -> None:
  """Refuses draws of training positions (randomized) that cannot all be honoured, across `encoders` (a sum,
  or the layers of a model): positions are drawn once and shared by every term of every layer, so there is
  one `max_position`, and every absolute table must hold it (a table read past its end gives NaN at step 1)."""
  nodes = [node for encoder in encoders for node in walk(encoder)]
  limits = sorted({node.train_position_limit for node in nodes if node.train_position_limit is not None})
  validation.require(
      len(limits) <= 1,
      who,
      field,
      value,
      f'one randomized max_position for the whole model (positions are drawn once and shared by every layer); '
      f'got {limits}',
  )
  for node in nodes:
    table = getattr(node, 'max_length', None) if node.kind is Kind.ABSOLUTE else None
    validation.require(
        not limits or table is None or limits[0] <= table,
        who,
        field,
        value,
        f'randomized max_position={limits[0] if limits else None} <= {table}, the max_length of '
        f'{node.name or type(node).__name__}, whose table cannot hold the positions training draws',
    )


def check_model_encoders(who: str, field: str, value, layers, *, causal: bool) -> None:
  """The checks of a model's encoders as a whole (one encoder, or one per layer), before anything is built:
  no causal-only part in a bidirectional model (xPos, the remaps, CoPE, FoX, PaTH, stick-breaking), and one
  position draw every table holds (`check_position_draws`)."""
  causal_only = sorted({leaf.name or type(leaf).__name__ for e in layers for leaf in leaves(e) if leaf.requires_causal})
  validation.require(
      causal or not causal_only,
      who,
      field,
      value,
      f'an encoder without causal-only parts for a bidirectional model: {causal_only} are defined for causal '
      'attention only (a causal LM, or a causal task)',
  )
  check_position_draws(who, field, value, layers)


class WrapsBase:
  """Mixin for a wrapper with an encoder field `base`: the flags of the layer's checks are the base's."""

  @property
  def carries_position(self):
    return self.base.carries_position

  @property
  def is_relative(self):
    return self.base.is_relative

  @property
  def requires_causal(self):
    return self.base.requires_causal

  @property
  def reads_positions(self):
    return self.base.reads_positions


class ScalarBiasEncoder(Encoder):
  """b_h(j - i), one scalar per head and relative position, added to the attention scores."""

  kind = Kind.SCALAR_BIAS
  is_toeplitz: ClassVar[bool] = True

  def bias(self, params: Params, rel: jax.Array) -> jax.Array:
    """Int array of relative positions j - i, any shape -> float32 rel.shape + (num_heads,)."""
    raise NotImplementedError

  def pair_bias(self, params: Params, q_pos: jax.Array, k_pos: jax.Array) -> jax.Array:
    """The bias for query positions q_pos and key positions k_pos (broadcastable int arrays).

    Toeplitz encoders only see k_pos - q_pos; query-dependent ones (FIRE) override this.
    """
    return self.bias(params, jnp.asarray(k_pos, jnp.int32) - jnp.asarray(q_pos, jnp.int32))


class VectorRelativeEncoder(Encoder):
  """Relative embeddings of the head dimension that interact with the queries (and values).

  Scores gain q_i . a^K_{j-i} (plus (u . k_j) and (v . a^K_{j-i}) with the query biases of Transformer-XL);
  outputs gain sum_j w_ij a^V_{j-i} when `value_embeddings` is not None. Encoders with a bounded table set
  `clip_distance`: relative positions are clipped to [-max_distance, max_distance], so the layer may evaluate
  the table once on that range and gather.
  """

  kind = Kind.VECTOR_RELATIVE
  needs_head_dim = True
  uses_head_vectors = True

  @property
  def clip_distance(self) -> int | None:
    return None

  def key_embeddings(self, params: Params, rel: jax.Array) -> jax.Array:
    """rel (any shape) -> rel.shape + (num_heads, head_dim): the vectors queries are dotted with."""
    raise NotImplementedError

  def value_embeddings(self, params: Params, rel: jax.Array) -> jax.Array | None:
    """rel -> rel.shape + (num_heads, head_dim) added to the values per distance, or None."""
    del params, rel
    return None

  def query_biases(self, params: Params) -> tuple[jax.Array | None, jax.Array | None]:
    """(u, v), each (num_heads, head_dim) or None: u . k_j joins the content score, v the position score."""
    del params
    return None, None


class RotaryEncoder(Encoder):
  """Relative through rotation: <R_i q, R_j k> depends on positions only through j - i."""

  kind = Kind.ROTARY
  # Whether `rotate` is the map of queries and keys alike. A remap rotates both with it at remapped
  # positions, so it can only wrap such a rotation: xPos scales queries and keys oppositely, PoPE gives keys
  # a phase bias and queries a factor.
  one_rotation: ClassVar[bool] = True
  # Whether the rotation changes the size of q and k (PoPE: D features -> 2D).
  widens_head: ClassVar[bool] = False

  def rotate(self, params: Params, x: jax.Array, positions: jax.Array) -> jax.Array:
    """x (..., L, heads, head_dim) rotated at integer positions (..., L); computed in float32."""
    raise NotImplementedError

  def rotate_queries(self, params: Params, q: jax.Array, positions: jax.Array) -> jax.Array:
    return self.rotate(params, q, positions)

  def rotate_keys(self, params: Params, k: jax.Array, positions: jax.Array) -> jax.Array:
    return self.rotate(params, k, positions)


class AbsoluteEncoder(Encoder):
  """A vector per absolute position (Vaswani et al. 2017): added to the input, or turned into a score term.

  `max_length` is None for encoders defined at every position, else the number of positions they have.
  """

  kind = Kind.ABSOLUTE
  is_relative = False
  needs_model_dim = True

  @property
  def max_length(self) -> int | None:
    return None

  def embed(self, params: Params, positions: jax.Array) -> jax.Array:
    """Int positions (any shape) -> positions.shape + (model_dim,)."""
    raise NotImplementedError

  def check_positions(self, positions_upper_bound: int) -> None:
    """Raises ValueError if positions below `positions_upper_bound` are not all covered."""
    if self.max_length is not None and positions_upper_bound > self.max_length:
      raise ValueError(
          f'{self.name}: position {positions_upper_bound - 1} is beyond the table of max_length='
          f'{self.max_length} positions (0..{self.max_length - 1}); a learned absolute table cannot '
          f'extrapolate. Raise max_length or evaluate at shorter lengths.'
      )


class TableBiasEncoder(ScalarBiasEncoder):
  """A learnable (num_buckets, num_heads) table read at bucket(j - i): Shaw's scalar form, T5, piecewise.

  Subclasses define `num_buckets` and `bucket(rel)`, an int map of relative positions onto 0..num_buckets-1
  that covers every integer (clipping or saturating far distances), so any length can be evaluated.
  """

  # Small random values: the table starts close to "no position bias" and learns its shape.
  table_init_stddev: ClassVar[float] = 0.02

  @property
  def num_buckets(self) -> int:
    raise NotImplementedError

  def bucket(self, rel: jax.Array) -> jax.Array:
    raise NotImplementedError

  def init_params(self, rng, dims_):
    init = jax.nn.initializers.normal(self.table_init_stddev)
    return {'table': init(rng, (self.num_buckets, dims_.num_heads), jnp.float32)}

  def bias(self, params, rel):
    return jnp.take(params['table'], self.bucket(jnp.asarray(rel, jnp.int32)), axis=0)


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=['q_positions', 'k_positions', 'region'], meta_fields=['divisor']
)
@dataclasses.dataclass(frozen=True)
class ScoreSet:
  """One set of remapped positions: the base encoder is evaluated with queries at `q_positions` (..., Lq) and
  keys at `k_positions` (..., Lk), and its scores are used on the pairs where `region` (..., Lq, Lk) is True.

  `divisor` (an int >= 1) divides the base's frequencies (a rotary base rotates at q_positions / divisor):
  how leaky ReRoPE compresses distances with integer positions.
  """

  q_positions: jax.Array
  k_positions: jax.Array
  region: jax.Array
  divisor: int = 1


class PositionRemapEncoder(Encoder):
  """A wrapper that maps (query, key) positions before its `base` (rotary or scalar bias) sees them.

  Some remaps cannot be written as one rotation of q and one of k (ReRoPE clips j - i, Self-Extend groups
  only the far keys): `score_sets` then returns several position sets whose regions partition the (query,
  key) pairs, and the attention layer computes the base's scores under each and keeps each pair's from its
  region, as the papers' reference code merges two (or three) attention-score matrices. Remaps are defined
  for causal attention (their regions are distances into the past). Parameters are the base's, so a model
  trained with the base evaluates with the remap unchanged.
  """

  kind = Kind.POSITION_REMAP
  requires_causal = True

  @property
  def reads_positions(self):
    return self.base.reads_positions

  def score_sets(self, q_positions: jax.Array, k_positions: jax.Array) -> tuple[ScoreSet, ...]:
    """Int positions (B, Lq), (B, Lk) -> the position sets and their regions (B, Lq, Lk)."""
    raise NotImplementedError

  def children(self):
    return (self.base,)

  def init(self, rng, num_heads, *, head_dim=None, model_dim=None):
    return self.base.init(rng, num_heads, head_dim=head_dim, model_dim=model_dim)


# ----------------------------------------------------------------------------------------------------------
# The kinds whose terms depend on the content (q, k, x), not only on positions.


@dataclasses.dataclass(frozen=True)
class AttentionContext:
  """What a contextual / normalizer / temperature encoder sees of one attention call (float32 arrays).

  query: (B, Lq, H, D), rotated if a part is rotary. key: (B, Lk, H, D).
  features: (B, Lk, F) the part's per-token features of the keys (`token_features`, cached in decoding),
    or None. The queries are keys too (self-attention): query i is key index q_index[i].
  valid: (B or 1, 1, Lq, Lk) bool, True where query i may attend to key j (causal mask and padding).
  key_mask: (B, Lk) bool, True for real keys (padding and the unwritten part of a cache are False).
  q_index: (Lq,) int32, the key index of each query (q_offset + i).
  scale: the softmax scale 1 / sqrt(D).
  """

  query: jax.Array
  key: jax.Array
  features: jax.Array | None
  valid: jax.Array
  key_mask: jax.Array
  q_index: jax.Array
  scale: float


class ContextualEncoder(Encoder):
  """A score term computed along the row from q, k (and the layer input x): gates, prefix sums, transforms.

  `token_features(params, x)` maps the layer input x (B, L, model_dim) to per-token features (B, L, F)
  (`num_features(dims)` = F, 0 for none); the layer computes them for the tokens it sees and keeps them in
  its KV cache, so a contextual term decodes chunk by chunk like a full forward. `score_term(params, ctx)`
  returns (B, H, Lq, Lk) float32 added to the scaled logits; with `replaces_content` it *is* the content
  logit (PaTH's q_i^T P_ij k_j, unscaled like q . k). Padded keys are transparent: they contribute no gate,
  no decay and no transform (so left padding does not change the real tokens' outputs).

  What the attention paths call depends on the form (`relpos_jax.nn.terms.select`): a `separable` encoder's
  `row_column_terms`, a `counts_along_keys` encoder's `gates` and `counted_term`, a `replaces_content`
  encoder's `score_term` (on the explicit path's one tile). `score_term` is every encoder's whole-matrix
  form, the reference the tests compare the others against.
  """

  kind = Kind.CONTEXTUAL
  requires_causal: ClassVar[bool] = True
  reads_positions: ClassVar[bool] = False
  replaces_content: ClassVar[bool] = False
  # A separable term (FoX) is an outer sum row_i + column_j of per-position values (`row_column_terms`):
  # the tiled paths build it per tile from those two vectors, O(L) memory.
  separable: ClassVar[bool] = False
  # A term of counts p_ij = sum_{t = j .. i} g_it of per-pair gates (CoPE: `gates`, `counted_term`): the tiled
  # paths add, per tile, the row sums of the gates on the nearer key tiles (a carry known before the loop).
  counts_along_keys: ClassVar[bool] = False
  needs_head_dim = True
  needs_model_dim = True

  def num_features(self, dims_: Dims) -> int:
    del dims_
    return 0

  def token_features(self, params: Params, x: jax.Array) -> jax.Array | None:
    """x (B, L, model_dim) -> (B, L, num_features) float32, or None when the term needs no features."""
    del params, x
    return None

  def score_term(self, params: Params, ctx: AttentionContext) -> jax.Array:
    raise NotImplementedError

  def row_column_terms(
      self, params: Params, features: jax.Array | None, key_mask: jax.Array, q_index: jax.Array
  ) -> tuple[jax.Array, jax.Array]:
    """Separable terms only: (row (B, H, Lq), column (B, H, Lk)) float32 with score_term = row_i + column_j."""
    raise NotImplementedError

  def gates(self, scaled_logits: jax.Array, valid: jax.Array | None) -> jax.Array:
    """Counting terms only: the per-pair gates g_ij (B, H, Lq, Lk) float32 of the scaled content logits, zero
    where `valid` (B|1, 1, Lq, Lk) is False (None: nothing masked)."""
    raise NotImplementedError

  def counted_term(self, params: Params, query: jax.Array, counts: jax.Array, scale) -> jax.Array:
    """Counting terms only: the logit term (B, H, Lq, Lk) float32 at counts p_ij = sum_{t = j .. i} g_it, from
    the queries (B, Lq, H, D) and the softmax scale."""
    raise NotImplementedError


class ScoreTransformEncoder(Encoder):
  """Corrects the logits with a function of them and of its base's bias: logits <- transform(A, B, valid),
  A the scaled logits of every other term, B = `base_bias` (the base is a scalar-bias encoder).

  `key_halo`: how many neighbouring keys on each side the correction of one logit reads (0: it is per pair).
  A tiled path computes that many extra key columns on each side of a tile before the transform.
  """

  kind = Kind.SCORE_TRANSFORM

  @property
  def key_halo(self) -> int:
    return 0

  def transform(self, params: Params, scores: jax.Array, bias: jax.Array, valid: jax.Array | None) -> jax.Array:
    """scores (B, H, Lq, Lk) float32, bias broadcastable to it, valid (B|1, 1, Lq, Lk) bool or None."""
    raise NotImplementedError


class NormalizerEncoder(Encoder):
  """Replaces the softmax: attention weights from the (masked) logits.

  A normalizer with `tiles` folds key tiles from the nearest to the farthest: `allowed` marks the pairs that
  get weight, `tile_weights(logits, allowed, carry)` gives one tile's weights and the carry for the next
  (farther) tile, starting from `initial_carry`; the explicit path is the one-tile case. `remainder_to_self`:
  1 - sum_j w_ij goes to query i's own value.
  """

  kind = Kind.NORMALIZER
  reads_positions: ClassVar[bool] = False  # The causal order of the keys, not their positions.
  tiles: ClassVar[bool] = False
  remainder_to_self = False

  def allowed(self, valid: jax.Array, q_index: jax.Array, k_index: jax.Array) -> jax.Array:
    """valid (B|1, 1, Lq, Lk) bool, the key index of each query (Lq,) and key (Lk,): the pairs given weight."""
    raise NotImplementedError

  def initial_carry(self, shape) -> jax.Array:
    """The carry (`shape` = (B, H, bq)) entering the nearest key tile of a query tile."""
    raise NotImplementedError

  def tile_weights(self, logits: jax.Array, allowed: jax.Array, carry: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One key tile's (weights (B, H, bq, bk) float32, the carry into the next, farther, tile) from its masked
    logits and `allowed` pairs: what every attention path calls (the explicit path is one tile)."""
    raise NotImplementedError

  def weights(self, params: Params, logits: jax.Array, ctx: AttentionContext) -> tuple[jax.Array, jax.Array | None]:
    """logits (B, H, Lq, Lk) float32 -> (weights (B, H, Lq, Lk), remainder (B, H, Lq) or None): the whole-matrix
    form of `tile_weights`, a reference for the tests (no attention path calls it).

    A remainder r_i is the weight given to query i's own value v_{q_index[i]} on top of the weights.
    """
    raise NotImplementedError


class TemperatureEncoder(Encoder):
  """Multiplies every logit of query i by t_h(i), a function of the number of keys it sees."""

  kind = Kind.TEMPERATURE
  reads_positions: ClassVar[bool] = False  # The number of keys a query sees, not their positions.

  def temperature(self, params: Params, num_visible: jax.Array, q_index: jax.Array) -> jax.Array:
    """num_visible (B, Lq) float32 (keys query i sees, >= 1 for a query that sees any) -> (B, H, Lq)."""
    raise NotImplementedError
