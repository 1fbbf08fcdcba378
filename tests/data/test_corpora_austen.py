"""The named English corpus ('austen'): the R data reader, chapters as documents, the split by novel, bad input.

The fake package below is written with a small XDR writer that follows R Internals ("Serialization Formats")
byte for byte, so the reader is tested without R; the real package is read when it is installed.
"""

from __future__ import annotations

import gzip
import lzma
import os
import struct
import zlib

import numpy as np
import pytest

from relpos_jax.data import corpora
from relpos_jax.data.corpora import austen, rdata
from relpos_jax.data.corpus import Corpus, check_source


# ---------------------------------------------------------------- a minimal XDR writer (test side)
def _int(v):
  return struct.pack('>i', v)


def _charsxp(s):
  if s is None:
    return _int(9) + _int(-1)
  raw = s.encode('utf-8')
  return _int(9 | (1 << 3) << 12) + _int(len(raw)) + raw  # CHARSXP, UTF-8 level


def _strsxp(values):
  return _int(16) + _int(len(values)) + b''.join(_charsxp(v) for v in values)


def _intsxp(values):
  return _int(13) + _int(len(values)) + b''.join(_int(v) for v in values)


def _named_list(items: dict, encode):
  # VECSXP with attributes: a pairlist (LISTSXP with tag) holding names=STRSXP, then NILVALUE.
  body = _int(19 | 1 << 9) + _int(len(items)) + b''.join(encode(v) for v in items.values())
  names_tag = _int(1) + _charsxp('names')  # SYMSXP 'names'
  return body + _int(2 | 1 << 10) + names_tag + _strsxp(list(items)) + _int(254)


def _serialize(payload: bytes) -> bytes:
  return b'X\n' + _int(3) + _int(0x040202) + _int(0x030500) + _int(5) + b'UTF-8' + payload


def write_fake_package(root, novels: dict, compression: str = 'zlib') -> str:
  """A directory laid out like janeaustenr, whose data/Rdata.{rdx,rdb} hold `novels` (name -> lines), each entry
  compressed as R's makeLazyLoadDB does: zlib (compress=TRUE), or 'xz' (compress=3: a type byte 'Z' first)."""
  data = os.path.join(root, 'data')
  os.makedirs(data)
  rdb, offsets = b'', {}
  for name, lines in novels.items():
    raw = _serialize(_strsxp(lines))
    body = zlib.compress(raw) if compression == 'zlib' else b'Z' + lzma.compress(raw)
    entry = struct.pack('>I', len(raw)) + body
    offsets[name] = [len(rdb), len(entry)]
    rdb += entry
  index = _named_list(
      {'variables': offsets, 'references': {}, 'compressed': None if compression == 'zlib' else 3},
      lambda v: (
          _named_list(v, _intsxp)
          if isinstance(v, dict) and v
          else _intsxp([v])
          if isinstance(v, int)
          else _int(254)
          if not v
          else _int(10) + _int(1) + _int(1)
      ),
  )
  with open(os.path.join(data, 'Rdata.rdb'), 'wb') as f:
    f.write(rdb)
  with open(os.path.join(data, 'Rdata.rdx'), 'wb') as f:
    f.write(gzip.compress(_serialize(index)))
  return str(root)


def _novel(title, chapters, heading='CHAPTER {}', volume_at=()):
  lines = [title, '', 'By Jane Austen', '']
  for k in range(1, chapters + 1):
    if k in volume_at:
      lines += [f'VOLUME {k}', '', '']
    lines += [heading.format(k), '', f'{title} chapter {k} text.', 'Second line.', '']
  return lines


@pytest.fixture
def fake(tmp_path):
  novels = {n: _novel(n.upper(), 3 + i, volume_at=(2,) if n == 'emma' else ()) for i, n in enumerate(austen.NOVELS)}
  return write_fake_package(tmp_path / 'janeaustenr', novels), novels


