r"""configs/studies/study_english.py in BPE tokens: Jane Austen's novels as byte-level BPE tokens, a vocabulary of
BPE_VOCAB_SIZE (configs/lm.py) trained on the training split only; lengths count tokens, eval.scored_tail counts
bytes, and bits_per_char is total bits over total characters, on the byte-level study's scale
(`pip install tokenizers`):

    python -m experiments.length_generalization --config=configs/studies/study_english_bpe.py \
        --config.study.seeds='(0,1,2)'
"""

from relpos_jax import resources

lm = resources.config_module('lm')
english = resources.config_module('studies/study_english')


def get_config(arg=None):
  config = lm.with_bpe(english.get_config(arg))
  config.study.title = 'The default study on English prose (BPE tokens): trained at 64, evaluated up to 16x'
  return config
