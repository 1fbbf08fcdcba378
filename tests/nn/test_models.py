"""ModelConfig, DecoderLM and BidirectionalModel: validation, cached decoding, shared biases, dropout, training."""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.encoders import spec
from relpos_jax.encoders.combine import combine
from relpos_jax.nn import DecoderLM, BidirectionalModel, ModelConfig

B, L, VOCAB = 2, 6, 11

_forward = nnx.jit(lambda model, tokens, positions: model(tokens, positions=positions))


def _config(encoder, **kw):
  base = dict(vocab_size=VOCAB, encoder=encoder, num_layers=2, model_dim=16, num_heads=2, mlp_ratio=2.0)
  return ModelConfig(**(base | kw))


def _tokens(seed=0, length=L, vocab=VOCAB):
  return jax.random.randint(jax.random.key(seed), (B, length), 0, vocab, jnp.int32)


# ----------------------------------------------------------------------------------------------------------
# Config.


@pytest.mark.parametrize(
    'field,value',
    [
        ('vocab_size', 0),
        ('output_vocab_size', -1),
        ('num_layers', 0),
        ('model_dim', 15),
        ('num_heads', 0),
        ('mlp_ratio', 0.0),
        ('dropout_rate', 1.0),
        ('dtype', 'float16'),
        ('share_position_bias', 1),
        ('attention_implementation', 'flash'),
        ('norm', 'batchnorm'),
        ('encoder', 42),
        ('encoder', 'no_such'),
        ('debug_checks', 'yes'),
    ],
)
def test_config_validation_names_the_field(field, value):
  kw = {'encoder': encoders.make('t5'), field: value}
  with pytest.raises(ValueError, match=f'ModelConfig: {field}='):
    _config(kw.pop('encoder'), **kw)


def test_config_defaults_and_spec_strings():
  config = _config('sinusoidal + shaw(max_distance=8)')
  assert config.encoder == spec.from_spec('sinusoidal + shaw(max_distance=8)')
  assert config.output_vocab_size is None and config.output_vocab == VOCAB
  assert config.head_dim == 8 and config.mlp_hidden_dim == 32
  hash(config)  # Frozen and hashable: usable as a static jit argument.
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.num_layers = 3
  assert _config('t5', output_vocab_size=3).output_vocab == 3


# ----------------------------------------------------------------------------------------------------------
# Shapes, lengths, warnings.


def test_models_map_tokens_to_float32_logits_of_the_output_vocab():
  config = _config(encoders.make('t5'), output_vocab_size=5)
  tokens = _tokens()
  for cls in (DecoderLM, BidirectionalModel):
    model = cls(config, rngs=nnx.Rngs(params=0, dropout=1))
    logits = _forward(model, tokens, None)
    assert logits.shape == (B, L, 5) and logits.dtype == jnp.float32
  with pytest.raises(ValueError, match='tokens must be an int array'):
    model(tokens.astype(jnp.float32))
  with pytest.raises(ValueError, match='padding_mask must be bool'):
    model(tokens, padding_mask=jnp.ones((B, L), jnp.int32))
  with pytest.raises(ValueError, match='positions must be'):
    model(tokens, positions=jnp.zeros((B, L + 1), jnp.int32))


def test_check_length_rejects_a_too_short_learned_table():
  for encoder in (
      encoders.make('learned', max_length=8),
      combine(encoders.make('learned', max_length=8), encoders.make('t5')),
  ):
    model = DecoderLM(_config(encoder), rngs=nnx.Rngs(params=0, dropout=1))
    model.check_length(8)
    with pytest.raises(ValueError, match='max_length=8'):
      model.check_length(9)
    with pytest.raises(ValueError, match='max_length=8'):
      model(_tokens(length=9))
    with pytest.raises(ValueError, match='max_length=8'):
      model.init_cache(B, 9)
  with pytest.raises(ValueError, match='length=0'):
    model.check_length(0)


def test_nope_in_a_bidirectional_model_warns():
  config = _config(encoders.make('nope'))
  with pytest.warns(UserWarning, match=r"encoder 'nope'.*carries_position is False.*cannot tell token order"):
    BidirectionalModel(config, rngs=nnx.Rngs(params=0, dropout=1))
  with warnings.catch_warnings():
    warnings.simplefilter('error')
    DecoderLM(config, rngs=nnx.Rngs(params=0, dropout=1))  # Causal NoPE infers position: no warning.


