r"""The protocol of Ruoss et al. 2023 ("Randomized Positional Encodings Boost Length Generalization of
Transformers"): a bidirectional transformer on an algorithmic task. Variants (after the path):

  (none)      CPU scale: training lengths n ~ U{1..20} (one length per batch, padded to 4 length buckets, so
              4 compilations), evaluation at the training length and beyond; a few minutes on a CPU
  published   the published protocol, for a TPU or GPU (below)

    python -m experiments.train --config=configs/algorithmic.py --workdir=/tmp/even_pairs
    python -m experiments.train --config=configs/algorithmic.py --config.data.task=parity_check \
        --config.model.encoder='randomized(rope)' --workdir=/tmp/parity
    python -m experiments.train --config=configs/algorithmic.py:published --workdir=/tmp/rpe \
        --config.data.task=duplicate_string --config.optim.learning_rate=3e-4 --config.seed=3

The studies and suites built on this run are files of their own, `configs/studies/<name>.py`, which import this
module's pieces (`run_config`, `suite_config`, the task and encoder lists, `suite_protocols`) through
`relpos_jax.resources.config_module('algorithmic')`:

  even_pairs.py        a length-generalization study: every encoder of `study.encoders` trains this run
  ruoss_published.py   the same on the published protocol (below): each encoder family that paper compares
  suite.py             the benchmark suite (relpos_jax.study.suite; docs/suite): every task below, each with its
                       own protocol, the same encoders and seeds, at CPU scale
  suite_published.py   the suite at the papers' scale (the published protocol)
  suite_ruoss.py       Ruoss et al. 2023's claim at CPU scale (docs/suite_ruoss: RUOSS_TASKS, RoPE against
                       randomized RoPE at max_position 2x and 8x the longest test sequence and 2048, 3 seeds,
                       a learning-rate grid)
  suite_abacus.py      Abacus as McLeish et al. 2024 embed it (docs/suite_abacus: a learned input embedding of
                       each digit's significance) beside NoPE, FIRE and RoPE, addition to 6x the trained digits
  suite_contextual.py  the causal tasks (docs/suite_contextual; CONTEXTUAL_TASKS: flip-flop, the claim of CoPE
                       and FoX's authors about position from content, multi-query associative recall, the
                       token-level passkey, counting (count_copy, and CoPE's own counting task, cope_counting),
                       plain addition and selective copying) with the content-dependent encoders (CoPE, FoX,
                       stick-breaking) beside NoPE, RoPE and ALiBi, the CPU suite's protocols

    python -m experiments.length_generalization --config=configs/studies/even_pairs.py --workdir=results/even_pairs
    python -m experiments.length_generalization --config=configs/studies/ruoss_published.py \
        --config.data.task=reverse_string --config.optim.learning_rate=3e-4 --workdir=gs://.../reverse
    python -m experiments.suite --workdir=docs/suite            # configs/studies/suite.py
    python -m experiments.suite --config=configs/studies/suite_published.py --workdir=gs://.../suite
    python -m experiments.suite --config=configs/studies/suite_ruoss.py --workdir=docs/suite_ruoss
    python -m experiments.suite --config=configs/studies/suite_contextual.py --workdir=docs/suite_contextual
    python -m experiments.suite --config=configs/studies/suite_abacus.py --workdir=docs/suite_abacus

Legacy names: the study and suite variants this file had (`study`, `published,study`, `suite`, `published,suite`,
`ruoss`, `contextual`, `abacus`; LEGACY_STUDIES) still load, each the studies file it became
(tests/test_configs.py pins that), so commands recorded before the move still run.

configs/studies/even_pairs.py (CPU scale): evaluated by per-output-token accuracy at 10 and 20 (in
distribution) and 30, 40, 60, 100 (out of distribution), about 2 minutes per encoder on a 2-core CPU. NoPE is in
the set as the control: a bidirectional model without positions cannot see order (the run warns), so its accuracy
marks chance for order-dependent tasks.

`published`, from the paper and its reference code (google-deepmind/randomized_positional_encodings):
  model     bidirectional transformer, 5 layers, model_dim 64, 8 heads, MLP widening 4, dropout 0.1
            (`TransformerConfig` defaults and `_ARCHITECTURE_PARAMS` of experiments/example.py); the
            encoding their example trains is randomized relative (Transformer-XL) with L = 2048
  data      lengths n ~ U{1..N}, N = 40, one length per batch; batch size 128
  optim     Adam (`l2_weight = 0`), constant learning rate, gradient clipping at global norm 1
            (`max_grad_norm`); the paper sweeps learning rates {1e-4, 3e-4, 5e-4} over 10 seeds and
            trains 2,000,000 steps (the example script's own defaults are 10,000 steps at 1e-3)
  loss      per example, the sum of the cross-entropies of its output positions, averaged over the batch
  eval      every length M in N+1 .. 500, 512 examples each (`range_test_total_batch_size`), scored by
            per-token accuracy; the paper's score is the mean accuracy over those lengths
Deviation: the 460 evaluation lengths are padded to multiples of 32 (`eval.pad_multiple`), so they compile
15 shapes instead of 460; padded keys are masked, so the scores are those of the unpadded sequences. In
configs/studies/ruoss_published.py, each encoder family that paper compares, with and without randomized
positions (max_position 2048).

configs/studies/suite.py: the 15 tasks of the Chomsky hierarchy (Deletang et al. 2023; Ruoss et al. 2023),
flip_flop (Liu et al. 2023), mqar (Arora et al. 2023), passkey (byte level, and `passkey_tokens`: its template
one token per sentence), selective_copy (Gu & Dao 2023; CoPE's splits), count_copy (Kazemnejad et al. 2023),
cope_counting (Golovneva et al. 2024's counting task), and addition with plain, coupled (Cho et al. 2024) and
Abacus (McLeish et al. 2024) positions. CPU scale: this file's model, 1,000 to 2,500 steps per task (see
`suite_protocols`), training lengths 1..16 (flip_flop 1..32 instruction pairs, mqar 1..8 pairs, addition 1..8
digits), evaluated to 4x (addition 3x), 2 seeds, 6 encoders, every task but passkey (341..431 bytes at 1..2
filler sentences: about 12 hours of this CPU for its 12 runs). With `published`: Ruoss et al.'s
protocol for the Chomsky tasks (train 1..40, test 41..500, every 10th length; 10,000 steps, the example
script's count, the paper's 2,000,000 one override away), the other tasks at their papers' lengths, 3 seeds
(configs/studies/suite_published.py).
"""

