"""Files of a corpus directory that cannot be read or are not text are named (a warning and data.json), not
skipped without a word; a corpus with no readable file is an error that says what was skipped."""

from __future__ import annotations

import os

import pytest

from relpos_jax.data import Corpus


def _corpus_dir(tmp_path, num_text=3):
  for i in range(num_text):
    (tmp_path / f'doc{i}.txt').write_text(f'text file number {i}\n' * 20)
  return tmp_path


def test_unreadable_and_binary_files_are_warned_about_and_recorded(tmp_path):
  root = _corpus_dir(tmp_path)
  os.symlink(tmp_path / 'gone.txt', tmp_path / 'broken.txt')  # unreadable (even for root)
  (tmp_path / 'latin1.txt').write_bytes('caf\xe9\n'.encode('latin-1'))
  (tmp_path / 'nul.md').write_bytes(b'a\x00b')
  (tmp_path / 'empty.txt').write_text('')  # nothing to read: not reported
  with pytest.warns(UserWarning, match=r'3 file\(s\) skipped') as caught:
    corpus = Corpus.load(str(root))
  message = str(caught[0].message)
  assert 'broken.txt: not a regular file' in message and 'latin1.txt: not text (not UTF-8)' in message
  assert corpus.num_files == 3
  described = corpus.describe()
  assert described['num_skipped_files'] == 3
  assert described['skipped_files'] == [
      'broken.txt: not a regular file (a broken link, a pipe or a device)',
      'latin1.txt: not text (not UTF-8)',
      'nul.md: not text (holds NUL bytes)',
  ]


@pytest.mark.skipif(os.geteuid() == 0, reason='root reads a file of mode 000')
def test_a_file_without_read_permission_is_named(tmp_path):
  root = _corpus_dir(tmp_path)
  locked = tmp_path / 'secret.txt'
  locked.write_text('hidden\n')
  locked.chmod(0)
  with pytest.warns(UserWarning, match=r'secret.txt: unreadable \(PermissionError'):
    corpus = Corpus.load(str(root))
  assert corpus.describe()['num_skipped_files'] == 1


def test_a_corpus_of_no_readable_file_is_an_error_naming_what_was_skipped(tmp_path):
  (tmp_path / 'a.bin').write_bytes(b'\xff\xfe\x00')
  (tmp_path / 'b.bin').write_bytes(b'\xff\xfe\x01')
  with pytest.raises(ValueError, match=r'no readable text files found in .*\(2 skipped: a.bin: not text'):
    Corpus.from_glob(str(tmp_path / '*.bin'))


def test_a_clean_corpus_records_no_skipped_file(tmp_path, recwarn):
  corpus = Corpus.load(str(_corpus_dir(tmp_path)))
  assert corpus.describe()['num_skipped_files'] == 0 and corpus.describe()['skipped_files'] == []
  assert not [w for w in recwarn if 'skipped' in str(w.message)]
