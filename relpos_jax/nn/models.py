"""Two transformers that take any position encoder: `DecoderLM` (causal) and `BidirectionalModel` (bidirectional).

    config = ModelConfig(vocab_size=32, encoder=encoders.make('t5'), num_layers=2, model_dim=64, num_heads=4)
    model = DecoderLM(config, rngs=nnx.Rngs(params=0, dropout=1))      # or BidirectionalModel
    logits = model(tokens, positions=None, padding_mask=None, deterministic=True)
    # tokens (B, L) int32 -> logits (B, L, output vocab) float32

Layout: token embedding (+ absolute position embedding p_i, if the encoder has an absolute part) -> N
pre-norm blocks (`blocks.TransformerBlock`) -> final norm -> linear head. `positions` (B, L) int32 replaces
0 .. L-1 everywhere (the train step passes `contract.train_positions(encoder, rng, B, L)` for randomized positions).
`input_positions` (B, L) int32 replaces them for the absolute input embedding only, while attention keeps
`positions` (or 0 .. L-1): McLeish et al. 2024's Abacus, a learned embedding of each digit's significance
beside NoPE, FIRE or RoPE over the token index (task `addition_abacus` with `as_input=True`). `decode` does
not take them: a model trained with input positions is evaluated teacher-forced, by `__call__`.

With `share_position_bias` the model owns one set of encoder params for all layers and evaluates the
scalar bias once per forward (T5's choice); otherwise every layer has its own (Shaw's, ALiBi's are fixed).

Per-layer encoders: `encoder` may be a tuple of encoders / specs (or one spec string that is a tuple,
'(rope, rope, rope, nope)'), one per layer or a shorter pattern repeated over the layers (layer i takes
pattern[i % len(pattern)]: Llama-4 / Command-A interleaving); `attention_window` likewise (None = global,
an int W = sliding-window local attention over the last W positions: Gemma-style local/global patterns).
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from relpos_jax import validation
from relpos_jax.encoders import contract, spec
from relpos_jax.nn import attention as attention_lib
from relpos_jax.nn import blocks, functional, terms

KVCache = attention_lib.KVCache
# What ModelConfig raises: a ValueError carrying field, value, allowed and depends_on, so that a config loader
# names its own keys (config.model.<field>) without parsing the message.
ModelConfigError = validation.InvalidValue


def resolve_encoder(encoder) -> contract.Encoder:
  """An Encoder as it is, or a spec string ('t5', 'sinusoidal + shaw(max_distance=8)') parsed by from_spec."""
  validation.require(
      isinstance(encoder, (contract.Encoder, str)),
      'ModelConfig',
      'encoder',
      encoder,
      'an Encoder (relpos_jax.encoders.make(...)) or a spec string',
  )
  return spec.from_spec(encoder) if isinstance(encoder, str) else encoder


def _invalid_field(field: str, value, allowed: str) -> validation.InvalidValue:
  return validation.invalid('ModelConfig', field, value, allowed)


def resolve_encoders(encoder):
  """One Encoder, or a tuple of them for per-layer encoders (a tuple, or a spec string that is a tuple).

  A bad element raises ValueError naming its index in the pattern.
  """
  if isinstance(encoder, str):
    split = spec.layer_specs(encoder)
    if split is not None:
      encoder = split
  if isinstance(encoder, (tuple, list)):
    if not encoder:
      raise _invalid_field('encoder', encoder, 'a non-empty tuple of encoders or specs (one per layer, or a pattern)')
    out = []
    for i, item in enumerate(encoder):
      try:
        out.append(resolve_encoder(item))
      except ValueError as e:
        raise _invalid_field(
            f'encoder[{i}]', item, f'a valid encoder or spec for the layers i with i % ' f'{len(encoder)} == {i} ({e})'
        ) from e
    return tuple(out)
  return resolve_encoder(encoder)


def per_layer(value, num_layers: int, field: str) -> tuple:
  """A pattern (tuple) repeated over `num_layers`, or one value for every layer."""
  if not isinstance(value, tuple):
    return (value,) * num_layers
  if len(value) > num_layers:
    raise _invalid_field(
        field,
        value,
        f'one entry per layer, or a shorter pattern repeated over them: at most '
        f'num_layers={num_layers} entries, got {len(value)}',
    )
  return tuple(value[i % len(value)] for i in range(num_layers))


def all_encoders(encoder) -> tuple:
  """The distinct encoders of a (possibly per-layer) encoder, in order."""
  items = encoder if isinstance(encoder, tuple) else (encoder,)
  return tuple(dict.fromkeys(items))


def positions_encoder(encoder) -> contract.Encoder:
  """The encoder whose `train_positions` a (possibly per-layer) model trains with: positions are shared by
  every layer, so the first layer that draws its own (randomized) decides; else the first layer."""
  items = all_encoders(encoder)
  for e in items:
    if any(node.train_position_limit is not None for node in contract.walk(e)):
      return e
  return items[0]


def _readable(encoder) -> str:
  try:
    return spec.to_spec(encoder)
  except ValueError:
    return encoder.name or type(encoder).__name__


def _window(value, field):
  if value is None or (validation.is_int(value) and 1 <= value <= validation.MAX_POSITION):
    return value  # Bounded: attention_window=10**12 ended in JAX's OverflowError.
  raise _invalid_field(
      field,
      value,
      f'None (global attention) or an int in [1, {validation.MAX_POSITION}] (sliding window of that many positions)',
  )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
  """Hyperparameters of `DecoderLM` and `BidirectionalModel` (causal or not is the model type's business).

  vocab_size: input tokens. output_vocab_size: logits size, None for vocab_size (see `output_vocab`).
  encoder: an Encoder or a spec string (stored as the parsed Encoder). mlp_ratio: MLP hidden size /
  model_dim. dtype: compute dtype 'float32' | 'bfloat16' (params, norms, softmax, position terms and
  logits stay float32). share_position_bias: one encoder for all layers, its scalar bias computed once.
  attention_implementation: None | 'xla' | 'cudnn' (jax.nn.dot_product_attention) | 'einsum' |
  'blockwise' (O(L) memory). attention_block_size: the tiles of 'blockwise', None (default), an int or
  (block_q, block_k). With 'blockwise' a shared bias is built per tile in every layer, never as (H, L, L).
  norm: 'rmsnorm' | 'layernorm'. debug_checks: run-time Toeplitz checks of the realised bias.
  encoder and attention_window may be per-layer patterns (see the module docstring): `layer_encoders` and
  `layer_windows` give the value of every layer.
  """

  vocab_size: int
  encoder: Any
  output_vocab_size: int | None = None
  attention_window: Any = None
  num_layers: int = 2
  model_dim: int = 128
  num_heads: int = 4
  mlp_ratio: float = 4.0
  dropout_rate: float = 0.0
  dtype: str = 'float32'
  share_position_bias: bool = False
  attention_implementation: str | None = None
  attention_block_size: Any = None
  norm: str = 'rmsnorm'
  debug_checks: bool = False

  def __post_init__(self):
    who = 'ModelConfig'
    for field in ('vocab_size', 'num_layers', 'model_dim', 'num_heads'):
      validation.positive_int(who, field, getattr(self, field))
    validation.require(
        self.output_vocab_size is None or validation.is_int(self.output_vocab_size) and self.output_vocab_size >= 1,
        who,
        'output_vocab_size',
        self.output_vocab_size,
        'None (= vocab_size) or an int >= 1',
    )
    validation.head_dim(who, self.model_dim, self.num_heads)
    ratio = self.mlp_ratio
    validation.require(
        isinstance(ratio, numbers.Real)
        and not isinstance(ratio, bool)
        and ratio > 0
        and int(round(self.model_dim * ratio)) >= 1,
        who,
        'mlp_ratio',
        ratio,
        'a number > 0 with model_dim * mlp_ratio >= 1',
        ('model_dim',),
    )
    rate = self.dropout_rate
    validation.require(
        isinstance(rate, numbers.Real) and not isinstance(rate, bool) and 0.0 <= rate < 1.0,
        who,
        'dropout_rate',
        rate,
        'a number in [0, 1)',
    )
    validation.choice(who, 'dtype', self.dtype, attention_lib.DTYPES)
    validation.choice(who, 'attention_implementation', self.attention_implementation, functional.IMPLEMENTATIONS)
    validation.choice(who, 'norm', self.norm, blocks.NORMS)
    validation.boolean(who, 'share_position_bias', self.share_position_bias)
    validation.boolean(who, 'debug_checks', self.debug_checks)
    if isinstance(self.attention_block_size, list):  # A config file's tuple can arrive as a list.
      object.__setattr__(self, 'attention_block_size', tuple(self.attention_block_size))
    try:
      functional.check_block_size(self.attention_implementation, self.attention_block_size)
    except ValueError as e:
      raise validation.invalid(who, 'attention_block_size', self.attention_block_size, str(e)) from None
    try:
      object.__setattr__(self, 'encoder', resolve_encoders(self.encoder))
    except ValueError as e:
      if str(e).startswith(who):
        raise
      raise _invalid_field('encoder', self.encoder, f'a valid encoder or spec ({e})') from e
    window = self.attention_window
    if isinstance(window, str):
      import ast

      try:
        window = ast.literal_eval(window)
      except (ValueError, SyntaxError):
        raise _invalid_field('attention_window', window, 'None, an int >= 1, or a tuple of them per layer') from None
    if isinstance(window, list):
      window = tuple(window)
    if isinstance(window, tuple):
      if not window:
        raise _invalid_field('attention_window', window, 'a non-empty tuple (one per layer, or a pattern)')
      for i, w in enumerate(window):
        _window(w, f'attention_window[{i}]')
    else:
      _window(window, 'attention_window')
    object.__setattr__(self, 'attention_window', window)
    self._check_layers()

  def _check_layers(self) -> None:
    """Layers must agree on what is model-wide: the input (absolute) embedding, a shared bias."""
    layers = self.layer_encoders
    self.layer_windows  # Validates the pattern length.
    if not isinstance(self.encoder, tuple):
      return
    shown = tuple(_readable(e) for e in self.encoder)
    first_input = terms.parts.input_parts(layers[0])
    for i, e in enumerate(layers[1:], 1):
      if terms.parts.input_parts(e) != first_input:
        raise _invalid_field(
            'encoder',
            shown,
            f'every layer with the same absolute part (added once, at the input): '
            f'layer {i} ({_readable(e)}) differs from layer 0 ({_readable(layers[0])})',
        )
      if self.share_position_bias and e != layers[0]:
        raise _invalid_field(
            'encoder',
            shown,
            f'one encoder for every layer with share_position_bias=True: layer {i} '
            f'({_readable(e)}) differs from layer 0 ({_readable(layers[0])})',
        )

  @property
  def layer_encoders(self) -> tuple:
    """The encoder of every layer (num_layers entries)."""
    return per_layer(self.encoder, self.num_layers, 'encoder')

  @property
  def layer_windows(self) -> tuple:
    """The sliding window of every layer (None: global)."""
    return per_layer(self.attention_window, self.num_layers, 'attention_window')

  @property
  def head_dim(self) -> int:
    return self.model_dim // self.num_heads

  @property
  def output_vocab(self) -> int:
    """The logits size: output_vocab_size, or vocab_size when that is None."""
    return self.vocab_size if self.output_vocab_size is None else self.output_vocab_size

  @property
  def mlp_hidden_dim(self) -> int:
    return int(round(self.model_dim * self.mlp_ratio))


class _Transformer(nnx.Module):
  """Shared body of the two models; `causal` is fixed by the subclass."""

  causal: ClassVar[bool]

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    validation.require(isinstance(config, ModelConfig), type(self).__name__, 'config', config, 'a ModelConfig')
    self.config = config
    layers = config.layer_encoders
    for i, layer_encoder in enumerate(layers):
      where = f' (layer {i})' if len(set(layers)) > 1 else ''
      terms.parts.check_causal(f'{type(self).__name__}{where}', layer_encoder, self.causal)
    encoder = layers[0]
    self.input_parts = terms.parts.input_parts(encoder)
    self.attention_parts = terms.parts.attention_parts(encoder)
    sizes = dict(num_heads=config.num_heads, head_dim=config.head_dim, model_dim=config.model_dim)
    self.embed = nnx.Embed(
        config.vocab_size,
        config.model_dim,
        param_dtype=jnp.float32,
        embedding_init=jax.nn.initializers.normal(1.0),
        rngs=rngs,
    )
    self.input_position_params = nnx.List(
        [attention_lib.as_variables(p) for p in terms.parts.init_params(self.input_parts, rngs.params(), **sizes)]
    )
    if config.share_position_bias:
      self.position_params = nnx.List(
          [attention_lib.as_variables(p) for p in terms.parts.init_params(self.attention_parts, rngs.params(), **sizes)]
      )
    else:
      self.position_params = None
    self.embed_dropout = nnx.Dropout(config.dropout_rate, rngs=rngs)
    self.blocks = nnx.List(
        [
            blocks.TransformerBlock(
                config.model_dim,
                config.num_heads,
                layer_encoder,
                mlp_hidden_dim=config.mlp_hidden_dim,
                causal=self.causal,
                dropout_rate=config.dropout_rate,
                norm=config.norm,
                dtype=config.dtype,
                implementation=config.attention_implementation,
                block_size=config.attention_block_size,
                own_position_params=not config.share_position_bias,
                debug_checks=config.debug_checks,
                model_adds_absolute=True,
                window=window,
                rngs=rngs,
            )
            for layer_encoder, window in zip(layers, config.layer_windows)
        ]
    )
    self.final_norm = blocks.make_norm(config.norm, config.model_dim, rngs)
    # The head computes in float32: logits feed a softmax cross-entropy.
    self.head = nnx.Linear(config.model_dim, config.output_vocab, dtype=jnp.float32, param_dtype=jnp.float32, rngs=rngs)

  # --------------------------------------------------------------------------------------------------------

  def check_length(self, length: int, *, input_positions_given: bool = False) -> None:
    """Raises ValueError when sequences of `length` tokens cannot be encoded (a learned table too short).

    `input_positions_given`: the absolute input parts embed the caller's `input_positions`, not 0 .. L-1, so
    only the attention parts are held to `length` (the caller checks its input positions' range: a learned
    table reads NaN past its end, see `absolute.Learned.embed`).
    """
    length = validation.positive_int(f'{type(self).__name__}.check_length', 'length', length)
    for part in (p for e in all_encoders(self.config.encoder) for p in contract.leaves(e)):
      if input_positions_given and terms.select.term_for(part).stage is terms.Stage.INPUT:
        continue
      part.check_positions(length)

  def _check_inputs(self, tokens, positions, padding_mask):
    """The model's input boundary: tokens (B, L) in [0, vocab_size), positions and padding_mask (B, L)."""
    who = type(self).__name__
    tokens = validation.tokens(who, tokens, self.config.vocab_size)
    if positions is not None:
      positions = validation.positions(who, positions, tokens.shape)
    if padding_mask is not None:
      padding_mask = validation.mask(who, padding_mask, tokens.shape)
    return tokens, positions, padding_mask

  def _check_segments(self, tokens, segment_ids):
    """segment_ids (B, L) int, the document id of each token of packed sequences -> int32, or None."""
    if segment_ids is None:
      return None
    return validation.positions(type(self).__name__, segment_ids, tokens.shape, 'segment_ids')

  def _embed(self, tokens, positions, deterministic):
    x = self.embed(tokens).astype(jnp.float32)
    params = [attention_lib.variable_values(p) for p in self.input_position_params]
    absolute = terms.parts.input_embedding(self.input_parts, params, positions)
    if absolute is not None:
      x = x + absolute
    return self.embed_dropout(x, deterministic=deterministic)

  @property
  def _tiled(self) -> bool:
    return self.config.attention_implementation in functional.TILED_IMPLEMENTATIONS

  def _shared_params(self):
    if self.position_params is None:
      return None
    return [attention_lib.variable_values(p) for p in self.position_params]

  def _logits(self, x):
    return self.head(self.final_norm(x)).astype(jnp.float32)

  def __call__(
      self,
      tokens: jax.Array,
      *,
      positions: jax.Array | None = None,
      padding_mask: jax.Array | None = None,
      deterministic: bool = True,
      input_positions: jax.Array | None = None,
      segment_ids: jax.Array | None = None,
  ) -> jax.Array:
    """tokens (B, L) int -> logits (B, L, config.output_vocab) float32.

    positions: (B, L) int32, None for 0 .. L-1. padding_mask: (B, L) bool, True = real token.
    deterministic: False enables dropout (needs a 'dropout' stream in the model's rngs).
    input_positions: (B, L) int32 for the absolute input embedding alone (None: `positions`); the encoder
    must have an absolute part to embed them.
    segment_ids: (B, L) int document ids of packed sequences: each token attends to its own document only
    (pass per-document `positions` for positions that restart at each document).
    """
    tokens, positions, padding_mask = self._check_inputs(tokens, positions, padding_mask)
    segment_ids = self._check_segments(tokens, segment_ids)
    b, length = tokens.shape
    if input_positions is not None:
      who = type(self).__name__
      if not self.input_parts:
        raise ValueError(
            f'{who}: input_positions were given but encoder {self.config.encoder!r} has no absolute part to '
            "embed them; allowed: an encoder with one, e.g. 'learned(max_length=64) + fire' (Abacus beside FIRE)."
        )
      input_positions = validation.positions(who, input_positions, tokens.shape, 'input_positions')
    self.check_length(length, input_positions_given=input_positions is not None)
    # The input embedding's positions: the caller's input positions, else the positions, else 0 .. L-1.
    embed_positions = input_positions if input_positions is not None else positions
    if embed_positions is None:
      embed_positions = terms.parts.contiguous_positions(b, length)
    x = self._embed(tokens, embed_positions, deterministic)
    shared = self._shared_params()
    bias = None
    if shared is not None and not self._tiled:
      # T5: one bias for every layer, computed once (blockwise builds it per tile from the shared params).
      bias = terms.parts.scalar_bias(
          self.attention_parts, shared, length, length, q_positions=positions, k_positions=positions
      )
    for block in self.blocks:
      x = block(
          x,
          positions=positions,
          padding_mask=padding_mask,
          position_bias=bias,
          position_params=shared,
          deterministic=deterministic,
          segment_ids=segment_ids,
      )
    return self._logits(x)


class DecoderLM(_Transformer):
  """A causal decoder-only language model; also decodes with a key/value cache.

  cache = model.init_cache(batch, max_length)
  logits, cache = model.decode(tokens_chunk, cache)     # (B, C) -> (B, C, V), at positions index..
  """

  causal = True

  def init_cache(self, batch: int, max_length: int) -> tuple[KVCache, ...]:
    """One empty `KVCache` per layer for `batch` sequences of up to `max_length` tokens."""
    self.check_length(max_length)
    return tuple(block.attention.init_cache(batch, max_length) for block in self.blocks)

  def decode(
      self,
      tokens: jax.Array,
      cache: tuple[KVCache, ...],
      *,
      positions: jax.Array | None = None,
      padding_mask: jax.Array | None = None,
      segment_ids: jax.Array | None = None,
  ) -> tuple[jax.Array, tuple[KVCache, ...]]:
    """Feeds C new tokens (B, C) after the cached ones; returns their logits (B, C, V) and the new cache.

    Equals the full forward over all tokens so far, at the new positions. positions: (B, C) int32 for
    explicit positions (then use explicit positions for every chunk), None for index .. index + C - 1.
    segment_ids: (B, C) int document ids of the new tokens, cached per layer (`RelativeMultiHeadAttention.decode`).
    """
    tokens, explicit, padding_mask = self._check_inputs(tokens, positions, padding_mask)
    segment_ids = self._check_segments(tokens, segment_ids)
    b, chunk = tokens.shape
    validation.require(
        len(cache) == len(self.blocks),
        'decode',
        'len(cache)',
        len(cache),
        f'one KVCache per layer ({len(self.blocks)})',
    )
    first = cache[0]
    index, max_length = first.index, first.max_length
    attention_lib.check_cache_room(index, chunk, max_length)
    new_positions = explicit if explicit is not None else terms.parts.contiguous_positions(b, chunk, index)
    x = self._embed(tokens, new_positions, True)
    shared = self._shared_params()
    bias = None
    if shared is not None and not self._tiled:
      if explicit is None:
        bias = terms.parts.scalar_bias(self.attention_parts, shared, chunk, max_length, q_offset=index)
      else:
        key_positions = jax.lax.dynamic_update_slice(
            first.positions, explicit, (jnp.zeros((), jnp.int32), jnp.asarray(index, jnp.int32))
        )
        bias = terms.parts.scalar_bias(
            self.attention_parts, shared, chunk, max_length, q_positions=explicit, k_positions=key_positions
        )
    new_cache = []
    for block, layer_cache in zip(self.blocks, cache):
      x, layer_cache = block.decode(
          x,
          layer_cache,
          positions=explicit,
          padding_mask=padding_mask,
          position_bias=bias,
          position_params=shared,
          segment_ids=segment_ids,
      )
      new_cache.append(layer_cache)
    return self._logits(x), tuple(new_cache)


class BidirectionalModel(_Transformer):
  """A bidirectional encoder scoring every position: sequence-to-sequence algorithmic tasks.

  Input and output vocabularies may differ (config.output_vocab_size). An encoder that carries no position
  (NoPE) makes a bidirectional model permutation-equivariant: it is built, with a warning.
  """

  causal = False

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    encoder = config.encoder if isinstance(config, ModelConfig) else None
    if encoder is not None and not any(p.carries_position for e in all_encoders(encoder) for p in contract.leaves(e)):
      warnings.warn(
          f'BidirectionalModel with encoder {encoder.name or type(encoder).__name__!r}: it carries no position '
          f'information (carries_position is False), and without a causal mask a bidirectional model sees '
          f'its input as a bag of tokens (attention is permutation-equivariant), so it cannot tell token '
          f'order. Use a causal DecoderLM or an encoder that carries position.',
          UserWarning,
          stacklevel=2,
      )
    super().__init__(config, rngs=rngs)
