"""Measurement 3: a full train step of the default experiment model, framework vs a hand-written reference.

  framework   configs/lm.py through relpos_jax.train, built as `relpos_jax.train.train` builds it:
              `build_data`, `build_model` (the NNX DecoderLM), `OptimizerSpec.from_config`, `init_train_state`
              and the jitted `make_train_step` (state donated), on a one-device mesh. One call = one update,
              loss and metrics included.
  reference   the same model in plain JAX, no framework code: a dict of arrays, our own pre-norm blocks,
              RMSNorm, GELU MLP and causal ALiBi attention (einsums and a softmax), the same loss (token-mean
              cross-entropy) and the same optimizer built directly with optax (global-norm clipping, then
              AdamW on the warmup + cosine schedule, weight decay on matrices only), params and optimizer
              state donated.

The reference starts from the framework's initial parameter values (copied into its dict, outside any
timed code). Two untimed updates of each are then compared: the losses (same model) and the updated
parameters (same optimizer) must agree, or the benchmark stops: it would not be comparing like with like.

The batch has the training batch format at the configured batch size and length T (tokens uniform over the
byte vocabulary, every position scored): a step's cost does not depend on the token values. One timed
sample = `steps_per_sample` consecutive updates, each fed the state the previous one returned.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from benchmarks import measure, report

TARGET_RATIO = 0.95  # The target: framework tokens/s >= 0.95 x the reference loop's tokens/s.
STEPS_PER_SAMPLE = 10
# configs/lm.py trains at T = 64 (the target's setting); T = 256, its longest evaluation length, shows the
# regime where attention dominates the step.
LENGTHS, QUICK_LENGTHS = (64, 256), (64,)


def default_config():
  """configs/lm.py: the default experiment (imported here, so the benchmark runs from the repo root)."""
  from configs import lm

  return lm.get_config()


# ----------------------------------------------------------------------------------------- the batch
def synthetic_batch(batch_size: int, length: int, vocab_size: int, seed: int = 0) -> dict[str, np.ndarray]:
  """A batch in the training format (relpos_jax.train.objectives): random tokens, everything scored."""
  rng = np.random.default_rng(seed)
  tokens = rng.integers(0, vocab_size, size=(batch_size, length + 1), dtype=np.int32)
  ones = np.ones((batch_size, length), np.float32)
  return {
      'inputs': tokens[:, :-1],
      'targets': tokens[:, 1:],
      'loss_mask': ones,
      'accuracy_mask': ones,
      'padding_mask': np.ones((batch_size, length), bool),
  }


# ----------------------------------------------------------------------------------- the framework
class FrameworkStep:
  """relpos_jax.train's step for `config`, built as `relpos_jax.train.loop.train` builds it: a thunk doing
  `steps` updates, feeding its donated state back."""

  def __init__(self, config, data, batch, steps: int):
    from relpos_jax import train
    from relpos_jax.train import config as config_lib, optim, sharding, state as state_lib, step as step_lib

    mesh = sharding.make_mesh(jax.devices()[:1])
    parts, params = train.split_model(train.build_model(config))
    self.initial_params = reference_params_from(params)  # Copied now: the state is donated later.
    optimizer = optim.OptimizerSpec.from_config(config)
    self.state = sharding.replicate(state_lib.init_train_state(params, optimizer.build()), mesh)
    self.rest = sharding.replicate(parts.rest, mesh)
    self.key = sharding.replicate(step_lib.run_key(config.seed), mesh)
    self.batch = sharding.shard_batch(batch, mesh)
    self.step_fn = step_lib.make_train_step(
        parts.graphdef,
        data.objective,
        optimizer,
        config_lib.parse(config).encoder,
        mesh=mesh,
        use_padding_mask=data.uses_padding,
    )
    args = (self.state, self.rest, self.batch, self.key)
    self.memory = measure.compiled_memory(self.step_fn, args)
    self.executable = measure.compile_fn(self.step_fn, args)
    self.steps = steps

  def __call__(self):
    metrics = None
    for _ in range(self.steps):
      self.state, metrics = self.executable(self.state, self.rest, self.batch, self.key)
    return self.state.params, metrics

  def update_once(self):
    """One untimed update: (loss before it, params after it as the reference dict)."""
    self.state, metrics = self.executable(self.state, self.rest, self.batch, self.key)
    return float(metrics['loss']), reference_params_from(self.state.params)


# ----------------------------------------------------------------------------------- the reference
def alibi_slopes(num_heads: int) -> np.ndarray:
  """Press et al.'s geometric slopes 2^(-8h/H), h = 1..H (H a power of two, as in configs/lm.py)."""
  if num_heads & (num_heads - 1):
    raise ValueError(f'the reference ALiBi takes a power-of-two num_heads, got {num_heads}.')
  return np.asarray([2.0 ** (-8.0 * h / num_heads) for h in range(1, num_heads + 1)], np.float32)