import math

import ml_collections
from ml_collections.config_dict import placeholder

from relpos_jax import resources
from relpos_jax.data.tasks import registry as task_registry
from relpos_jax.train.config_files import parse_variants

STUDY_ENCODERS = (
    'nope',
    'sinusoidal',
    'learned: learned(max_length=128)',
    'shaw: shaw(max_distance=16)',
    't5',
    'alibi: alibi(bidirectional=True)',
    'kerple_log',
    'fire',
    'transformer_xl',
    'rope',
    'rope+randomized: randomized(rope, max_position=2048)',
)
PUBLISHED_STUDY_ENCODERS = (
    'nope',
    'sinusoidal',
    'transformer_xl',
    'rope',
    'alibi: alibi(bidirectional=True)',
    'sinusoidal+randomized: randomized(sinusoidal, max_position=2048)',
    'transformer_xl+randomized: randomized(transformer_xl, max_position=2048)',
    'rope+randomized: randomized(rope, max_position=2048)',
    'alibi+randomized: randomized(alibi(bidirectional=True), max_position=2048)',
)

# The suite's tasks, read from the one task list (relpos_jax.data.tasks.registry), in its order: the 15 of the
# Chomsky hierarchy, then every other task but those the registry keeps out of the suite (NOT_IN_SUITE: `shift`,
# and RULER's two, which configs/studies/suite_ruler.py studies).
SUITE_CHOMSKY = task_registry.CHOMSKY_TASKS
SUITE_OTHER = tuple(t for t in task_registry.OTHER_TASKS if t not in task_registry.NOT_IN_SUITE)
SUITE_ENCODERS = (
    'nope',
    'rope',
    'rope+randomized: randomized(rope, max_position=2048)',
    'alibi: alibi(bidirectional=True)',
    't5',
    # Position from content: DAPE is the content-dependent kind that is defined for bidirectional models
    # (CoPE, FoX, stick-breaking and PaTH are causal only), over the same ALiBi bias as above.
    'dape: dape(alibi(bidirectional=True))',
)
# The published preset's randomized RoPE: max_position 4x each task's longest test sequence (padded tokens; for
# the Chomsky tasks 2,048 to 6,016, about the paper's 2048 over 500 input symbols), since a fixed 2048 is below
# flip_flop's 2,049 tokens at 1,024 pairs and passkey's 11,776, where random evaluation positions cannot be drawn.
PUBLISHED_SUITE_ENCODERS = tuple(
    'rope+randomized: randomized(rope, max_position={4*longest})' if e.startswith('rope+randomized') else e
    for e in SUITE_ENCODERS
)

