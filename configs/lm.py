r"""Byte-level ("character-level") language model on the built-in corpus (the Python standard library).

A small causal transformer, trained at length 64 and evaluated at 64, 128 and 256 bytes: how the loss per
character holds beyond the training length is the length-generalization question in its LM form. Sized
to finish in about a minute on a laptop CPU:

    python -m experiments.train --config=configs/lm.py --workdir=/tmp/lm
    python -m experiments.train --config=configs/lm.py --config.model.encoder='rope' --workdir=/tmp/lm_rope

Variant `bpe` (`--config=configs/lm.py:bpe`): the corpus as byte-level BPE tokens, a vocabulary of
BPE_VOCAB_SIZE trained on the training split only (relpos_jax.data.bpe, cached in data.tokenizer_cache); lengths
count tokens, eval.scored_tail counts bytes, and bits_per_char is total bits over total characters, on the
byte-level runs' scale (`pip install tokenizers`):

    python -m experiments.train --config=configs/lm.py:bpe --config.data.corpus=austen --workdir=/tmp/lm_bpe

The studies built on this run are files of their own, `configs/studies/<name>.py` (one per docs/<name>/), which
import this module's pieces (`run_config`, `study_config`, the encoder lists and committed learning rates
below) through `relpos_jax.resources.config_module('lm')`:

    configs/studies/study.py                          the default study (docs/study)
    configs/studies/study_long.py                     trained 4x longer (docs/study_long)
    configs/studies/study_contextual.py               position from content (docs/study_contextual)
    configs/studies/study_inference_extension.py      RoPE with inference-time extensions (docs/study_...)
    configs/studies/study_long_context.py             the default study's runs at 1024x (docs/study_long_context)
    configs/studies/study_long_context_contextual.py  the contextual study's runs at 1024x
    configs/studies/study_english.py                  the default study on English prose (docs/study_english)
    configs/studies/study_english_bpe.py              the same in BPE tokens

    python -m experiments.length_generalization --config=configs/studies/study.py --workdir=results/default

Legacy names: the study variants this file had (`study`, `study,long`, `study,contextual`, `inference_extension`,
`long_context`, `long_context,contextual`, `cross_corpus`, `cross_corpus,bpe`; LEGACY_STUDIES) still load, each
the studies file it became (tests/test_configs.py pins that), so commands recorded before the move still run.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from relpos_jax import resources
from relpos_jax.train.config import ConfigError
from relpos_jax.train.config_files import parse_variants

TRAIN_LENGTH = 64
# BPE runs: 2.7 characters per token on the English test novel (4,096 gives 3.6 but makes the d=64 model's
# output layer the cost of a run, 6x a byte run's, on a CPU).
BPE_VOCAB_SIZE = 1024
# FIRE's threshold at a quarter of the training length, the paper's ratio (512 at its 2,048; see
# relpos_jax/encoders/fire.py); 'fire-512' keeps the reference code's absolute 512 as an ablation.
FIRE = f'fire: fire(init_threshold={TRAIN_LENGTH / 4})'
FIRE_512 = 'fire-512: fire(init_threshold=512.0)'
# Learning rates tried per encoder when a study is run with --config.study.lr_grid (LR_GRID): a factor of 3
# around the fixed 3e-3.
LR_GRID = (1e-3, 3e-3, 1e-2)
# What the grid chose, committed ('label: lr'), so the quick start does not search again: read from each run's
# learning_rate in docs/study/results.json and docs/study_contextual/results.json (lowest validation loss at
# length 64, seed 0). Every encoder chose 1e-2, the grid's largest rate (docs/study: the edge check at 3e-2).
STUDY_LEARNING_RATES = tuple(
    f'{label}: 0.01'
    for label in (
        'nope',
        'sinusoidal',
        'learned',
        'distance',
        'shaw',
        'piecewise',
        't5',
        't5-32',
        'multiscale',
        'sinusoidal+t5',
        'monotone-t5-32',
        'monotone-lin',
        'alibi',
        'kerple_log',
        'fire',
        'fire-512',
        'rope',
        'rope+randomized',
        'stick_breaking',
        'dape2-kerple',
        'fox',
        'fox-bias',
    )
)
# The comparisons docs/study states, as paired differences over seeds with 95% intervals.
STUDY_COMPARISONS = (
    'monotone-lin vs distance',
    'kerple_log vs fire',
    'fire vs fire-512',
    'rope+randomized vs rope',
    'rope+randomized vs rope+randomized@0..L-1',
)
CONTEXTUAL_COMPARISONS = ('stick_breaking vs dape2-kerple', 'fox vs fox-bias', 'kerple_log vs fire')

# The study's encoders that can encode 65,536 positions, in the order the long-context study runs them (the
# families docs/study compares first, so an interrupted run has them), then RoPE's inference-time extensions,
# each sized for 1024x from L_orig = 64: Self-Extend's largest shown distance (65535 // 2048) + 32 - 1 = 62
# and leaky ReRoPE's 32 + 65503 / 2048 < 64 stay inside the trained positions; YaRN at factor 1024.
LONG_CONTEXT_LABELS = (
    'alibi',
    'kerple_log',
    'fire',
    'rope',
    'nope',
    'distance',
    't5',
    'monotone-lin',
    'fire-512',
    # Not rope+randomized: trained at random positions from [0, 2048), it is evaluated as published at random
    # positions from that range, which cannot place a window past 2,048 (plan.check_random_positions).
    't5-32',
    'shaw',
    'sinusoidal',
    'multiscale',
)
LONG_CONTEXT_EXTENSIONS = (
    'self_extend: rope -> self_extend(rope, group_size=2048, window=32)',
    'yarn: rope -> rope(scaling="yarn", factor=1024.0, original_max_position=64)',
    'rerope: rope -> rerope(rope, window=32)',
)
# configs/studies/study_long_context_contextual.py: the contextual study's runs whose kinds tile, beside its own
# baselines.
LONG_CONTEXT_CONTEXTUAL_LABELS = (
    'stick_breaking',
    'fox',
    'dape2-kerple',
    'kerple_log',
    'fox-bias',
    'alibi',
    'rope',
    'nope',
)
LONG_CONTEXT_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
# configs/studies/study_long_context*_seeds.py (`seeded_long_context`): RoPE's extensions sized for 256x from
# L_orig = 64: Self-Extend's largest shown distance (16383 // 512) + 32 - 1 = 62 stays inside the trained positions.
SEEDED_LONG_CONTEXT_EXTENSIONS = (
    'self_extend: rope -> self_extend(rope, group_size=512, window=32)',
    'yarn: rope -> rope(scaling="yarn", factor=256.0, original_max_position=64)',
    'rerope: rope -> rerope(rope, window=32)',
)

# The position-free control, absolute tables, every variant of the lecture (relative distance, Shaw's
# clipped table, piecewise-linear and logarithmic range extension, multi-scale tables, absolute + relative)
# and today's choices.
STUDY_ENCODERS = (
    'nope',
    'sinusoidal',
    'learned: learned(max_length=1024)',
    'distance',  # the lecture's R[i, j] = j - i (section 2)
    'shaw: shaw(max_distance=16)',
    'piecewise: piecewise(bidirectional=False)',  # section 5a, piecewise-linear
    # T5's published max_distance=128 leaves the buckets of distances >= 67 untrained at training length 64
    # (they keep their ~0 init while trained far buckets learn ~ -2); t5-32 is the layout whose every bucket
    # (saturating at distance 32) is trained, the regime of Press et al. (max_distance < training length).
    't5: t5(bidirectional=False)',  # section 5a, logarithmic
    't5-32: t5(bidirectional=False, num_buckets=16, max_distance=32)',
    'multiscale',  # section 5b
    'sinusoidal+t5: sinusoidal + t5(bidirectional=False)',  # section 5c, absolute + relative
    # The lecture's log buckets made to extrapolate (docs/lecture_variants.md): t5-32's buckets as knots of
    # a bias monotone beyond distance 7, interpolated in log-distance, continued past the last knot.
    'monotone-t5-32: monotone(t5(bidirectional=False, num_buckets=16, max_distance=32), window=8, ' 'init_slope=4.0)',
    # The same knots starting from the lecture's distance bias -r_h n (rates 2 ... 1/4) instead of a log decay.
    'monotone-lin: monotone(t5(bidirectional=False, num_buckets=16, max_distance=32), window=8, '
    'init_slope=2.0, init_decay="linear")',
    'alibi',
    'kerple_log',
    FIRE,
    FIRE_512,
    'rope',
    'rope+randomized: randomized(rope, max_position=2048)',
)
# configs/studies/study_english.py: the default study's compared encoders and T5's log buckets (the lecture's table that
# fails), asked the same question on another corpus (--config.data.corpus, and with `bpe` in BPE tokens).
# In the order the findings need them, so that an interrupted study has whole findings first.
CROSS_CORPUS_LABELS = (
    'distance',
    'monotone-lin',
    'kerple_log',
    'fire',
    'rope',
    'rope+randomized',
    'alibi',
    'fire-512',
    't5',
)
CROSS_CORPUS_COMPARISONS = STUDY_COMPARISONS + ('kerple_log vs alibi', 't5 vs distance')
# The learning-rate grid reaches 3e-2 (every encoder chose the top of LR_GRID on Python bytes) and trains at a
# seed outside the reported ones, so the choice does not bias the reported mean.
CROSS_CORPUS_LR_GRID = (3e-3, 1e-2, 3e-2)
CROSS_CORPUS_SEEDS = (0, 1, 2, 3, 4)
SELECTION_SEED = 100
# configs/studies/study_python_lecture.py: the default study's other nine encoders (the lecture's tables, its
# absolute + relative combination, the monotone fix of its log buckets, and the absolute and position-free
# controls) under the cross-corpus protocol on Python bytes, so that no encoder of the default study rests on one
# seed. In the order the findings need them, so that an interrupted study has whole findings first.
LECTURE_LABELS = (
    't5-32',
    'monotone-t5-32',
    'shaw',
    'multiscale',
    'piecewise',
    'sinusoidal',
    'sinusoidal+t5',
    'nope',
    'learned',
)
LECTURE_COMPARISONS = (
    'monotone-t5-32 vs t5-32',  # the lecture's log buckets made monotone beyond the trained distances
    'shaw vs t5-32',  # a clipped table against log buckets saturating at the same training length
    'multiscale vs shaw',  # several clipped scales against one
    'piecewise vs t5-32',  # piecewise-linear against logarithmic range extension
    'sinusoidal+t5 vs sinusoidal',  # absolute + relative against absolute alone
    'nope vs sinusoidal',  # no position against the absolute table that fails
)
# configs/studies/study_long.py: the labels of the default study trained for 1,600 steps.
LONG_LABELS = ('t5', 'kerple_log', 'distance', 'monotone-t5-32', 'monotone-lin')


# configs/studies/study_contextual.py: the position-from-content encoders (cope, fox, ...) beside the extrapolating
# baselines and RoPE (docs/study_contextual).
CONTEXTUAL_ENCODERS = (
    'nope',
    'alibi',
    'kerple_log',
    FIRE,
    'rope',
    'cope',
    'fox',
    'fox-bias: fox(bias_only=True)',
    'stick_breaking',
    'dape-kerple: dape(kerple_log)',
    'dape2-kerple: dape(kerple_log, version=2)',
    'rope+ssmax: rope + ssmax',
    'ssmax',
    'logn: logn(train_length=64)',
    'path',  # last: the slowest run on a CPU (its trained runs predate the chunked logits: equal to 2e-5)
)

# Train with RoPE, evaluate with Y (configs/studies/study_inference_extension.py).
INFERENCE_EXTENSION_ENCODERS = (
    'rope',
    'linear: rope -> rope(scaling="linear", factor=16.0)',
    'ntk: rope -> rope(scaling="ntk", factor=16.0)',
    # factor 1: the NTK factor is exactly L / L_orig at every evaluation length (HF's dynamic rule).
    'dynamic_ntk: rope -> rope(scaling="dynamic", factor=1.0, original_max_position=64)',
    'yarn: rope -> rope(scaling="yarn", factor=16.0, original_max_position=64)',
    'yarn_dynamic: rope -> rope(scaling="yarn", dynamic=True, original_max_position=64)',
    'self_extend: rope -> self_extend(rope, group_size=32, window=32)',
    'rerope: rope -> rerope(rope, window=32)',
    'rerope_leaky: rope -> rerope(rope, window=32, leak=32)',
    'dual_chunk: rope -> dual_chunk(rope, chunk=48, local_window=4)',
)


# The study variants this file had, each now the studies file it became (configs/studies/<name>.py). A variant
# set is read as it was: 'cross_corpus', 'long_context' and 'inference_extension' implied 'study'.
LEGACY_STUDIES = {
    'study': 'study',
    'study,long': 'study_long',
    'study,contextual': 'study_contextual',
    'inference_extension': 'study_inference_extension',
    'long_context': 'study_long_context',
    'long_context,contextual': 'study_long_context_contextual',
    'cross_corpus': 'study_english',
    'cross_corpus,bpe': 'study_english_bpe',
}
LEGACY_VARIANTS = ('study', 'long', 'contextual', 'inference_extension', 'long_context', 'bpe', 'cross_corpus')


def with_bpe(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """`config` on subword tokens (relpos_jax.train.token_inputs): lengths count tokens."""
  config.data.tokenizer = 'bpe'
  config.data.vocab_size = BPE_VOCAB_SIZE
  config.data.tokenizer_cache = placeholder(str)  # None: ~/.cache/relpos_jax/bpe
  return config


def run_config(*, bpe: bool = False) -> ml_collections.ConfigDict:
  """The LM training run (`--config=configs/lm.py`, with `bpe` `configs/lm.py:bpe`)."""
  config = ml_collections.ConfigDict()
  config.seed = 0

  config.model = ml_collections.ConfigDict()
  config.model.encoder = 'alibi'  # any encoder spec: 'rope', 't5(bidirectional=False)', ...
  config.model.num_layers = 2
  config.model.model_dim = 64
  config.model.num_heads = 4
  config.model.mlp_ratio = 4
  config.model.dropout_rate = 0.0
  config.model.dtype = 'float32'

  config.data = ml_collections.ConfigDict()
  config.data.source = 'corpus'
  config.data.corpus = 'stdlib'
  config.data.max_train_bytes = 8_000_000
  config.data.train_length = TRAIN_LENGTH
  if bpe:
    with_bpe(config)

  config.optim = ml_collections.ConfigDict()
  config.optim.learning_rate = 3e-3
  config.optim.schedule = 'warmup_cosine'
  config.optim.warmup_steps = 30
  config.optim.end_lr_fraction = 0.1
  config.optim.weight_decay = 0.01
  config.optim.b1 = 0.9
  config.optim.b2 = 0.98
  config.optim.eps = 1e-9
  config.optim.grad_clip_norm = 1.0

  config.train = ml_collections.ConfigDict()
  config.train.steps = 300
  config.train.batch_size = 32
  config.train.log_every = 50
  config.train.checkpoint_every = 100
  config.train.keep_checkpoints = 2
  # None: TensorBoard events beside metrics.jsonl iff tensorboardX is installed (decided where they are written,
  # so this file reads the same on every machine); True: required (a clear error without it); False: off.
  config.train.tensorboard = placeholder(bool)

  config.eval = ml_collections.ConfigDict()
  config.eval.every = 150
  config.eval.lengths = (64, 128, 256)
  config.eval.batch_size = 32
  config.eval.num_examples = 64  # windows per length (each scores its last eval.scored_tail targets)
  config.eval.pad_multiple = 1
  config.eval.seed = 0
  config.eval.num_tokens = placeholder(int)  # optional: scored tokens per length
  config.eval.max_tokens_per_batch = placeholder(int)  # optional: cap on tokens per eval batch
  config.eval.scored_tail = placeholder(int)  # T, scored targets per window; None: the shortest length
  config.eval.position_draws = 4  # randomized encoders: random evaluation positions, mean over 4 draws
  return config


def study_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """The default study (configs/studies/study.py documents each key): the run trained 400 steps at 64 and
  evaluated once, after training, at 64 ... 1024 on the same 8,192 test bytes; the other LM studies change it.
  `arg`: the studies file's own (`--config=configs/studies/<name>.py:<arg>`); they take none, so one is refused."""
  parse_variants(arg, ())
  config = run_config()
  config.train.steps = 400
  config.train.log_every = 100
  config.train.checkpoint_every = 200
  config.optim.warmup_steps = 40
  config.eval.every = 0  # evaluate once, after training
  config.eval.lengths = (64, 128, 256, 512, 1024)
  # 128 windows per length, each ending at one of 128 common anchors and scoring its last 64 targets:
  # the same 8,192 test bytes at every length (each seen with up to 1,024 bytes of context at 1024).
  config.eval.num_tokens = 8_192
  config.eval.max_tokens_per_batch = 16_384  # long windows in small batches: fits any laptop
  config.study = ml_collections.ConfigDict()
  config.study.title = 'Byte-level LM on the Python stdlib: trained at 64, evaluated up to 16x'
  config.study.description = (
      'Bits per character on the held-out test files (the same bytes at every length); every encoder '
      'trains the same model, data stream and steps.'
  )
  config.study.encoders = STUDY_ENCODERS
  config.study.seeds = (0,)  # the README's quick start; docs/study's table: --config.study.seeds='(0,1,2,3,4)'
  config.study.split = 'test'  # what the table reports; choices are made on validation at length 64
  config.study.lr_grid = placeholder(tuple)  # e.g. --config.study.lr_grid='(1e-3,3e-3,1e-2)' (LR_GRID)
  config.study.selection_seed = placeholder(int)  # None: the grid trains at the first of the seeds
  config.study.comparisons = STUDY_COMPARISONS
  config.study.sequential_positions = True  # randomized encoders also at 0..L-1, a second row
  # The rates the default study's grid chose (at 400 steps, on Python bytes); a study trained otherwise
  # sets () and chooses its own (--config.study.lr_grid).
  config.study.default_learning_rates = STUDY_LEARNING_RATES
  config.study.learning_rates = ()  # your own commitments: every label one of the study's
  return config


