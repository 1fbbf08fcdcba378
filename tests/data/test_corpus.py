"""Tests for relpos_jax.data.corpus (byte-level LM corpus)."""

import math
import os

import numpy as np
import pytest

from relpos_jax.data.corpus import DOC_SEPARATOR, STDLIB_EXCLUDED_DIRS, Corpus, nats_to_bits_per_byte


@pytest.fixture(scope='module')
def stdlib_corpus():
  return Corpus.stdlib()


def _write(root, rel, text):
  path = os.path.join(root, rel)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w', encoding='utf-8') as f:
    f.write(text)
  return path


@pytest.fixture
def text_dir(tmp_path):
  rng = np.random.default_rng(0)
  for i in range(40):
    words = ' '.join('w%d' % v for v in rng.integers(0, 50, size=200))
    _write(str(tmp_path), f'd{i % 3}/file_{i:02d}.txt', f'document {i}\n{words}\n')
  with open(tmp_path / 'blob.bin', 'wb') as f:  # not a text suffix, and binary anyway
    f.write(b'\x00\x01\x02')
  return tmp_path


def test_stdlib_corpus_summary(stdlib_corpus):
  c = stdlib_corpus
  d = c.describe()
  assert d['vocab_size'] == 256 and c.vocab_size == 256
  assert 'bits per byte' in d['unit']
  assert c.num_files == c.num_train_files + c.num_val_files + c.num_test_files
  assert c.num_train_files > 100 and c.num_val_files >= 5
  assert 0 < c.num_train_tokens <= 8_000_000
  assert 0.01 < c.num_val_tokens / (c.num_train_tokens + c.num_val_tokens) < 0.2
  assert c.train_tokens.dtype == np.uint8 and c.val_tokens.dtype == np.uint8
  assert len(c.fingerprint) == 16 and int(c.fingerprint, 16) >= 0
  assert 'stdlib' in c.source


def test_stdlib_excludes_dirs_and_is_by_file(stdlib_corpus):
  c = stdlib_corpus
  for _, rel in c.files:
    assert rel.endswith('.py')
    assert not set(rel.split('/')[:-1]) & STDLIB_EXCLUDED_DIRS, rel
  train, val = set(c.split_files('train')), set(c.split_files('validation'))
  assert train and val and not train & val
  assert len(train) + len(val) + len(c.split_files('test')) == c.num_files
  # documents are NUL-separated and NUL never occurs inside a document
  assert int(np.sum(c.train_tokens == DOC_SEPARATOR)) == c.num_train_files - 1
  assert int(np.sum(c.val_tokens == DOC_SEPARATOR)) == c.num_val_files - 1


def test_stdlib_deterministic_and_fingerprint_stable(stdlib_corpus):
  again = Corpus.stdlib()
  assert again.fingerprint == stdlib_corpus.fingerprint
  assert again.files == stdlib_corpus.files
  assert np.array_equal(again.val_tokens, stdlib_corpus.val_tokens)
  smaller = Corpus.stdlib(max_train_bytes=1_000_000)
  assert smaller.fingerprint != stdlib_corpus.fingerprint
  assert smaller.num_train_tokens <= 1_000_000
  # the split of a file depends only on its relative path, not on the cap
  # (up to the documented fallback that moves one file to an otherwise empty validation split)
  big = dict((r, s) for s, r in stdlib_corpus.files)
  moved = [r for s, r in smaller.files if big[r] != s]
  assert not moved or (len(moved) == 1 and smaller.split_files('validation') == tuple(moved))


def test_from_paths_split_by_file(text_dir):
  c = Corpus.from_paths([text_dir], val_fraction=0.2)
  c2 = Corpus.from_paths([str(text_dir)], val_fraction=0.2)
  assert c.fingerprint == c2.fingerprint and c.files == c2.files
  assert c.num_files == 40  # blob.bin skipped
  train, val = set(c.split_files('train')), set(c.split_files('validation'))
  assert train and val and not train & val
  assert [r for _, r in c.files] == sorted(r for _, r in c.files)
  text = bytes(c.val_tokens).split(b'\x00')
  assert len(text) == c.num_val_files and all(t.startswith(b'document ') for t in text)