def reference_params_from(framework_params) -> dict:
  """The framework's NNX params (DecoderLM, no learnable position params) as the reference dict."""
  p = jax.tree.map(jnp.copy, nnx.to_pure_dict(framework_params))
  layers = []
  for i in sorted(p['blocks']):
    b = p['blocks'][i]
    a, m = b['attention'], b['mlp']
    layers.append(
        {
            'attn_scale': b['attention_norm']['scale'],
            'wq': a['query']['kernel'],
            'wk': a['key']['kernel'],
            'wv': a['value']['kernel'],
            'wo': a['out']['kernel'],
            'mlp_scale': b['mlp_norm']['scale'],
            'w_up': m['up']['kernel'],
            'b_up': m['up']['bias'],
            'w_down': m['down']['kernel'],
            'b_down': m['down']['bias'],
        }
    )
  return {
      'embed': p['embed']['embedding'],
      'final_scale': p['final_norm']['scale'],
      'head_w': p['head']['kernel'],
      'head_b': p['head']['bias'],
      'layers': layers,
  }


def rms_norm(x, scale, eps: float = 1e-6):
  return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * scale


def alibi_attention(q, k, v, slopes):
  """Causal attention with ALiBi: scores q.k / sqrt(d) - m_h (i - j) for keys j <= i."""
  length, head_dim = q.shape[1], q.shape[-1]
  distance = jnp.arange(length)[:, None] - jnp.arange(length)[None, :]  # i - j
  scores = jnp.einsum('bihd,bjhd->bhij', q, k) / math.sqrt(head_dim)
  scores = scores - slopes[:, None, None] * jnp.maximum(distance, 0)
  scores = jnp.where(distance >= 0, scores, -jnp.inf)
  return jnp.einsum('bhij,bjhd->bihd', jax.nn.softmax(scores, axis=-1), v)


def reference_logits(params, tokens, *, num_heads: int):
  x = params['embed'][tokens]
  b, length, model_dim = x.shape
  heads = (b, length, num_heads, model_dim // num_heads)
  slopes = jnp.asarray(alibi_slopes(num_heads))
  for layer in params['layers']:
    h = rms_norm(x, layer['attn_scale'])
    q, k, v = ((h @ layer[w]).reshape(heads) for w in ('wq', 'wk', 'wv'))
    x = x + alibi_attention(q, k, v, slopes).reshape(b, length, model_dim) @ layer['wo']
    h = rms_norm(x, layer['mlp_scale'])
    x = x + jax.nn.gelu(h @ layer['w_up'] + layer['b_up']) @ layer['w_down'] + layer['b_down']
  return rms_norm(x, params['final_scale']) @ params['head_w'] + params['head_b']


def reference_token_mean_loss(logits, batch):
  ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch['targets'])
  mask = batch['loss_mask']
  return jnp.sum(ce * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def reference_optimizer(optim_config, total_steps: int) -> optax.GradientTransformation:
  """configs/lm.py's optimizer built directly from optax (warmup_cosine schedule)."""
  if optim_config.schedule != 'warmup_cosine':
    raise ValueError(f'the reference builds the warmup_cosine schedule only, got {optim_config.schedule!r}.')
  peak, warmup = float(optim_config.learning_rate), int(optim_config.warmup_steps)
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, peak, warmup, max(total_steps, warmup + 1), peak * float(optim_config.end_lr_fraction)
  )
  return optax.chain(
      optax.clip_by_global_norm(float(optim_config.grad_clip_norm)),
      optax.adamw(
          schedule,
          b1=float(optim_config.b1),
          b2=float(optim_config.b2),
          eps=float(optim_config.eps),
          weight_decay=float(optim_config.weight_decay),
          mask=lambda p: jax.tree.map(lambda x: x.ndim >= 2, p),
      ),
  )


class ReferenceStep:
  """The hand-written step: a thunk doing `steps` updates, feeding its donated params and state back."""

  def __init__(self, config, params: dict, batch, steps: int):
    m = config.model
    if m.encoder != 'alibi' or m.dropout_rate != 0.0 or m.dtype != 'float32':
      raise ValueError(
          f'the reference model is the default experiment (alibi, no dropout, float32); got '
          f'encoder={m.encoder!r}, dropout_rate={m.dropout_rate}, dtype={m.dtype!r}.'
      )
    num_heads = int(m.num_heads)
    tx = reference_optimizer(config.optim, int(config.train.steps))
    self.params, self.opt_state = params, tx.init(params)
    self.batch = jax.device_put(batch)

    def step(params, opt_state, batch):
      loss_fn = lambda p: reference_token_mean_loss(  # noqa: E731
          reference_logits(p, batch['inputs'], num_heads=num_heads), batch
      )
      loss, grads = jax.value_and_grad(loss_fn)(params)
      updates, opt_state = tx.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, loss

    self.step_fn = jax.jit(step, donate_argnums=(0, 1))
    args = (self.params, self.opt_state, self.batch)
    self.memory = measure.compiled_memory(self.step_fn, args)
    self.executable = measure.compile_fn(self.step_fn, args)
    self.steps = steps

  def __call__(self):
    loss = None
    for _ in range(self.steps):
      self.params, self.opt_state, loss = self.executable(self.params, self.opt_state, self.batch)
    return self.params, loss

  def update_once(self):
    """One untimed update: (loss before it, params after it)."""
    self.params, self.opt_state, loss = self.executable(self.params, self.opt_state, self.batch)
    return float(loss), jax.tree.map(np.asarray, self.params)


