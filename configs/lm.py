r"""Byte-level ("character-level") language model on the built-in corpus (the Python standard library).

A small causal transformer, trained at length 64 and evaluated at 64, 128 and 256 bytes: how the loss per
character holds beyond the training length is the length-generalization question in its LM form. Sized
to finish in about a minute on a laptop CPU:

    python -m experiments.train --config=configs/lm.py --workdir=/tmp/lm
    python -m experiments.train --config=configs/lm.py --config.model.encoder='rope' --workdir=/tmp/lm_rope

Variant `study` (`--config=configs/lm.py:study`): the default length-generalization study. Every encoder of
`study.encoders` trains this model at length 64 (same data stream and steps for every encoder, per seed), then is evaluated
on the same held-out test bytes seen through windows of 64, 128, 256, 512 and 1024 bytes (1x to 16x). Sized to finish
in about 10 minutes on a 2-core CPU:

    python -m experiments.length_generalization                      # this variant, ./results/default
    python -m experiments.length_generalization --config=configs/lm.py:study \
        --config.train.steps=2000 --config.model.num_layers=4 --workdir=/tmp/bigger

`study.encoders` holds 'label: spec' entries (any encoder spec; see relpos_jax.encoders.spec); `study.seeds`
the seeds every encoder is trained with (the table shows mean ± sample std over them):

    python -m experiments.length_generalization --config.study.seeds='(0,1,2,3,4)' --workdir=results/seeds5

The protocol (relpos_jax.study.protocol; every key is checked before anything is trained or written):
  eval.scored_tail       T: windows of every length end at the same anchors of the split and score only
                         their last T targets, so every length scores the same bytes (None: the shortest
                         evaluation length, 64 here; each length's scored set is fingerprinted in results.json)
  eval.num_tokens        scored tokens per length (num_tokens / T windows): 8,192 here, i.e. 128 windows per
                         length, 254k window tokens over the five lengths against 328k before (attention work
                         1.4x, since the long windows grow: 128 x 1024^2 at 1024 against 64 x 1024^2)
  eval.position_draws    K: a randomized encoder is evaluated on ordered random positions from [0,
                         max_position), the mean over K draws (as its reference code does); >= 1
  study.split            the split the tables report: 'test' (held-out files); 'validation' is refused when
                         the study chooses anything (lr_grid, learning_rates), as choices are made there
  study.lr_grid          peak learning rates tried per encoder at the first seed; the lowest validation loss
                         at the training length wins and the other seeds train with it (LR_GRID:
                         --config.study.lr_grid='(1e-3,3e-3,1e-2)'); None: no grid
  study.default_learning_rates  committed choices, 'label: lr' (STUDY_LEARNING_RATES: what the grid chose),
                         applied to the labels the study has, so the quick start does not search again
                         (study.learning_rates: your own, every label one of the study's); the table's
                         last column names each rate and how it was chosen (grid, committed, fixed =
                         optim.learning_rate; a re-evaluation: 'trained: <how>', the trained study's word)
  study.comparisons      'A vs B' or 'A vs B at <length | train | ood | longest>': paired differences over
                         seeds with 95% t intervals (results.md, results.json 'comparisons'); a randomized
                         entry's 0..L-1 row is '<label>@0..L-1'
  study.sequential_positions  randomized encoders also evaluated at 0..L-1, as the row '<label>@0..L-1'

FIRE's threshold starts at a quarter of the training length (16), the ratio of the paper (512 at 2,048);
'fire-512' keeps the reference code's absolute 512 as an ablation row (relpos_jax/encoders/fire.py).

Variant `study,long` (`--config=configs/lm.py:study,long`): the same study trained four times longer
(1,600 steps; warmup and checkpoints scaled) for a subset of encoders (LONG_LABELS: T5 with its published
layout, KERPLE-log, the lecture's distance bias and both monotone tables): do the findings hold with more
training? (docs/study_long/: --config.study.lr_grid='(3e-3,1e-2,3e-2)' --config.study.seeds='(0,1,2,3,4)',
the full command; what ran: the grid at seed 0 for every label, the 5 seeds for the compared pair only)

Variant `bpe` (`--config=configs/lm.py:bpe`, combines with the others): the corpus as byte-level BPE tokens,
a vocabulary of BPE_VOCAB_SIZE trained on the training split only (relpos_jax.data.bpe, cached in
data.tokenizer_cache); lengths count tokens, eval.scored_tail counts bytes, and bits_per_char is total bits over
total characters, on the byte-level runs' scale (`pip install tokenizers`):

    python -m experiments.train --config=configs/lm.py:bpe --config.data.corpus=austen --workdir=/tmp/lm_bpe

Variant `inference_extension` (`--config=configs/lm.py:inference_extension`): train with RoPE once (the
`study` variant's run), evaluate its parameters unchanged with inference-time extensions up to 16x, each set
for 16x from L_orig = 64 (docs/study_inference_extension/: --config.study.seeds='(0,1,2,3,4)'). Entries
'label: rope -> Y' reuse the trained run of each seed (relpos_jax.study.runner). Self-Extend and leaky ReRoPE are sized
so that the largest distance they show the model at 1024 stays inside the 64 trained positions:
Self-Extend (1023 // 32) + 32 - 1 = 62, leaky ReRoPE 32 + (1023 - 32) / 32 < 64.
Variant `long_context` (`--config=configs/lm.py:long_context`): the `study` variant's trained runs (read from
`study.trained_workdir`, no retraining) evaluated at 2,048 ... 65,536 bytes (32x to 1024x), plus 1,024
as the reference, with `model.attention_implementation='blockwise'` (tiles, every position term built per tile:
no (L, L) array at any length). The same targets at every length: windows end at 4 common anchors and score
their last 1,024 bytes (eval.scored_tail; 1,024 is the reference length, 4,096 scored bytes per length, four
windows of 65,536 at the longest). `learned` is left out (its table ends at position 1,023); the families the README
compares come first, so an interrupted run has them, then RoPE's trained runs under inference-time
extensions sized for 1024x ('label: rope -> Y', LONG_CONTEXT_EXTENSIONS):

    python -m experiments.length_generalization --config=configs/lm.py:long_context \
        --config.study.trained_workdir=results/default --workdir=results/long_context

Variant `long_context,contextual`: the same evaluation of the contextual study's runs whose kinds tile
(stick-breaking, FoX, DAPE v2, FoX's bias-only gate) beside that study's own baselines
(LONG_CONTEXT_CONTEXTUAL_LABELS):

    python -m experiments.length_generalization --config=configs/lm.py:long_context,contextual \
        --config.study.trained_workdir=results/contextual --workdir=results/long_context_contextual
"""

