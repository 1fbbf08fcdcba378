r"""The default study on English prose (docs/study_english): the default study's compared encoders and T5's log
buckets (the lecture's table that fails; CROSS_CORPUS_LABELS of configs/lm.py, in the order the findings need them,
so that an interrupted study has whole findings first), asked the same question on Jane Austen's novels
(`data.corpus='austen'`; --config.data.corpus=stdlib asks Python source again). The learning rate is chosen per
encoder on validation at SELECTION_SEED, outside the reported seeds, from a grid reaching 3e-2 (every encoder chose
the top of LR_GRID on Python bytes); 1,024 windows per length, >= 64k scored characters.

    python -m experiments.length_generalization --config=configs/studies/study_english.py \
        --config.study.seeds='(0,1,2)'

configs/studies/study_english_bpe.py asks it in BPE tokens.
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  config = lm.study_config(arg)
  config.data.corpus = 'austen'  # English prose; --config.data.corpus=stdlib asks Python source again
  config.study.title = 'The default study on English prose (bytes): trained at 64, evaluated up to 16x'
  config.study.description = (
      'Bits per character on the held-out test documents (the same 65,536 characters at every length); the '
      f'learning rate chosen per encoder on validation at seed {lm.SELECTION_SEED}, outside the reported seeds.'
  )
  config.study.encoders = lm.select(lm.CROSS_CORPUS_LABELS)
  config.study.comparisons = lm.CROSS_CORPUS_COMPARISONS
  config.study.seeds = lm.CROSS_CORPUS_SEEDS
  config.study.lr_grid = lm.CROSS_CORPUS_LR_GRID
  config.study.selection_seed = lm.SELECTION_SEED
  config.study.default_learning_rates = ()  # chosen on this corpus, not Python's
  # 1,024 windows per length, each scoring its last 64 targets: >= 64k scored characters (the floor).
  config.eval.num_tokens = 65_536
  return config
