"""One plain text file as a corpus: the data of `data.source='text'` (`config.TextSource`).

A worked example of a data source (docs/guide/README.md, "Adding a data source"): a corpus is split by whole
files (`relpos_jax.data.corpus`), so one file would be all training; this source cuts the file's lines in order
instead, the first 80% the training split, the next 10% validation and the last 10% test (one document each).
Everything else is the byte-level corpus's (`inputs.CorpusData`): its windows, its metric (bits per character)
and what a study reads of it, but for one answer: each split is one document, so a study stores no per-document
totals (`has_documents`). This file and the config section are the whole source.

    python -m experiments.train --config=configs/lm.py --config.data.source=text \
        --config.data.corpus=/path/to/book.txt --workdir=/tmp/book
"""

from __future__ import annotations

import os

from relpos_jax import data as data_lib
from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs

# (split, the fraction of the file's lines up to which it runs), in the order the lines are cut.
SPLIT_ENDS = (('train', 0.8), ('validation', 0.9), ('test', 1.0))
MIN_LINES = 10  # the fewest lines that leave every split at least one


def split_lines(text: bytes, max_train_bytes: int | None = None) -> list[tuple[str, bytes]]:
  """[(split, its bytes)] of `text` cut by lines (`SPLIT_ENDS`); the training part capped at `max_train_bytes`
  (its first bytes). ValueError when the text has fewer than MIN_LINES lines."""
  lines = text.splitlines(keepends=True)
  if len(lines) < MIN_LINES:
    raise ValueError(f'the file has {len(lines)} line(s); allowed: at least {MIN_LINES}, so every split holds one')
  parts, start = [], 0
  for split, fraction in SPLIT_ENDS:
    end = int(len(lines) * fraction)
    parts.append((split, b''.join(lines[start:end])))
    start = end
  if max_train_bytes is not None:
    parts[0] = ('train', parts[0][1][: int(max_train_bytes)])
  return parts


def read_text_file(path: str, max_train_bytes: int | None = None) -> data_lib.Corpus:
  """The corpus of one text file, its splits cut by lines (`split_lines`); the document names are the splits."""
  with open(os.path.expanduser(path), 'rb') as f:
    text = f.read()
  return data_lib.Corpus.from_documents(
      split_lines(text, max_train_bytes),
      split_of=lambda name: name,
      source=f'text: {path}',
      max_train_bytes=max_train_bytes,
  )


class TextFileData(inputs.CorpusData):
  """Byte-level language modelling on one text file (module docstring)."""

  # The test split is one document: a bootstrap over documents would resample that one and report an interval of
  # width zero, so a study compares text runs over seeds only (`relpos_jax.study.runner.document_totals_record`).
  has_documents = False

  def __init__(self, config):
    path = config.data.corpus
    try:
      corpus = read_text_file(path, config.data.max_train_bytes)
    except (OSError, ValueError) as e:
      raise config_lib.ConfigError(f'config.data.corpus={path!r} is invalid: {e}') from None
    super().__init__(config, corpus=corpus)

  def describe(self) -> dict:
    return {**super().describe(), 'source': 'text'}