import ml_collections
from ml_collections.config_dict import placeholder

from relpos_jax.train.config_files import parse_variants

TRAIN_LENGTH = 64
# Variant bpe: 2.7 characters per token on the English test novel (4,096 gives 3.6 but makes the d=64 model's
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
# length 64, seed 0). Every encoder chose 1e-2, the grid's largest rate (README: the edge check at 3e-2).
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
# The comparisons the README states, as paired differences over seeds with 95% intervals.
STUDY_COMPARISONS = (
    'monotone-lin vs distance',
    'kerple_log vs fire',
    'fire vs fire-512',
    'rope+randomized vs rope',
    'rope+randomized vs rope+randomized@0..L-1',
)
CONTEXTUAL_COMPARISONS = ('stick_breaking vs dape2-kerple', 'fox vs fox-bias', 'kerple_log vs fire')

# The study's encoders that can encode 65,536 positions, in the order the long-context variant runs them (the
# families the README compares first, so an interrupted run has them), then RoPE's inference-time extensions,
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
    'rope+randomized',
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
# Variant `long_context,contextual`: the contextual study's runs whose kinds tile, beside its own baselines.
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
    # T5's published max_distance=128 leaves the buckets of distances >= 67 untrained at train length 64
    # (they keep their ~0 init while trained far buckets learn ~ -2); t5-32 is the layout whose every bucket
    # (saturating at distance 32) is trained, the regime of Press et al. (max_distance < train length).
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
# Variant `cross_corpus`: the default study's compared encoders and T5's log buckets (the lecture's table that
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
# Variant `long`: the labels of the default study trained for 1,600 steps.
LONG_LABELS = ('t5', 'kerple_log', 'distance', 'monotone-t5-32', 'monotone-lin')