# count_copy's alphabet (the task's default, named in the protocols so the protocol table shows it): the word
# repeated is drawn per example, as Kazemnejad et al. draw it from their vocabulary.
COUNT_COPY_SYMBOLS = 16

# Liu et al. 2023's held-out flip-flop sets: FFL(0.98), sparse (almost every instruction an ignore, so a read
# looks far back), and FFL(0.1), dense; evaluated at the longest training length, the glitch rate per
# thousand reads. Each set holds enough examples for FLIP_FLOP_HELD_OUT_READS reads a run: a run without a
# glitch in N reads bounds its rate below 3 / N at 95% (the rule of three), so 30,000 reads resolve the
# 0.1 glitches per thousand reads the paper's rare glitches need (1,024 examples gave 1,363 sparse reads at 32
# pairs: a bound of 2.2 per thousand). Examples per set: 5% above N / (expected reads an example), so the
# reads drawn fall short of N with negligible chance (at 32 pairs the sparse count's margin is 17 sd).
FLIP_FLOP_HELD_OUT = {'sparse': {'p_ignore': 0.98}, 'dense': {'p_ignore': 0.1}}
FLIP_FLOP_HELD_OUT_READS = 30_000


def flip_flop_held_out_examples(pairs: int, reads: int = FLIP_FLOP_HELD_OUT_READS) -> dict:
  """{set: examples} giving each held-out set about 1.05 * `reads` reads at `pairs` instruction pairs
  (at 32 pairs: sparse 24,046 examples, dense 2,108; at 256: 8,874 and 273)."""
  from relpos_jax.data.tasks.flip_flop import FlipFlop

  return {
      name: math.ceil(1.05 * reads / FlipFlop(**kwargs).expected_reads(pairs))
      for name, kwargs in FLIP_FLOP_HELD_OUT.items()
  }


# The Ruoss et al. 2023 protocol at CPU scale (configs/studies/suite_ruoss.py): tasks RoPE learns in distribution
# at this budget (docs/suite: in-distribution accuracy >= 0.92), RoPE against randomized RoPE at max_position 2x
# and 8x each task's longest test sequence (the paper: about 1.4-4x) and at 2048 (the suite's setting) as an ablation.
RUOSS_TASKS = ('even_pairs', 'reverse_string', 'bucket_sort', 'cycle_navigation', 'missing_duplicate', 'flip_flop')
RUOSS_ENCODERS = (
    'rope',
    'rope+rand.2x: randomized(rope, max_position={2*longest})',
    'rope+rand.8x: randomized(rope, max_position={8*longest})',
    'rope+rand.2048: randomized(rope, max_position=2048)',
)
RUOSS_LR_GRID = (3e-4, 1e-3, 3e-3)

