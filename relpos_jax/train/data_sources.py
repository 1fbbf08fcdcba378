"""The data of a run, chosen by its data section: `build_data(config)`.

This table sits above `inputs` (the byte-level corpus and the tasks) and `token_inputs` (a corpus read as BPE
tokens), so that neither the config nor the data classes import each other (no import circle). A new data
source adds its section to `config.SOURCES` and its builder to `DATA`.
"""

from __future__ import annotations

from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs
from relpos_jax.train import token_inputs


def _corpus_data(config) -> inputs.CorpusData:
  """A corpus read as bytes, or as BPE tokens when `data.tokenizer='bpe'`."""
  if config_lib.data_source(config).tokenizer == 'bpe':
    return token_inputs.BPECorpusData(config)
  return inputs.CorpusData(config)


DATA = {config_lib.CorpusSource: _corpus_data, config_lib.TaskSource: inputs.TaskData}


def build_data(config) -> inputs.CorpusData | inputs.TaskData:
  """The data of `config`: its data section's builder (`DATA`) applied to it."""
  return DATA[type(config_lib.data_source(config))](config)