# Variant `study,contextual`: the position-from-content encoders (cope, fox, ...) beside the extrapolating
# baselines and RoPE; docs/study_contextual: --config=configs/lm.py:study,contextual --config.study.seeds='(0,1,2)'.
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

# Train with RoPE, evaluate with Y (variant inference_extension).
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


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variants = parse_variants(
      arg, ('study', 'long', 'contextual', 'inference_extension', 'long_context', 'bpe', 'cross_corpus')
  )
  if 'cross_corpus' in variants:
    variants.add('study')
  if 'long_context' in variants:
    variants.add('study')  # it evaluates a study's runs: the default study's, or with 'contextual' that one's
  for extension in ('long', 'contextual'):
    if extension in variants and 'study' not in variants:
      raise ValueError(f"configs/lm.py: variant {extension!r} extends the study: use 'study,{extension}'.")
  if {'long', 'long_context'} <= variants:
    raise ValueError(
        "configs/lm.py: variants 'long' and 'long_context' do not combine: 'long_context' "
        'evaluates the trained runs of --config.study.trained_workdir.'
    )
  if {'long', 'contextual'} <= variants:
    raise ValueError("configs/lm.py: variants 'long' and 'contextual' are two different studies; choose one.")
  if 'inference_extension' in variants:
    others = sorted(variants & {'long', 'contextual', 'long_context'})
    if others:
      raise ValueError(
          f"configs/lm.py: 'inference_extension' is a study of its own (RoPE trained once, "
          f'evaluated with each extension); it does not combine with {others}.'
      )
    variants.add('study')
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
  if 'bpe' in variants:  # subword tokens (relpos_jax.train.token_inputs): lengths count tokens
    config.data.tokenizer = 'bpe'
    config.data.vocab_size = BPE_VOCAB_SIZE
    config.data.tokenizer_cache = placeholder(str)  # None: ~/.cache/relpos_jax/bpe

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

  if 'study' in variants:
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
    config.study.seeds = (0,)  # the quick start; the README's table: --config.study.seeds='(0,1,2,3,4)'
    config.study.split = 'test'  # what the table reports; choices are made on validation at length 64
    config.study.lr_grid = placeholder(tuple)  # e.g. --config.study.lr_grid='(1e-3,3e-3,1e-2)' (LR_GRID)
    config.study.selection_seed = placeholder(int)  # None: the grid trains at the first of the seeds
    config.study.comparisons = STUDY_COMPARISONS
    config.study.sequential_positions = True  # randomized encoders also at 0..L-1, a second row
    if 'contextual' in variants:
      config.study.title = 'Position from content: trained at 64, evaluated up to 16x'
      config.study.encoders = CONTEXTUAL_ENCODERS
      config.study.comparisons = CONTEXTUAL_COMPARISONS
  if 'long' in variants:
    config.train.steps = 1600
    config.train.log_every = 200
    config.train.checkpoint_every = 400
    config.optim.warmup_steps = 160
    config.study.title = 'Byte-level LM on the Python stdlib: trained at 64 for 1,600 steps, evaluated up to 16x'
    by_label = {entry.partition(':')[0].strip(): entry for entry in STUDY_ENCODERS}
    config.study.encoders = tuple(by_label[label] for label in LONG_LABELS)
    config.study.comparisons = ('monotone-lin vs distance',)
  if 'inference_extension' in variants:
    config.study.title = 'Train with RoPE at 64, evaluate with inference-time extensions up to 16x'
    config.study.description = (
        'Bits per character on the held-out test files; RoPE trained once per seed, its '
        'parameters evaluated unchanged with each extension (no retraining).'
    )
    config.study.encoders = INFERENCE_EXTENSION_ENCODERS
    config.study.comparisons = (
        'yarn vs ntk',
        'rerope_leaky vs self_extend',
        'rerope vs self_extend',
        'self_extend vs dual_chunk',
    )
  if 'long_context' in variants:
    config.eval.lengths = LONG_CONTEXT_LENGTHS
    # Windows of every length end at 4 common anchors and score their last 1,024 targets: the same 4,096
    # test bytes at every length (4 windows of 65,536 at the longest; 1,024 is the reference length).
    config.eval.scored_tail = 1024
    config.eval.num_tokens = 4096
    config.eval.max_tokens_per_batch = 65_536
    config.model.attention_implementation = 'blockwise'
    by_label = {e.partition(':')[0].strip(): e for e in STUDY_ENCODERS + CONTEXTUAL_ENCODERS}
    if 'contextual' in variants:
      config.study.encoders = tuple(by_label[label] for label in LONG_CONTEXT_CONTEXTUAL_LABELS)
      config.study.comparisons = ('stick_breaking vs dape2-kerple', 'stick_breaking vs kerple_log', 'fox vs fox-bias')
      config.study.trained_workdir = 'results/contextual'  # --config=configs/lm.py:study,contextual trains here
    else:
      config.study.encoders = tuple(by_label[label] for label in LONG_CONTEXT_LABELS) + LONG_CONTEXT_EXTENSIONS
      config.study.comparisons = (
          'kerple_log vs fire',
          'fire vs fire-512',
          'monotone-lin vs distance',
          'rope+randomized vs rope',
          'rope+randomized vs rope+randomized@0..L-1',
          'rerope vs self_extend',
      )
      config.study.trained_workdir = 'results/default'  # where `python -m experiments.length_generalization` trains
    config.study.title = 'Byte-level LM on the Python stdlib: trained at 64, evaluated up to 1024x'
    config.study.description = (
        "The default study's trained runs (no retraining), evaluated with blockwise "
        'attention on the same 4,096 held-out test bytes at every length.'
    )
  if 'cross_corpus' in variants:
    config.data.corpus = 'austen'  # English prose; --config.data.corpus=stdlib asks Python source again
    unit = 'BPE tokens' if 'bpe' in variants else 'bytes'
    config.study.title = f'The default study on English prose ({unit}): trained at 64, evaluated up to 16x'
    config.study.description = (
        'Bits per character on the held-out test documents (the same 65,536 characters at every length); the '
        f'learning rate chosen per encoder on validation at seed {SELECTION_SEED}, outside the reported seeds.'
    )
    by_label = {entry.partition(':')[0].strip(): entry for entry in STUDY_ENCODERS}
    config.study.encoders = tuple(by_label[label] for label in CROSS_CORPUS_LABELS)
    config.study.comparisons = CROSS_CORPUS_COMPARISONS
    config.study.seeds = CROSS_CORPUS_SEEDS
    config.study.lr_grid = CROSS_CORPUS_LR_GRID
    config.study.selection_seed = SELECTION_SEED
    # 1,024 windows per length, each scoring its last 64 targets: >= 64k scored characters (the floor).
    config.eval.num_tokens = 65_536
  if 'study' in variants:
    # The rates committed for these labels: the default study's grid chose them at 400 steps, so variant
    # 'long' (1,600 steps) chooses its own (--config.study.lr_grid) rather than reuse them.
    # 'cross_corpus' chooses its own on its corpus.
    config.study.default_learning_rates = () if variants & {'long', 'cross_corpus'} else STUDY_LEARNING_RATES
    config.study.learning_rates = ()  # your own commitments: every label one of the study's
  return config
