r"""RULER's retrieval and aggregation families at CPU scale (Hsieh et al. 2024): `variable_tracking` (multi-hop
tracing: chains of assignments in noise, name every variable holding the queried value) and `common_words`
(common-word extraction: the most frequent words of a list), trained short and evaluated to 16x their longest
training length, with GGD-BAM (Bianchessi et al. 2025, whose claim is retrieval at 500x the training length) beside
the suite's causal baselines, under the cross-corpus selection protocol: a learning rate per encoder and task from
CONTEXTUAL_LR_GRID of configs/algorithmic.py, chosen on validation loss at the training length at the selection
seed (configs/lm.py's SELECTION_SEED, outside the reported seeds and never reported), then 3 seeds at that rate.
Not yet run (see below for its size):

    python -m experiments.suite --config=configs/studies/suite_ruler.py --workdir=docs/suite_ruler

Size: 2 tasks x 6 encoders x (3 rates at the selection seed + 3 seeds) = 72 runs of 2,000 steps of this file's model at
53..293 tokens (variable tracking) and 24..144 tokens (common words) a sequence. Estimated cost, from one
ggd_bam run per task at 100, 300 and 1,300 steps on the 2-core CPU while others shared it (a rough figure, not a
benchmark): about 45 s of compilation, then 0.06 s a step (variable tracking) and 0.02 s (common words), so
roughly 3-4 minutes a run and about 4 hours for the grid with its evaluations.
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')

RULER_TASKS = ('variable_tracking', 'common_words')
RULER_ENCODERS = (
    'nope',
    'rope',
    'alibi: alibi(bidirectional=True)',  # the suites' ALiBi spec: under the causal mask it is the causal one
    'kerple_log',
    'ggd_bam',
    # The paper's model: the prior with Scalable-Softmax, s initialised at 1 as in the authors' code.
    'ggd_bam+ssmax: ggd_bam + ssmax(init_s=1.0)',
)
# The CPU protocols. Lengths are the tasks' n: noise sentences (variable tracking) and distinct uncommon words
# (common words); both evaluated to 16x the longest trained n. Variable tracking keeps RULER's 4 hops and adds one
# distractor chain (RULER's default has a single chain, which a model can answer without reading the query);
# 32 names and values, as mqar's CPU protocol keeps its vocabulary small. Common words: 3 common words 4 times
# each among uncommon ones once each (RULER's short setting: 10 words 6 times), from 160 word tokens, which hold
# the 3 + 128 distinct words of the longest evaluation (a longer one is refused, naming num_words).
RULER_PROTOCOLS = {
    'variable_tracking': dict(
        min_length=1,
        max_length=16,
        eval_lengths=(8, 16, 32, 64, 128, 256),
        loss_reduction='token_mean',
        task_kwargs={'num_chains': 2, 'num_hops': 4, 'num_names': 32, 'num_values': 32},
        steps=2_000,
    ),
    'common_words': dict(
        min_length=1,
        max_length=8,
        eval_lengths=(4, 8, 16, 32, 64, 128),
        loss_reduction='token_mean',
        task_kwargs={'num_common': 3, 'freq_common': 4, 'freq_uncommon': 1, 'num_words': 160},
        steps=2_000,
    ),
}


def get_config(arg=None):
  config = algorithmic.suite_config(arg)
  config.suite.tasks = RULER_TASKS
  config.suite.encoders = RULER_ENCODERS
  config.suite.title = "RULER's variable tracking and common words (CPU scale)"
  config.suite.seeds = (0, 1, 2)
  config.suite.lr_grid = algorithmic.CONTEXTUAL_LR_GRID
  config.suite.selection_seed = resources.config_module('lm').SELECTION_SEED
  config.suite.protocols = RULER_PROTOCOLS
  return config