def long_context_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """A study's trained runs evaluated at 1,024 ... 65,536 with blockwise attention (configs/studies/
  study_long_context*.py set the runs: study.encoders and study.trained_workdir)."""
  config = study_config(arg)
  config.eval.lengths = LONG_CONTEXT_LENGTHS
  # Windows of every length end at 4 common anchors and score their last 1,024 targets: the same 4,096
  # test bytes at every length (4 windows of 65,536 at the longest; 1,024 is the reference length).
  config.eval.scored_tail = 1024
  config.eval.num_tokens = 4096
  config.eval.max_tokens_per_batch = 65_536
  config.model.attention_implementation = 'blockwise'
  config.study.title = 'Byte-level LM on the Python stdlib: trained at 64, evaluated up to 1024x'
  config.study.description = (
      "The default study's trained runs (no retraining), evaluated with blockwise "
      'attention on the same 4,096 held-out test bytes at every length.'
  )
  return config


def seeded_long_context(config: ml_collections.ConfigDict, trained: str) -> ml_collections.ConfigDict:
  """A one-seed long-context study's `config` asked on 3 seeds and 16 windows a length (the scored tails fall in 11
  of the 21 test files), to 256x: 16,384 bytes, where a 2-core CPU takes hours and an accelerator minutes (the
  one-seed studies keep 1024x). The trained study, `trained` in the description, must hold those seeds: train it
  with --config.study.seeds='(0,1,2)'."""
  config.eval.lengths = tuple(n for n in LONG_CONTEXT_LENGTHS if n <= 16_384)
  config.eval.num_tokens = 16 * config.eval.scored_tail
  config.eval.max_tokens_per_batch = 16_384
  config.study.seeds = (0, 1, 2)
  config.study.title = config.study.title.replace('up to 1024x', 'up to 256x on 3 seeds')
  config.study.description = (
      f'{trained} trained runs at seeds 0-2 (no retraining), evaluated with blockwise attention on the same '
      f'{config.eval.num_tokens:,} held-out test bytes at every length (16 windows, each scoring its last 1,024 bytes).'
  )
  return config