# Position from content on the suite's causal tasks (configs/studies/suite_contextual.py): CoPE, FoX and
# stick-breaking are causal only, so the CPU suite (bidirectional Chomsky tasks) never ran them. Flip-flop is CoPE's
# own benchmark (Golovneva et al. 2024, with selective copy and counting) and Liu et al.'s; mqar is content-addressed
# recall; passkey_tokens is the passkey template one token per sentence (the byte-level one does not fit a CPU);
# selective_copy is CoPE's second task (Gu & Dao's selective copying); count_copy is Kazemnejad et al.'s
# counting task (emit as many symbols as the prompt had), scored by exact
# match; cope_counting is CoPE's own counting task (the value of a variable after a program of sets, increments
# and passes, Golovneva et al.'s generator), appended last so the committed runs keep their order; addition is the
# plain task (positions 0..L-1: coupled and Abacus positions replace what these encoders would have to learn). The
# baselines (NoPE, RoPE, ALiBi) are trained beside them under the same protocol: a rate chosen per encoder from
# CONTEXTUAL_LR_GRID, 3 seeds (the CPU suite's cells, at 1e-3 on 2 seeds, are not comparable with these).
CONTEXTUAL_TASKS = (
    'flip_flop',
    'mqar',
    'passkey_tokens',
    'count_copy',
    'addition',
    'selective_copy',
    'cope_counting',
)
# The same half-decade grid around the suite's 1e-3 as the Ruoss protocol's (its edges are checked per task).
CONTEXTUAL_LR_GRID = (3e-4, 1e-3, 3e-3)
# Tasks whose edge check bound (docs/suite_contextual/edge_1e-2) widen their own grid two rungs up the ladder, so
# that the rate is chosen, not checked: count_copy's NoPE, RoPE, ALiBi and CoPE validated better at 1e-2 than at
# 3e-3. The runs at the shared rates are reused.
CONTEXTUAL_TASK_LR_GRIDS = {'count_copy': CONTEXTUAL_LR_GRID + (1e-2, 3e-2)}
CONTEXTUAL_SUITE_ENCODERS = (
    'nope',
    'rope',
    'alibi: alibi(bidirectional=True)',
    'cope',
    'fox',
    'stick_breaking',
)

# Abacus as McLeish et al. 2024 embed it (configs/studies/suite_abacus.py): a learned embedding of each digit's
# significance added to the input (task addition_abacus with as_input), beside the attention encodings the paper
# pairs it with (NoPE, FIRE, RoPE) over the token index. The CPU suite's addition protocol (train 1..8 digits,
# 2,000 steps, 2 seeds), evaluated to 6x the trained digits (the paper: 20 -> 120). The paper's offset range (max_k = 99
# over 20 digits) is scaled to 40 over 8, so that training reaches every index the 48-digit test uses; the
# table holds 64 rows, past the 50 the run can reach.
ABACUS_PROTOCOL = dict(
    min_length=1,
    max_length=8,
    eval_lengths=(4, 8, 16, 24, 32, 48),
    steps=2_000,
    task_kwargs={'max_offset': 40, 'as_input': True},
)
ABACUS_ENCODERS = (
    'abacus+nope: learned(max_length=64)',
    'abacus+fire: learned(max_length=64) + fire',
    'abacus+rope: learned(max_length=64) + rope',
)