# ---------------------------------------------------------------- the reader
def test_the_reader_reads_strings_na_and_named_lists(tmp_path):
  assert rdata.unserialize(_serialize(_strsxp(['a', None, 'é']))) == ['a', None, 'é']
  obj = rdata.unserialize(_serialize(_named_list({'x': [1, 2]}, _intsxp)))
  assert isinstance(obj, rdata.RObject) and obj.value == [[1, 2]] and obj.attributes == {'names': ['x']}
  with pytest.raises(rdata.RDataError, match='not an XDR'):
    rdata.unserialize(b'A\n' + b'\0' * 20)
  with pytest.raises(rdata.RDataError, match='truncated'):
    rdata.unserialize(_serialize(_strsxp(['abc']))[:-1])
  with pytest.raises(rdata.RDataError, match='SEXP type 3 .* not read'):  # a closure
    rdata.unserialize(_serialize(_int(3)))


def test_the_lazy_load_database_round_trips(fake):
  path, novels = fake
  assert rdata.read_lazyload(os.path.join(path, 'data', 'Rdata')) == novels


def _damage(path: str, name: str, at: int, cut: bool) -> None:
  """The file data/<name> of the package at `path` cut at byte `at` (cut) or with 8 bytes from `at` inverted."""
  file = os.path.join(path, 'data', name)
  with open(file, 'rb') as f:
    raw = f.read()
  raw = raw[:at] if cut else raw[:at] + bytes(b ^ 0xFF for b in raw[at : at + 8]) + raw[at + 8 :]
  with open(file, 'wb') as f:
    f.write(raw)


@pytest.mark.parametrize(
    'compression, name, at, cut, message',
    [
        ('zlib', 'Rdata.rdx', 30, True, r'data/Rdata.rdx: a damaged or truncated gzip stream \(EOFError'),
        ('zlib', 'Rdata.rdx', 12, False, r'data/Rdata.rdx: a damaged or truncated gzip stream'),
        ('zlib', 'Rdata.rdb', 8, False, r"data/Rdata.rdb, entry 'emma': a damaged or truncated zlib entry \(error"),
        ('xz', 'Rdata.rdb', 12, False, r"data/Rdata.rdb, entry 'emma': a damaged or truncated xz entry \(LZMAError"),
    ],
)
def test_damaged_package_files_are_one_line_errors_naming_the_file(tmp_path, compression, name, at, cut, message):
  """A truncated gzip index, or a corrupt zlib or xz entry (a damaged download or disk): the file, the entry and
  what is wrong, where the decompressors' own exceptions ended in a traceback."""
  novels = {n: _novel(n.upper(), 3) for n in austen.NOVELS}
  path = write_fake_package(tmp_path / 'janeaustenr', novels, compression)
  assert rdata.read_lazyload(os.path.join(path, 'data', 'Rdata')) == novels
  _damage(path, name, at, cut)
  with pytest.raises(ValueError, match=rf"cannot read the janeaustenr data under '.*janeaustenr': .*{message}") as e:
    Corpus.load(f'austen:{path}')
  assert '\n' not in str(e.value)


# ---------------------------------------------------------------- chapters and splits
def test_chapters_keep_every_line_and_volume_headings_open_their_chapter():
  lines = ['EMMA', '', 'VOLUME I', '', 'CHAPTER I', 'one', 'VOLUME II', '', '', 'CHAPTER I', 'two', 'Chapter 3', 'x']
  assert austen.chapters(lines) == [
      'EMMA\n\nVOLUME I\n\nCHAPTER I\none',
      'VOLUME II\n\n\nCHAPTER I\ntwo',
      'Chapter 3\nx',
  ]
  with pytest.raises(ValueError, match='no chapter heading'):
    austen.chapters(['just', 'lines'])


def test_the_corpus_holds_out_whole_novels(fake):
  path, novels = fake
  corpus = Corpus.load(f'austen:{path}')
  assert corpus.split_files('test') == tuple(f'emma/{k:02d}' for k in range(1, 4))
  assert corpus.split_files('validation') == tuple(f'persuasion/{k:02d}' for k in range(1, 5))
  train_novels = {rel.split('/')[0] for rel in corpus.split_files('train')}
  assert train_novels == set(austen.NOVELS) - {'emma', 'persuasion'}
  # Each split is its chapters joined by NUL; every non-blank line of the novel is in it, in order.
  test_text = bytes(corpus.tokens('test')).decode()
  assert [x for x in test_text.replace('\x00', '\n').split('\n') if x] == [x for x in novels['emma'] if x]
  described = corpus.describe()
  assert described['num_test_files'] == 3 and 'split by novel: test emma' in described['source']
  assert Corpus.load(f'austen:{path}').describe() == described  # deterministic, fingerprinted
  # A training cap cuts training chapters only: the held-out novels come first.
  capped = Corpus.load(f'austen:{path}', max_train_bytes=60)
  assert capped.split_files('test') == corpus.split_files('test') and capped.num_train_files < corpus.num_train_files