def test_from_paths_fingerprint_tracks_content(tmp_path):
  a = _write(str(tmp_path), 'a.txt', 'hello world\n' * 20)
  b = _write(str(tmp_path), 'b.txt', 'second file\n' * 20)
  f1 = Corpus.from_paths([a, b]).fingerprint
  assert Corpus.from_paths([a, b]).fingerprint == f1
  _write(str(tmp_path), 'b.txt', 'second file!\n' * 20)
  assert Corpus.from_paths([a, b]).fingerprint != f1


def test_from_paths_two_files_get_a_validation_file(tmp_path):
  a = _write(str(tmp_path), 'a.txt', 'x' * 100)
  b = _write(str(tmp_path), 'b.txt', 'y' * 100)
  c = Corpus.from_paths([a, b])
  assert c.num_train_files == 1 and c.num_val_files == 1


def test_from_paths_cap(text_dir):
  c = Corpus.from_paths(text_dir, max_train_bytes=3000)
  assert 0 < c.num_train_tokens <= 3000  # separators included
  assert c.num_files < 40


def test_from_paths_errors(tmp_path):
  empty = tmp_path / 'empty'
  empty.mkdir()
  with pytest.raises(ValueError, match='empty'):
    Corpus.from_paths([empty])
  binary = tmp_path / 'bin'
  binary.mkdir()
  (binary / 'x.txt').write_bytes(b'\x00\xff\x00')
  with pytest.raises(ValueError, match='bin'):
    Corpus.from_paths([binary])
  with pytest.raises(ValueError, match='nope'):
    Corpus.from_paths([tmp_path / 'nope'])
  with pytest.raises(ValueError, match='val_fraction'):
    Corpus.from_paths([tmp_path], val_fraction=1.5)


def test_sample_batch(stdlib_corpus):
  c = stdlib_corpus
  x = c.sample_batch(np.random.default_rng(3), 8, 64)
  assert x.shape == (8, 65) and x.dtype == np.int32
  assert x.min() >= 0 and x.max() < 256
  assert np.array_equal(x, c.sample_batch(np.random.default_rng(3), 8, 64))
  assert not np.array_equal(x, c.sample_batch(np.random.default_rng(4), 8, 64))
  raw = bytes(c.train_tokens)
  for row in x:
    assert bytes(row.astype(np.uint8)) in raw


def test_sample_batch_errors(tmp_path):
  c = Corpus.from_paths([_write(str(tmp_path), 'a.txt', 'abcdefghij')])
  assert c.sample_batch(np.random.default_rng(0), 2, 9).shape == (2, 10)
  with pytest.raises(ValueError, match='length=10'):
    c.sample_batch(np.random.default_rng(0), 2, 10)
  with pytest.raises(ValueError, match='length=0'):
    c.sample_batch(np.random.default_rng(0), 2, 0)
  with pytest.raises(ValueError, match='batch_size=0'):
    c.sample_batch(np.random.default_rng(0), 0, 4)
  with pytest.raises(TypeError):
    c.sample_batch(0, 2, 4)