def suite_protocols(published: bool) -> dict:
  """Each suite task's training lengths, evaluation lengths and task arguments."""
  if published:
    chomsky = dict(min_length=1, max_length=40, eval_lengths=tuple(range(41, 501, 10)))
    addition = dict(min_length=1, max_length=30, eval_lengths=(30, 50, 100, 200))
    return {
        **{t: dict(chomsky) for t in SUITE_CHOMSKY},
        'flip_flop': dict(
            min_length=64,
            max_length=256,
            eval_lengths=(256, 512, 1024),
            held_out=FLIP_FLOP_HELD_OUT,
            held_out_examples_by_set=flip_flop_held_out_examples(256),
        ),
        'mqar': dict(
            min_length=4,
            max_length=64,
            eval_lengths=(64, 128, 256),
            task_kwargs={'num_keys': 4096, 'num_values': 4096},
            loss_reduction='token_mean',
        ),
        'passkey': dict(min_length=1, max_length=16, eval_lengths=(16, 32, 64, 128), loss_reduction='token_mean'),
        'passkey_tokens': dict(
            min_length=1, max_length=64, eval_lengths=(64, 128, 256, 512), loss_reduction='token_mean'
        ),
        # Kazemnejad et al. 2023: trained to 20, tested to 40.
        'count_copy': dict(
            min_length=1, max_length=20, eval_lengths=(20, 30, 40), task_kwargs={'num_symbols': COUNT_COPY_SYMBOLS}
        ),
        # CoPE's counting task (their run.sh: 3 variables, 3..512 statements, loss on the answer), tested to 4x.
        'cope_counting': dict(min_length=3, max_length=512, eval_lengths=(512, 1024, 2048), num_buckets=8),
        # CoPE's splits: 128 tokens to copy among 128 blanks, dense 64 and sparse 256 blanks (4x: 512).
        'selective_copy': dict(
            min_length=128,
            max_length=128,
            num_buckets=1,
            eval_lengths=(64, 128, 256, 512),
            task_kwargs={'num_copy': 128},
        ),
        'addition': dict(addition),
        'addition_abacus': dict(addition),
        'addition_coupled': dict(addition, task_kwargs={'max_position': 203}),
    }
  # CPU scale. The base budget is 1,000 steps (`train.steps`); the tasks that a seed-0 sizing run at that
  # budget showed close to learned in distribution (docs/suite_sizing) get more where the grid's two hours
  # allow. The others are either learned at 1,000 (flip_flop, cycle_navigation, bucket_sort) or not learned
  # at any budget this CPU can give (parity, the modular, binary and sqrt tasks, solve_equation): the
  # suite's page (docs/suite) says which, rather than reading their out-of-distribution columns.
  chomsky = dict(min_length=1, max_length=16, eval_lengths=(8, 16, 24, 32, 48, 64))
  longer = dict(chomsky, steps=2_500)
  addition = dict(min_length=1, max_length=8, eval_lengths=(4, 8, 12, 16, 24), steps=2_000)
  return {
      **{t: dict(chomsky) for t in SUITE_CHOMSKY},
      **{t: dict(longer) for t in ('even_pairs', 'reverse_string', 'stack_manipulation', 'missing_duplicate')},
      'odds_first': dict(chomsky, steps=1_500),
      'flip_flop': dict(
          min_length=1,
          max_length=32,
          eval_lengths=(16, 32, 64, 128),
          held_out=FLIP_FLOP_HELD_OUT,
          held_out_examples_by_set=flip_flop_held_out_examples(32),
      ),
      # 64 keys and 64 values (not the default 512 each): a 1,025-symbol vocabulary is not learned in
      # 1,000 steps (accuracy 0.01 in the sizing run); 64 keys still allow the 32 pairs of the 4x length.
      'mqar': dict(
          min_length=1,
          max_length=8,
          eval_lengths=(4, 8, 16, 32),
          loss_reduction='token_mean',
          task_kwargs={'num_keys': 64, 'num_values': 64},
          steps=2_000,
      ),
      # Not in the CPU grid (`suite.tasks` below): see there. Its protocol stays for a run that names it.
      'passkey': dict(min_length=1, max_length=2, eval_lengths=(1, 2, 4, 8), loss_reduction='token_mean', steps=2_000),
      # The template one token per sentence: 1..16 filler units are 24..99 tokens, so the CPU reaches 4x (64
      # units, 339 tokens), where the byte-level template stops at 2 sentences.
      'passkey_tokens': dict(
          min_length=1, max_length=16, eval_lengths=(8, 16, 32, 64), loss_reduction='token_mean', steps=1_000
      ),
      # The counts of the Chomsky grid's lengths, scored by exact match; 16 symbols, so 16 distinct sequences of
      # each length (docs/suite_contextual ran num_symbols=1: one sequence per length).
      'count_copy': dict(chomsky, task_kwargs={'num_symbols': COUNT_COPY_SYMBOLS}),
      # CoPE's counting task (3 variables, the answer one token) at 3..32 statements (the paper: 3..512), to 4x.
      # An example holds about 1.17 tokens a statement (pass; is 50 of 58 draws) but is padded to 4n + 2.
      'cope_counting': dict(min_length=3, max_length=32, eval_lengths=(16, 32, 64, 128)),
      # CoPE's splits scaled by 1/8: 16 tokens to copy among 16 blanks in training, then dense (8 blanks),
      # sparse (32) and 4x (64 blanks). One training length, as the paper's.
      'selective_copy': dict(min_length=16, max_length=16, num_buckets=1, eval_lengths=(8, 16, 32, 64)),
      'addition': dict(addition),
      'addition_coupled': dict(addition, task_kwargs={'max_position': 32}),
      'addition_abacus': dict(addition, task_kwargs={'max_offset': 16}),
  }