def test_causal_only_encoder_is_refused_by_the_encoder_model():
  with pytest.raises(ValueError, match='causal-only'):
    BidirectionalModel(_config(encoders.make('xpos')), rngs=nnx.Rngs(params=0, dropout=1))


# ----------------------------------------------------------------------------------------------------------
# Cached decoding and shared position bias.

_decode = nnx.jit(lambda model, tokens, cache, positions: model.decode(tokens, cache, positions=positions))


def _decode_all(model, tokens, chunks, max_length, positions=None):
  cache = model.init_cache(B, max_length)
  outs, start = [], 0
  for size in chunks:
    chunk_positions = None if positions is None else positions[:, start : start + size]
    logits, cache = _decode(model, tokens[:, start : start + size], cache, chunk_positions)
    outs.append(logits)
    start += size
  return jnp.concatenate(outs, axis=1)


@pytest.mark.parametrize(
    'encoder,share',
    [
        ('sinusoidal', False),
        ('learned + transformer_xl', False),
        ('t5', True),
        ('absolute_score + rope', True),
        ('cope + alibi', True),
        ('path + fox', False),
        ('dape(kerple_log, version=2)', True),
    ],
)
def test_decoder_decode_equals_full_forward(encoder, share):
  model = DecoderLM(_config(encoder, share_position_bias=share), rngs=nnx.Rngs(params=0, dropout=1))
  tokens = _tokens()
  full = _forward(model, tokens, None)
  np.testing.assert_allclose(_decode_all(model, tokens, [1] * L, L + 2), full, atol=5e-5, rtol=1e-5)
  np.testing.assert_allclose(_decode_all(model, tokens, [3, 3], L), full, atol=5e-5, rtol=1e-5)
  # Explicit (randomized) positions, fed chunk by chunk.
  positions = jnp.sort(jax.random.choice(jax.random.key(2), 64, (L,), replace=False)).astype(jnp.int32)
  positions = jnp.broadcast_to(positions, (B, L))
  full = _forward(model, tokens, positions)
  np.testing.assert_allclose(_decode_all(model, tokens, [3, 3], L + 1, positions), full, atol=5e-5, rtol=1e-5)


def test_shared_position_bias_lives_in_the_model_once():
  shared = DecoderLM(_config('t5', share_position_bias=True, num_layers=3), rngs=nnx.Rngs(0))
  separate = DecoderLM(_config('t5', num_layers=3), rngs=nnx.Rngs(0))
  assert shared.position_params is not None and len(shared.position_params) == 1
  assert all(block.attention.position_params is None for block in shared.blocks)
  assert separate.position_params is None
  assert all(len(block.attention.position_params) == 1 for block in separate.blocks)
  count = lambda m: sum(x.size for x in jax.tree.leaves(nnx.state(m, nnx.Param)))
  table = 32 * 2  # t5: num_buckets x num_heads
  assert count(separate) - count(shared) == 2 * table
  grads = nnx.jit(nnx.grad(lambda m, tokens: jnp.sum(m(tokens) ** 2)))(shared, _tokens())
  assert float(jnp.max(jnp.abs(grads.position_params[0]['table'][...]))) > 0


def test_dropout_only_when_not_deterministic():
  model = BidirectionalModel(_config('t5', dropout_rate=0.3), rngs=nnx.Rngs(params=0, dropout=1))
  tokens = _tokens()
  run = nnx.jit(
      lambda m, tokens, deterministic: m(tokens, deterministic=deterministic), static_argnames='deterministic'
  )
  a, b = run(model, tokens, True), run(model, tokens, True)
  np.testing.assert_array_equal(a, b)
  c, d = run(model, tokens, False), run(model, tokens, False)
  assert float(jnp.max(jnp.abs(c - a))) > 1e-3 and float(jnp.max(jnp.abs(c - d))) > 1e-3


def test_bfloat16_model_is_finite_with_padding():
  model = DecoderLM(_config('rope + alibi', dtype='bfloat16'), rngs=nnx.Rngs(0))
  padding = jnp.array([[False, False] + [True] * (L - 2), [True] * L])
  logits = nnx.jit(lambda m, t, p: m(t, padding_mask=p))(model, _tokens(), padding)
  assert logits.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(logits)))


# ----------------------------------------------------------------------------------------------------------
# Training on toy tasks lowers the loss.