def select(labels, encoders=STUDY_ENCODERS + CONTEXTUAL_ENCODERS) -> tuple[str, ...]:
  """The 'label: spec' entries of `encoders` named by `labels`, in the order of `labels`."""
  by_label = {entry.partition(':')[0].strip(): entry for entry in encoders}
  return tuple(by_label[label] for label in labels)


def _implied(variants: set[str]) -> frozenset[str]:
  return frozenset(
      variants | ({'study'} if variants & {'cross_corpus', 'long_context', 'inference_extension'} else set())
  )


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """The run (no arg), the run on BPE tokens ('bpe'), or a legacy study name (LEGACY_STUDIES): its studies file."""
  variants = parse_variants(arg, LEGACY_VARIANTS)
  if variants <= {'bpe'}:
    return run_config(bpe=bool(variants))
  for names, study in LEGACY_STUDIES.items():
    if _implied(parse_variants(names, LEGACY_VARIANTS)) == _implied(variants):
      return resources.config_module(f'studies/{study}').get_config()
  studies = ', '.join(f'{names} = configs/studies/{study}.py' for names, study in LEGACY_STUDIES.items())
  raise ConfigError(
      f'configs/lm.py: the variants {sorted(variants)} name no study (each study is its own file now; the '
      f'legacy names: {studies}); the run: configs/lm.py or configs/lm.py:bpe.'
  )