# The study and suite variants this file had, each now the studies file it became (configs/studies/<name>.py).
# A variant set is read as it was: 'ruoss', 'contextual' and 'abacus' implied 'suite'.
LEGACY_STUDIES = {
    'study': 'even_pairs',
    'published,study': 'ruoss_published',
    'suite': 'suite',
    'published,suite': 'suite_published',
    'ruoss': 'suite_ruoss',
    'contextual': 'suite_contextual',
    'abacus': 'suite_abacus',
}


def run_config(*, published: bool = False) -> ml_collections.ConfigDict:
  """The training run (`--config=configs/algorithmic.py`, with `published` `configs/algorithmic.py:published`)."""
  config = ml_collections.ConfigDict()
  config.seed = 0

  config.model = ml_collections.ConfigDict()
  config.model.encoder = 'rope'
  config.model.num_layers = 3
  config.model.model_dim = 64
  config.model.num_heads = 4
  config.model.mlp_ratio = 4
  config.model.dropout_rate = 0.1  # as the reference code (dropout_prob = 0.1)
  config.model.dtype = 'float32'

  config.data = ml_collections.ConfigDict()
  config.data.source = 'task'
  config.data.task = 'even_pairs'
  config.data.task_kwargs = ml_collections.ConfigDict()
  config.data.min_length = 1
  config.data.max_length = 20
  config.data.num_buckets = 4
  config.data.loss_reduction = 'sequence_sum'  # the reference code's loss (one output: = token mean)

  config.optim = ml_collections.ConfigDict()
  config.optim.learning_rate = 1e-3
  config.optim.schedule = 'warmup_cosine'
  config.optim.warmup_steps = 100
  config.optim.end_lr_fraction = 0.0
  config.optim.weight_decay = 0.0  # Adam, as the reference (l2_weight = 0)
  config.optim.b1 = 0.9
  config.optim.b2 = 0.999
  config.optim.eps = 1e-8
  config.optim.grad_clip_norm = 1.0  # the reference's max_grad_norm

  config.train = ml_collections.ConfigDict()
  config.train.steps = 2_000
  config.train.batch_size = 32
  config.train.log_every = 100
  config.train.checkpoint_every = 500
  config.train.keep_checkpoints = 2
  # None: TensorBoard events beside metrics.jsonl iff tensorboardX is installed (decided where they are written,
  # so this file reads the same on every machine); True: required (a clear error without it); False: off.
  config.train.tensorboard = placeholder(bool)

  config.eval = ml_collections.ConfigDict()
  config.eval.every = 500
  config.eval.lengths = (20, 40, 100)  # input lengths n: the longest trained, 2x, 5x
  config.eval.batch_size = 64
  config.eval.num_examples = 256  # per length
  config.eval.pad_multiple = 1
  config.eval.seed = 0
  config.eval.num_tokens = placeholder(int)  # optional (the corpus only)
  config.eval.max_tokens_per_batch = placeholder(int)  # optional: cap on tokens per evaluation batch

  if published:
    config.model.encoder = 'randomized(transformer_xl, max_position=2048)'
    config.model.num_layers = 5
    config.model.num_heads = 8
    # The reference example defaults to missing_duplicate, which has a shortcut (the masked bit is the
    # parity of the visible ones) and is no evidence of length generalization; reverse_string is not.
    config.data.task = 'reverse_string'
    config.data.max_length = 40
    config.data.num_buckets = 8
    config.optim.learning_rate = 1e-4
    config.optim.schedule = 'warmup_constant'
    config.optim.warmup_steps = 0
    config.optim.end_lr_fraction = 1.0  # unused by a constant schedule
    config.train.steps = 2_000_000
    config.train.batch_size = 128
    config.train.log_every = 1_000
    config.train.checkpoint_every = 50_000
    config.train.keep_checkpoints = 3
    config.eval.every = 0  # the range evaluation runs once, after training
    config.eval.lengths = tuple(range(41, 501))
    config.eval.batch_size = 64  # the reference's range_test_sub_batch_size
    config.eval.num_examples = 512
    config.eval.pad_multiple = 32

  return config


