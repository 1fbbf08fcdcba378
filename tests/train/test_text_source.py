"""data.source='text' (relpos_jax.train.text_inputs): one text file cut by lines, the worked example of a data
source (docs/guide/README.md). Every test writes the file it reads."""

from __future__ import annotations

import os

import pytest

from relpos_jax.study import plan, protocol
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import data_sources, loop, text_inputs
from relpos_jax.train.config import ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _lines(n: int) -> bytes:
  return b''.join(b'line %03d of the text: the quick brown fox jumps over the lazy dog\n' % k for k in range(n))


@pytest.fixture
def text_config(lm_config):
  """`text_config(path, **{'section.key': value})`: the tiny LM config reading the text file `path`."""
  return lambda path, **overrides: _text_config(lm_config(), path, **overrides)


def _text_config(config, path, **overrides):
  config.data.source = 'text'
  config.data.corpus = str(path)
  for dotted, value in overrides.items():
    section, name = dotted.split('.')
    config[section][name] = value
  return config


def test_the_lines_are_cut_in_order_80_10_10():
  text = _lines(20)
  lines = text.splitlines(keepends=True)
  assert text_inputs.split_lines(text) == [
      ('train', b''.join(lines[:16])),
      ('validation', b''.join(lines[16:18])),
      ('test', b''.join(lines[18:])),
  ]
  assert text_inputs.split_lines(text, max_train_bytes=10)[0] == ('train', lines[0][:10])
  with pytest.raises(ValueError, match='the file has 9 line'):
    text_inputs.split_lines(_lines(9))


def test_a_text_file_is_a_source_of_its_own(tmp_path, text_config):
  path = tmp_path / 'book.txt'
  path.write_bytes(_lines(100))  # 67 bytes a line: 536 validation and test bytes, room for windows of 32
  config = text_config(path)
  config_lib.validate(config)
  assert data_sources.data_class(config_lib.parse(config)) is text_inputs.TextFileData
  assert plan.metric_name(config_lib.parse(config)) == ('bits_per_char', True)  # the corpus's answers, inherited
  assert not text_inputs.TextFileData.has_documents  # but one: each split is one document, nothing to resample
  data = data_sources.build_data(config_lib.parse(config))
  lines = _lines(100).splitlines(keepends=True)
  assert data.corpus.tokens('train').tobytes() == b''.join(lines[:80])
  assert data.corpus.tokens('validation').tobytes() == b''.join(lines[80:90])
  assert data.corpus.tokens('test').tobytes() == b''.join(lines[90:])
  assert data.describe()['source'] == 'text'
  assert data.protocol_record([16, 32], 'test')['scored_tail'] == 16


@pytest.mark.slow  # about a minute on the shared CPU: it compiles a model
def test_a_text_source_trains_and_is_evaluated(tmp_path, text_config):
  path = tmp_path / 'book.txt'
  path.write_bytes(_lines(100))
  config = text_config(path, **{'train.steps': 2, 'optim.warmup_steps': 1, 'eval.every': 0})
  result = loop.train(config, data=data_sources.build_data(config_lib.parse(config)))
  assert set(result.final_metrics) >= {'eval/16/bits_per_char', 'eval/32/bits_per_char'}
  assert not protocol.beyond_chance(result.final_metrics['eval/32/loss'], 256)


def test_a_text_source_refuses_what_it_cannot_read(tmp_path, text_config):
  with pytest.raises(ConfigError, match=r"config\.data\.corpus='.*missing.txt' is invalid: .*path of a file"):
    config_lib.validate(text_config(tmp_path / 'missing.txt'))
  with pytest.raises(ConfigError, match=r"config\.data\.corpus='.*' is invalid: .*path of a file"):
    config_lib.validate(text_config(tmp_path))  # a directory is the corpus source's, not this one's
  short = tmp_path / 'short.txt'
  short.write_bytes(_lines(5))
  with pytest.raises(ConfigError, match=r'config\.data\.corpus=.*short\.txt.*has 5 line\(s\); allowed: at least 10'):
    data_sources.build_data(config_lib.parse(text_config(short)))
  binary = tmp_path / 'binary.txt'
  binary.write_bytes(_lines(20).replace(b'fox', b'f\x00x'))
  with pytest.raises(ConfigError, match=r'config\.data\.corpus=.*binary\.txt.*NUL'):
    data_sources.build_data(config_lib.parse(text_config(binary)))
  bpe = text_config(short, **{'data.tokenizer': 'bpe', 'data.vocab_size': 512})
  with pytest.raises(ConfigError, match=r"config\.data\.tokenizer='bpe' is invalid: .*allowed: 'byte'"):
    config_lib.validate(bpe)


def test_the_lm_config_file_takes_a_text_file_from_the_command_line(tmp_path):
  path = tmp_path / 'book.txt'
  path.write_bytes(_lines(20))
  config = config_files.load_config(
      os.path.join(REPO, 'configs', 'lm.py'), {'data.source': 'text', 'data.corpus': str(path)}, validate_config=False
  )
  assert isinstance(config_lib.parse(config).data, config_lib.TextSource)