def _train(model, batches, steps, lr=3e-3):
  optimizer = nnx.Optimizer(model, optax.adam(lr), wrt=nnx.Param)

  @nnx.jit
  def step(model, optimizer, inputs, targets, positions):
    def loss_fn(model):
      logits = model(inputs, positions=positions, deterministic=False)
      return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss

  losses = [float(step(model, optimizer, *batches(i))) for i in range(steps)]
  return losses


def test_decoder_learns_a_repeated_pattern():
  """Next-token prediction on a periodic sequence with a random phase (period 5 of 11 symbols)."""
  model = DecoderLM(_config('t5', model_dim=32, num_heads=2, dropout_rate=0.1), rngs=nnx.Rngs(params=0, dropout=1))
  length, period = 16, 5

  def batches(i):
    phase = jax.random.randint(jax.random.key(i), (8, 1), 0, period)
    seq = (jnp.arange(length + 1)[None, :] + phase) % period
    return seq[:, :-1].astype(jnp.int32), seq[:, 1:].astype(jnp.int32), None

  losses = _train(model, batches, 40)
  assert losses[-1] < 0.8 * losses[0], losses


def test_encoder_model_learns_a_copy_into_its_own_output_vocab():
  """Copy each input token's class (token mod 3, a 3-symbol output vocab), trained at randomized positions."""
  encoder = encoders.make('randomized', base=encoders.make('t5'), max_position=64)
  model = BidirectionalModel(_config(encoder, model_dim=32, output_vocab_size=3), rngs=nnx.Rngs(params=0, dropout=1))
  length = 12

  def batches(i):
    rng = jax.random.key(100 + i)
    inputs = jax.random.randint(rng, (8, length), 0, VOCAB, jnp.int32)
    positions = encoder.train_positions(jax.random.fold_in(rng, 1), 8, length)  # As the train step does.
    return inputs, inputs % 3, positions

  losses = _train(model, batches, 40)
  assert losses[-1] < 0.8 * losses[0], losses


# ----------------------------------------------------------------------------------------------------------
# Input positions: the absolute input embedding's own positions (Abacus as McLeish et al. embed it).


def test_input_positions_move_the_absolute_embedding_and_leave_attention_at_the_token_index():
  """`input_positions` = 0..L-1 is the default forward; other input positions change the logits, and unlike
  `positions` they do not reach the relative part (FIRE sees 0..L-1 either way)."""
  model = DecoderLM(_config(spec.from_spec('learned(max_length=32) + fire')), rngs=nnx.Rngs(0))
  tokens = _tokens()
  index = jnp.broadcast_to(jnp.arange(L, dtype=jnp.int32), (B, L))
  abacus = jnp.asarray([[1, 2, 3, 0, 1, 2], [3, 2, 1, 0, 4, 5]], jnp.int32)
  plain = model(tokens)
  np.testing.assert_allclose(model(tokens, input_positions=index), plain, atol=1e-6)
  moved = model(tokens, input_positions=abacus)
  assert not np.allclose(moved, plain, atol=1e-4)
  # The same input embedding with FIRE also at `abacus` differs: the input positions did not reach FIRE.
  assert not np.allclose(model(tokens, positions=abacus, input_positions=abacus), moved, atol=1e-4)
  # Learned alone (NoPE attention): `positions` reach nothing but the embedding, so both spellings agree.
  alone = DecoderLM(_config(spec.from_spec('learned(max_length=32)')), rngs=nnx.Rngs(0))
  np.testing.assert_allclose(alone(tokens, input_positions=abacus), alone(tokens, positions=abacus), atol=1e-6)


def test_input_positions_need_an_absolute_part_and_their_shape():
  model = DecoderLM(_config(encoders.make('fire')), rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r'input_positions were given but encoder .*fire.* has no absolute part'):
    model(_tokens(), input_positions=jnp.zeros((B, L), jnp.int32))
  learned = DecoderLM(_config(spec.from_spec('learned(max_length=32) + fire')), rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r'input_positions must be an int array of shape \(batch, length\)'):
    learned(_tokens(), input_positions=jnp.zeros((B, L + 1), jnp.int32))
  with pytest.raises(ValueError, match='beyond the table'):  # concrete positions past the table: named
    learned(_tokens(), input_positions=jnp.full((B, L), 40, jnp.int32))