def study_config(arg: str | None = None, *, published: bool = False) -> ml_collections.ConfigDict:
  """The run evaluated once, after training, with an empty study section (configs/studies/even_pairs.py and
  ruoss_published.py fill it). `arg`: the studies file's own; they take none, so one is refused."""
  parse_variants(arg, ())
  config = run_config(published=published)
  config.eval.every = 0
  config.study = ml_collections.ConfigDict()
  return config


def suite_config(arg: str | None = None, *, published: bool = False) -> ml_collections.ConfigDict:
  """The benchmark suite (configs/studies/suite.py; with `published` configs/studies/suite_published.py): every
  task with its own protocol (`suite_protocols`), the same encoders and seeds. `arg`: the studies file's own;
  they take none, so one is refused."""
  parse_variants(arg, ())
  config = run_config(published=published)
  config.eval.every = 0
  if published:
    config.train.steps = 10_000
  else:
    config.train.steps = 1_000
    config.train.checkpoint_every = 250
    config.eval.num_examples = 128
  config.suite = ml_collections.ConfigDict()
  config.suite.title = f'Length-generalization suite ({"published protocols" if published else "CPU scale"})'
  config.suite.encoders = PUBLISHED_SUITE_ENCODERS if published else SUITE_ENCODERS
  config.suite.seeds = (0, 1, 2) if published else (0, 1)
  config.suite.tasks = SUITE_CHOMSKY + SUITE_OTHER
  if not published:
    # passkey is byte level: the LongLM template makes even 1..2 filler sentences 341..431 tokens, about
    # 1.6 s a step here (measured: 700 steps in 19 minutes), so its 12 runs would take ~12 hours of this
    # CPU, six times the whole grid's budget. It stays in the published preset and runs when named in suite.tasks.
    config.suite.tasks = tuple(t for t in config.suite.tasks if t != 'passkey')
  config.suite.protocols = suite_protocols(published)
  return config


def at_steps(config: ml_collections.ConfigDict, tasks, steps: int) -> ml_collections.ConfigDict:
  """`config`'s suite cut to `tasks`, each trained for `steps` (the budget probe's and its rows' protocols),
  checkpointing every 1,000 steps so a long run that is interrupted loses little."""
  config.suite.tasks = tuple(tasks)
  config.suite.protocols = {t: {**config.suite.protocols[t].to_dict(), 'steps': steps} for t in tasks}
  config.train.checkpoint_every = 1_000
  return config


