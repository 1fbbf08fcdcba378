"""The corpus's three splits and its same-targets evaluation windows."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from relpos_jax.data.corpus import Corpus


@pytest.fixture(scope='module')
def stdlib():
  return Corpus.stdlib(max_train_bytes=2_000_000)


@pytest.fixture
def text_dir(tmp_path):
  for i in range(60):
    (tmp_path / f'doc_{i:02d}.txt').write_text(f'document {i}\n' + 'some text here. ' * (20 + i))
  return tmp_path


def test_three_splits_are_disjoint_deterministic_and_cover_every_file(text_dir):
  corpus = Corpus.from_paths([text_dir], val_fraction=0.2, test_fraction=0.2)
  again = Corpus.from_paths([text_dir], val_fraction=0.2, test_fraction=0.2)
  splits = {name: set(corpus.split_files(name)) for name in ('train', 'validation', 'test')}
  assert all(splits.values())
  assert not splits['train'] & splits['validation'] and not splits['train'] & splits['test']
  assert not splits['validation'] & splits['test']
  assert set().union(*splits.values()) == {f'doc_{i:02d}.txt' for i in range(60)}
  assert corpus.files == again.files and corpus.describe() == again.describe()
  # The rule of the module docstring, by hand: h < 2000 validation, 2000 <= h < 4000 test, else train.
  for split, rel in corpus.files:
    h = int(hashlib.sha256(rel.encode()).hexdigest()[:8], 16) % 10_000
    assert split == ('validation' if h < 2000 else 'test' if h < 4000 else 'train'), rel
  # Each split's tokens are its files joined by NUL.
  assert (
      corpus.num_test_tokens == sum(len((text_dir / r).read_bytes()) for r in splits['test']) + len(splits['test']) - 1
  )


def test_validation_keeps_its_files_and_test_comes_out_of_training(text_dir):
  """Adding the test split moves no file into or out of validation (the two-way rule is kept)."""
  two_way = Corpus.from_paths([text_dir], val_fraction=0.2, test_fraction=0.0)
  three_way = Corpus.from_paths([text_dir], val_fraction=0.2, test_fraction=0.2)
  assert two_way.split_files('validation') == three_way.split_files('validation')
  assert set(three_way.split_files('test')) <= set(two_way.split_files('train'))
  assert two_way.num_test_tokens == 0


def test_split_fingerprints_are_recorded_and_change_with_a_split(text_dir):
  described = Corpus.from_paths([text_dir], val_fraction=0.2, test_fraction=0.2).describe()
  assert set(described['split_fingerprints']) == {'train', 'validation', 'test'}
  assert len(set(described['split_fingerprints'].values())) == 3
  other = Corpus.from_paths([text_dir], val_fraction=0.2, test_fraction=0.3).describe()
  assert other['split_fingerprints']['validation'] == described['split_fingerprints']['validation']
  assert other['split_fingerprints']['test'] != described['split_fingerprints']['test']
  assert other['fingerprint'] != described['fingerprint']


def test_small_corpora_get_a_test_file_and_keep_a_training_file(tmp_path):
  for i in range(3):
    (tmp_path / f'f{i}.txt').write_text(f'file {i} ' * 50)
  corpus = Corpus.from_paths([tmp_path], val_fraction=0.01, test_fraction=0.01)
  assert (corpus.num_train_files, corpus.num_val_files, corpus.num_test_files) == (1, 1, 1)


@pytest.mark.parametrize('fractions', [(0.5, 0.5), (0.2, -0.1), (0.2, 1.0)])
def test_bad_fractions_are_named(tmp_path, fractions):
  (tmp_path / 'a.txt').write_text('text ' * 20)
  with pytest.raises(ValueError, match='fraction'):
    Corpus.from_paths([tmp_path], val_fraction=fractions[0], test_fraction=fractions[1])


def test_every_length_scores_the_same_target_bytes(stdlib):
  """Windows of 16, 64 and 256 end at the same anchors; their last 16 targets are the same bytes, and the
  scored-set fingerprints are equal."""
  reach, tail, count = 256, 16, 12
  anchors = stdlib.anchors(reach, tail, count, 'test')
  tokens = stdlib.tokens('test')
  assert len(anchors) == count and np.all(np.diff(anchors) >= tail) and anchors[0] >= reach
  tails = []
  for length in (16, 64, 256):
    windows = stdlib.anchored_windows(length, reach, tail, count, 'test')
    assert windows.shape == (count, length + 1)
    np.testing.assert_array_equal(windows[:, -1], tokens[anchors])  # each window ends at its anchor
    tails.append(windows[:, -tail:])
  np.testing.assert_array_equal(tails[0], tails[1])
  np.testing.assert_array_equal(tails[0], tails[2])
  fingerprints = {stdlib.scored_set(n, reach, tail, count, 'test')['fingerprint'] for n in (16, 64, 256)}
  assert len(fingerprints) == 1
  # Another split, or other anchors, score other bytes: the fingerprint tells.
  assert stdlib.scored_set(64, reach, tail, count, 'validation')['fingerprint'] not in fingerprints
  assert stdlib.scored_set(64, 512, tail, count, 'test')['fingerprint'] not in fingerprints


def test_anchors_are_spread_over_the_split_and_errors_are_named(stdlib):
  anchors = stdlib.anchors(64, 64, 10, 'validation')
  assert anchors[-1] > stdlib.num_val_tokens // 2
  with pytest.raises(ValueError, match='tail=128 must be <= reach=64'):
    stdlib.anchors(64, 128, 10, 'validation')
  with pytest.raises(ValueError, match=r'length=32 must be in \[tail, reach\] = \[64, 256\]'):
    stdlib.anchored_windows(32, 256, 64, 4, 'test')
  with pytest.raises(ValueError, match='split'):
    stdlib.anchors(64, 64, 4, 'holdout')