def check_same_update(framework: FrameworkStep, reference: ReferenceStep, length: int, updates: int = 2) -> str:
  """Runs `updates` untimed updates of each (the first has learning rate 0 on a warmup schedule, so two
  are needed to exercise the optimizer); raises unless every loss and the final params agree."""
  for _ in range(updates):
    loss_f, params_f = framework.update_once()
    loss_r, params_r = reference.update_once()
    if not math.isclose(loss_f, loss_r, rel_tol=1e-4):
      raise AssertionError(
          f'train_step at T={length}: the reference is not the same model: loss {loss_f} ' f'vs {loss_r}.'
      )
  worst = max(
      float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / (np.abs(np.asarray(b)) + 1e-3)))
      for a, b in zip(jax.tree.leaves(params_f), jax.tree.leaves(params_r))
  )
  if worst > 1e-3:
    raise AssertionError(
        f'train_step at T={length}: the reference is not the same optimizer: worst relative '
        f'parameter difference {worst:.2e} after {updates} updates.'
    )
  return f'{loss_f:.5f} = {loss_r:.5f}'


# ----------------------------------------------------------------------------------------- the run
def run(
    lengths=None, repeats: int = 5, warmup: int = 1, steps_per_sample: int = STEPS_PER_SAMPLE, config=None, data=None
) -> report.Section:
  """Framework vs reference train step at each sequence length (default: the config's training length)."""
  from relpos_jax import train
  from relpos_jax.train import config as config_lib

  config = default_config() if config is None else config
  data = train.build_data(config_lib.parse(config)) if data is None else data
  lengths = (int(config.data.train_length),) if not lengths else tuple(lengths)
  batch_size = int(config.train.batch_size)
  section = report.Section(
      title='3. A full train step: relpos_jax.train vs a hand-written JAX reference',
      timed=(
          f'The default experiment (configs/lm.py: DecoderLM, encoder {config.model.encoder!r}, '
          f'{config.model.num_layers} layers, model_dim {config.model.model_dim}, {config.model.num_heads} '
          f'heads, AdamW + clipping, batch {batch_size}). Timed: {steps_per_sample} consecutive updates '
          '(forward, backward, optimizer; state donated and fed back), one sample; tokens/s = batch x T x '
          'updates / median time; the ratio is the median over rounds of reference time / framework time '
          '(also in process CPU time, a cross-check on a shared machine). '
          '`framework` = relpos_jax.train.step.make_train_step on a one-device mesh; `reference` = plain '
          'JAX + optax, no framework code (benchmarks/train_step.py). Memory = XLA total (argument + output '
          '- alias + temp) of one step.'
      ),
      columns=[
          'T',
          'contender',
          'ms / update',
          'tokens/s',
          'tokens/s ratio',
          'ratio (CPU time)',
          'MiB',
          'loss after 1 update',
          'target',
      ],
  )
  spreads = []
  for length in lengths:
    batch = synthetic_batch(batch_size, length, data.vocab_size)
    framework = FrameworkStep(config, data, batch, steps_per_sample)
    reference = ReferenceStep(config, framework.initial_params, batch, steps_per_sample)
    check = check_same_update(framework, reference, length)
    timings = measure.time_interleaved({'framework': framework, 'reference': reference}, repeats=repeats, warmup=warmup)
    spreads += [t.spread for t in timings.values()]
    tokens = batch_size * length * steps_per_sample
    rate = {name: tokens / t.median for name, t in timings.items()}
    for name, contender in (('framework', framework), ('reference', reference)):
      ratio = 1.0 / timings[name].ratio_to(timings['reference'])  # tokens/s ratio = inverse time ratio
      target = ''
      if name == 'framework':
        target = f'met (>= {TARGET_RATIO})' if ratio >= TARGET_RATIO else f'**missed** (< {TARGET_RATIO})'
      cpu_ratio = 1.0 / timings[name].cpu_ratio_to(timings['reference'])
      section.add_row(
          length,
          name,
          report.ms(timings[name].median / steps_per_sample),
          f'{rate[name]:,.0f}',
          f'{ratio:.2f}',
          f'{cpu_ratio:.2f}',
          f'{measure.mib(contender.memory.total):.1f}',
          check,
          target,
      )
  section.notes.append(report.noise_note(spreads, repeats))
  return section