# A rate-grid edge check retrains at the next rung of the grids' half-decade ladder above the grid's top (3e-4,
# 1e-3, 3e-3 -> 1e-2 for the suites' shared grids; a task with a wider grid of its own, one rung past its top).
LR_LADDER = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)


def edge_rate(grid) -> float:
  """The rung of LR_LADDER just above the top of `grid` (a top that is a rung of it, below the last)."""
  top = max(grid)
  if top not in LR_LADDER[:-1]:
    raise ValueError(f'edge_rate: the grid {tuple(grid)} tops at {top:g}; allowed: a top among {LR_LADDER[:-1]}.')
  return LR_LADDER[LR_LADDER.index(top) + 1]


def edge_config(studies_file: str, edge_encoders: dict, arg: str | None, title: str) -> ml_collections.ConfigDict:
  """A suite's learning-rate edge check (configs/studies/suite_*_edge.py): on the task `arg`, the encoders whose
  rate chosen from the suite's grid was its top (`edge_encoders[task]`), trained again one rung past that top
  (`edge_rate`; past the task's own grid where its protocol has one) at the grid's seed (the suite's
  selection_seed, or 0 for the suites that chose at their first seed) and scored like the
  grid (validation loss at the training length); a rate that validates worse than the chosen one shows that the
  grid's edge did not bind. Every task with an edge stays in the config, so
  the summary covers each task with results; the call's `--tasks` names the one trained now."""
  who = f'configs/studies/{studies_file}_edge.py'
  if arg not in edge_encoders:
    raise ValueError(
        f'{who}: the argument {arg!r} is not a task with an edge to check; allowed: one of '
        f'{sorted(edge_encoders)} (e.g. --config={who}:{sorted(edge_encoders)[0]}).'
    )
  config = resources.config_module(f'studies/{studies_file}').get_config()
  config.suite.title = title
  config.suite.encoders = resources.config_module('lm').select(edge_encoders[arg], config.suite.encoders)
  # The grid's seed: the suite's selection seed where it has one (then the edge run is its only seed), else 0.
  selection_seed = config.suite.get('selection_seed')
  config.suite.seeds = (0,) if selection_seed is None else (int(selection_seed),)
  if selection_seed is not None:
    config.suite.selection_seed = None
  config.suite.lr_grid = (edge_rate(config.suite.lr_grid),)
  config.suite.tasks = tuple(t for t in config.suite.tasks if t in edge_encoders)
  protocols = {t: config.suite.protocols[t].to_dict() for t in config.suite.tasks}
  for protocol in protocols.values():
    if protocol.get('lr_grid') is not None:  # a task's own grid: one rung past its own top
      protocol['lr_grid'] = (edge_rate(protocol['lr_grid']),)
  config.suite.protocols = protocols
  return config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """The run (no arg, or 'published'), or a legacy study or suite name (LEGACY_STUDIES): its studies file."""
  variants = parse_variants(arg, ('published', 'study', 'suite', 'ruoss', 'contextual', 'abacus'))
  if variants <= {'published'}:
    return run_config(published=bool(variants))
  cpu_suites = [v for v in ('ruoss', 'contextual', 'abacus') if v in variants]
  for cpu_suite in cpu_suites:
    if variants & {'published', 'study'}:
      raise ValueError(
          f"configs/algorithmic.py: {cpu_suite!r} is a CPU-scale suite; it excludes 'published' and 'study'."
      )
    variants.add('suite')
  if len(cpu_suites) > 1:
    raise ValueError(f'configs/algorithmic.py: {cpu_suites} are different suites; choose one.')
  if {'study', 'suite'} <= variants:
    raise ValueError("configs/algorithmic.py: the variants 'study' and 'suite' exclude each other.")
  name = ','.join(sorted(variants - {'suite'} if cpu_suites else variants))
  return resources.config_module(f'studies/{LEGACY_STUDIES[name]}').get_config()