def test_eval_windows(stdlib_corpus):
  c = stdlib_corpus
  length = 256
  k = (c.num_val_tokens - 1) // length
  w = c.eval_windows(length, 50)
  assert w.shape == (50, length + 1) and w.dtype == np.int32
  assert np.array_equal(w, c.eval_windows(length, 50))
  # windows are taken at multiples of `length`, evenly spread, and their targets are disjoint
  val = c.val_tokens.astype(np.int32)
  starts = [(i * k) // 50 * length for i in range(50)]
  for row, s in zip(w, starts):
    assert np.array_equal(row, val[s : s + length + 1])
  assert np.all(np.diff(starts) >= length)
  assert starts[-1] > c.num_val_tokens // 2  # spread, not bunched at the start
  everything = c.eval_windows(length, 10**9)
  assert everything.shape[0] == k
  assert np.array_equal(everything[:, 1:].ravel(), val[1 : k * length + 1])
  assert c.eval_windows(length, 5, split='train').shape == (5, length + 1)


def test_eval_windows_errors(stdlib_corpus):
  c = stdlib_corpus
  with pytest.raises(ValueError, match='length=0'):
    c.eval_windows(0, 5)
  with pytest.raises(ValueError, match='max_windows=0'):
    c.eval_windows(16, 0)
  with pytest.raises(ValueError, match=f'length={c.num_val_tokens}'):
    c.eval_windows(c.num_val_tokens, 1)
  with pytest.raises(ValueError, match='split'):
    c.eval_windows(16, 1, split='holdout')


def test_bits_per_byte():
  assert nats_to_bits_per_byte(math.log(2.0)) == pytest.approx(1.0)


# ------------------------------------------------------------------ config.data.corpus: Corpus.load
def test_load_a_directory_a_file_and_a_glob(text_dir, monkeypatch):
  by_dir = Corpus.load(str(text_dir), val_fraction=0.2)
  assert by_dir.files == Corpus.from_paths(text_dir, val_fraction=0.2).files  # same walk, same split
  assert by_dir.fingerprint == Corpus.from_paths(text_dir, val_fraction=0.2).fingerprint
  assert by_dir.num_files == 40 and by_dir.num_val_files > 0

  one = Corpus.load(str(text_dir / 'd0' / 'file_00.txt'))
  assert one.files == (('train', 'file_00.txt'),) and one.num_val_tokens == 0
  assert bytes(one.train_tokens).startswith(b'document 0\n')

  # A glob: the matched files, named relative to the pattern's fixed directory, so the split and the
  # fingerprint are those of the same files found by a directory walk.
  only_d1 = Corpus.load(str(text_dir / 'd1' / '*.txt'), val_fraction=0.2)
  in_d1 = [rel[len('d1/') :] for _, rel in by_dir.files if rel.startswith('d1/')]
  assert [rel for _, rel in only_d1.files] == in_d1
  everything = Corpus.load(str(text_dir / '**' / '*.txt'), val_fraction=0.2)
  assert everything.files == by_dir.files and everything.fingerprint == by_dir.fingerprint
  assert everything.source.startswith('glob: ')
  # '~' is expanded, and a relative pattern is read from the working directory.
  monkeypatch.setenv('HOME', str(text_dir))
  assert Corpus.load('~/d2').fingerprint == Corpus.from_paths(text_dir / 'd2').fingerprint
  monkeypatch.chdir(text_dir)
  assert Corpus.load('d*/file_0?.txt').num_files == 10


def test_load_stdlib_is_the_builtin_corpus():
  a, b = Corpus.load('stdlib', max_train_bytes=200_000), Corpus.stdlib(max_train_bytes=200_000)
  assert a.fingerprint == b.fingerprint and a.files == b.files


def test_load_errors_name_the_path(tmp_path):
  with pytest.raises(ValueError, match=r"path '.*missing' does not exist"):
    Corpus.load(str(tmp_path / 'missing'))
  with pytest.raises(ValueError, match=r"glob pattern '.*\*\.nothing' matches no file"):
    Corpus.load(str(tmp_path / '*.nothing'))
  (tmp_path / 'bin').mkdir()
  (tmp_path / 'bin' / 'x.txt').write_bytes(b'\x00\xff\x00')
  with pytest.raises(ValueError, match="no readable text files found in '.*bin/\\*'"):
    Corpus.load(str(tmp_path / 'bin' / '*'))  # matched, but no text file among them
  with pytest.raises(ValueError, match='no text files .* under directory'):
    Corpus.load(str(tmp_path / 'bin'))
  with pytest.raises(ValueError, match="a directory, a text file or a glob, got ' '"):
    Corpus.load(' ')
  with pytest.raises(TypeError, match='corpus must be .* got int 3'):
    Corpus.load(3)


def test_sample_batch_rows_are_those_rows_of_the_whole_batch(text_dir):
  """What one process of a multi-process run feeds: its rows, equal to the same rows of the whole batch."""
  c = Corpus.from_paths(text_dir)
  whole = c.sample_batch(np.random.default_rng(5), 8, 16)
  for rows in (slice(0, 4), slice(4, 8), slice(2, 6)):
    np.testing.assert_array_equal(c.sample_batch(np.random.default_rng(5), 8, 16, rows=rows), whole[rows])
  with pytest.raises(TypeError, match='slice of consecutive rows'):
    c.sample_batch(np.random.default_rng(5), 8, 16, rows=[0, 1])
