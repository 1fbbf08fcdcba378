"""The data of a run, chosen by its data section: `build_data(config)`, and its class, `data_class(config)`.

This table sits above `inputs` (the byte-level corpus and the tasks) and `token_inputs` (a corpus read as BPE
tokens), so that neither the config nor the data classes import each other (no import circle). A new data
source adds its section to `config.SOURCES` and its class to `DATA`; everything the study and the training loop
ask of a source (its metric and direction, its per-document totals, its protocol record, what marks a run
diverged) is an attribute of its data class (`inputs.Data`), so nothing else changes (docs/guide/README.md,
"Adding a data source").
"""

from __future__ import annotations

from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs
from relpos_jax.train import text_inputs
from relpos_jax.train import token_inputs


def _corpus_class(section: config_lib.CorpusSource) -> type[inputs.CorpusData]:
  """A corpus read as bytes, or as BPE tokens when `data.tokenizer='bpe'`."""
  return token_inputs.BPECorpusData if section.tokenizer == 'bpe' else inputs.CorpusData


def _task_class(section: config_lib.TaskSource) -> type[inputs.TaskData]:
  return inputs.TaskData


def _text_class(section: config_lib.TextSource) -> type[text_inputs.TextFileData]:
  return text_inputs.TextFileData


# Data section -> the data class of a section of that kind.
DATA = {config_lib.CorpusSource: _corpus_class, config_lib.TaskSource: _task_class, config_lib.TextSource: _text_class}


def data_class(config: config_lib.Config) -> type[inputs.Data]:
  """The data class of a run: what a study reads of the source (`metric`, `lower_is_better`, ...) before, or
  without, loading its data."""
  return DATA[type(config.data)](config.data)


def build_data(config: config_lib.Config) -> inputs.Data:
  """The data of a run (its parsed Config): its data class (`data_class`) built from it."""
  return data_class(config)(config)
