"""A BPE tokenizer cache that cannot take the file is refused before the tokenizer trains (issue 53): a cache
path under a file, or in a directory that cannot be written, failed only once training had finished."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip('tokenizers')

from relpos_jax import resources
from relpos_jax.data import bpe
from relpos_jax.data.corpus import Corpus
from relpos_jax.train import config_files, data_sources
from relpos_jax.train import config as config_lib
from relpos_jax.train.config import ConfigError

WORDS = 'the cat sat on a mat and the dog ran to the old tree'.split()


@pytest.fixture
def corpus(monkeypatch):
  """A tiny corpus; training a tokenizer on it fails the test (the refusal must come first)."""
  rng = np.random.default_rng(0)
  docs = [
      (f'{split}/{i}', ' '.join(rng.choice(WORDS, 50)).encode()) for split in ('train', 'validation') for i in range(3)
  ]

  def no_training(*args, **kwargs):
    raise AssertionError('the tokenizer trained before the cache was checked')

  monkeypatch.setattr(bpe, 'train', no_training)
  return Corpus.from_documents(docs, split_of=lambda name: name.split('/')[0], source='test documents')


def test_a_cache_under_a_file_is_refused_before_training(corpus, tmp_path):
  (tmp_path / 'a_file').write_text('not a directory')
  for cache in (tmp_path / 'a_file', tmp_path / 'a_file' / 'deeper', tmp_path / 'a_file' / 'tok.json'):
    with pytest.raises(ValueError, match=rf"^tokenizer cache '{cache}.*' cannot be written: {tmp_path / 'a_file'} is a "
                       'file, not a directory; allowed: a writable directory'):  # fmt: skip
      bpe.load_or_train(corpus, 280, cache)


def test_a_cache_that_cannot_be_written_is_refused_before_training(corpus):
  """/proc takes no file, whoever asks (root ignores a directory's mode bits, so a chmod would not test it)."""
  with pytest.raises(ValueError, match=r"^tokenizer cache '/proc/self/bpe/.*' cannot be written: /proc/self: "):
    bpe.load_or_train(corpus, 280, '/proc/self/bpe')


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes into a read-only-mode directory')
def test_a_read_only_directory_is_refused_before_training(corpus, tmp_path):
  tmp_path.joinpath('ro').mkdir(mode=0o500)
  with pytest.raises(ValueError, match=r'cannot be written: .*/ro: Permission denied'):
    bpe.load_or_train(corpus, 280, tmp_path / 'ro')


def test_a_cache_that_can_be_written_leaves_nothing_behind_when_the_vocabulary_is_refused(tmp_path):
  """The check creates nothing: the cache directory appears only with the tokenizer written in it."""
  rng = np.random.default_rng(0)
  docs = [(f'train/{i}', ' '.join(rng.choice(WORDS, 50)).encode()) for i in range(3)]
  corpus = Corpus.from_documents(docs, split_of=lambda name: name.split('/')[0], source='test documents')
  with pytest.raises(ValueError, match='vocab_size=100000 is larger than the training text supports'):
    bpe.load_or_train(corpus, 100_000, tmp_path / 'cache' / 'deeper')
  assert os.listdir(tmp_path) == []


def test_the_run_config_names_its_key(corpus, tmp_path):
  texts = tmp_path / 'texts'
  texts.mkdir()
  for i in range(20):
    (texts / f'doc{i:02d}.txt').write_text(' '.join(np.random.default_rng(i).choice(WORDS, 100)) + '\n')
  (tmp_path / 'a_file').write_text('')
  config = config_files.load_config(
      str(resources.configs_dir() / 'lm.py') + ':bpe',
      {'data.corpus': str(texts), 'data.vocab_size': 300, 'data.tokenizer_cache': str(tmp_path / 'a_file')},
  )
  with pytest.raises(ConfigError, match=rf"^config.data.tokenizer_cache='{tmp_path / 'a_file'}' is invalid: tokenizer "
                     'cache .* cannot be written'):  # fmt: skip
    data_sources.build_data(config_lib.parse(config))