def test_bad_names_and_a_missing_package_are_clear_errors(tmp_path, monkeypatch):
  with pytest.raises(ValueError, match=r"'austin' does not exist and is not a named corpus .* 'stdlib', 'austen'"):
    check_source('austin')
  monkeypatch.setattr(austen, 'DEFAULT_PATH', str(tmp_path / 'not_installed'))
  with pytest.raises(ValueError, match=r'apt-get install --no-install-recommends r-cran-janeaustenr'):
    check_source('austen')
  with pytest.raises(ValueError, match=r'apt-get install --no-install-recommends r-cran-janeaustenr'):
    Corpus.load('austen')
  assert corpora.parse('austen:/x') == ('austen', '/x') and corpora.parse('austen') == ('austen', None)
  assert corpora.parse('/some/path') is None


def test_a_config_naming_a_missing_package_fails_before_anything_is_written(tmp_path, monkeypatch):
  from relpos_jax import resources
  from relpos_jax.train import config as config_lib
  from relpos_jax.train import config_files

  monkeypatch.setattr(austen, 'DEFAULT_PATH', str(tmp_path / 'not_installed'))
  with pytest.raises(config_lib.ConfigError, match=r"config\.data\.corpus='austen' is invalid: .*apt-get install"):
    config_files.load_config(str(resources.configs_dir() / 'lm.py'), {'data.corpus': 'austen'})
  assert os.listdir(tmp_path) == []


def _installed() -> bool:
  """Whether the system package's data files are there (a directory alone is not the package)."""
  try:
    austen.check()
  except ValueError:
    return False
  return True


@pytest.mark.skipif(not _installed(), reason='r-cran-janeaustenr is not installed (its data files are absent)')
def test_the_installed_package_gives_six_novels_by_chapter():
  corpus = Corpus.load('austen')
  counts = {s: len(corpus.split_files(s)) for s in ('train', 'validation', 'test')}
  assert counts == {'train': 190, 'validation': 24, 'test': 55}
  assert corpus.num_test_tokens == 882_809 + 54 and corpus.num_val_tokens == 466_761 + 23
  assert bytes(corpus.tokens('test')[:4]) == b'EMMA'
  assert np.count_nonzero(corpus.tokens('test') == 0) == 54


def test_documents_in_memory_refuse_what_a_split_cannot_hold():
  split_of = lambda name: name
  with pytest.raises(ValueError, match=r"document 'train' must be bytes without NUL"):
    Corpus.from_documents([('train', b'a\x00b')], split_of=split_of, source='x')
  with pytest.raises(ValueError, match=r"document 'train' is not UTF-8 text"):
    Corpus.from_documents([('train', b'\xff\xfe')], split_of=split_of, source='x')
  with pytest.raises(ValueError, match=r"split_of\('dev'\) = 'dev'; allowed: one of \('train', 'validation', 'test'\)"):
    Corpus.from_documents([('dev', b'text')], split_of=split_of, source='x')
  with pytest.raises(ValueError, match=r'max_train_bytes'):
    Corpus.from_documents([('train', b'text')], split_of=split_of, source='x', max_train_bytes=0)
  corpus = Corpus.from_documents([('train', b'ab'), ('test', b'cd')], split_of=split_of, source='x')
  assert bytes(corpus.tokens('test')) == b'cd' and corpus.num_val_tokens == 0


@pytest.mark.skipif(not _installed(), reason='r-cran-janeaustenr is not installed (its data files are absent)')
def test_the_test_novel_gives_64k_scored_characters_from_every_chapter():
  """The study's 'enough text': >= 64k scored characters from >= 50 test documents. The default study's
  anchors (reach 1024, tail 64) at eval.num_tokens=65,536 reach all 55 chapters of Emma, ASCII throughout."""
  corpus = Corpus.load('austen')
  anchors = corpus.anchors(1024, 64, 65_536 // 64, 'test')
  separators = np.flatnonzero(corpus.tokens('test') == 0)
  assert len(anchors) * 64 == 65_536
  assert len(set(np.searchsorted(separators, anchors).tolist())) == 55
