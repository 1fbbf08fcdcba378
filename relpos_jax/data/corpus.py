"""Byte-level ("character-level") language-modelling corpus, built offline and deterministically.

Tokens are the UTF-8 *bytes* of the text: the vocabulary has 256 entries and a "character" is a byte.
So every bits-per-character number produced from this corpus is bits per **byte** (for ASCII-only text,
which is almost all of the Python standard library, the two coincide).

Sources
-------
* ``Corpus.stdlib()``: the running interpreter's own standard-library ``.py`` sources, found through
  ``sysconfig.get_paths()['stdlib']``. Directories named ``site-packages``, ``dist-packages``, ``test``,
  ``tests``, ``idlelib``, ``lib2to3``, ``__pycache__`` and ``encodings`` (generated codec tables, not
  written code) are skipped, and so is any file that cannot be read or is not text (see below).
* ``Corpus.from_paths([...])``: text files and/or directories named by the user. Directories are walked
  recursively for files whose suffix is in ``suffixes``; a file named explicitly is used whatever its
  suffix. A "text file" is one that decodes as UTF-8 and contains no NUL byte.
* ``Corpus.from_glob('texts/**/*.md')``: the files a glob pattern matches (``**`` recurses), whatever
  their suffix; their relative paths are taken from the pattern's fixed leading directory (``texts/``).
* ``Corpus.from_documents([(name, bytes), ...], split_of=...)``: documents already in memory, with a split
  rule of their own (a named corpus holding out whole works).
* ``Corpus.load(corpus)``: what ``config.data.corpus`` names: ``'stdlib'``, a named corpus of
  `relpos_jax.data.corpora` (``'austen'``: Jane Austen's novels, a chapter per document, one novel held out
  for test and one for validation), or a path to a directory, a file or a glob pattern (``~`` expanded),
  dispatched to the above.

Determinism, splits and cap
---------------------------
Files are visited in sorted order of their path relative to the root that was given (for
``from_paths``, roots are visited in the order given). Three disjoint splits, **by file**: with
``h = int(sha256(relative_path)[:8], 16) % 10_000``, ``v = round(10_000 * val_fraction)`` (default 5%)
and ``t = round(10_000 * test_fraction)`` (default 5%), a file goes to validation iff ``h < v``, to test
iff ``v <= h < v + t``, else to train. A file's split depends only on its relative path, so it is stable
across machines and across additions of other files (validation holds the files it held before the test
split existed; the test files come out of the former training files). Small corpora: if validation is
empty and there are at least two files, the file with the smallest hash value is moved there; then, if
test is empty and at least two training files are left, the training file with the smallest hash value
is moved to test (so for small corpora one file's split can depend on the cap). Training files are
taken, in order, until the next one would take the training split past ``max_train_bytes`` (default
8 MB), and the scan stops there; validation and test hold their files met before that point
(``num_train_tokens <= max_train_bytes``, separators included, except that the first training file is
always kept). Loading the default corpus takes well under 2 s (about 0.1 s here).

Model choices (learning rates, variants) are made on validation; test is held out for the numbers a
study reports (`relpos_jax.study`).

Documents within a split are joined with a single NUL byte (0) as separator; NUL never occurs inside
an accepted text file, so it marks document boundaries unambiguously.

``fingerprint`` is a short sha256 hex digest over the ordered list of (split, relative path, size,
bytes) of every file used, so two loads of the same data give the same fingerprint and any change in
file list, split or content changes it; ``split_fingerprints`` digest each split alone. Record them
(``Corpus.describe()``) with every result.

Evaluation on the same targets at every length
----------------------------------------------
``anchored_windows(length, reach, tail, count, split)`` cuts the windows of one evaluation length so that
every length scores the *same* target bytes: windows end at common anchor positions of the split, and
only the last ``tail`` targets of each window are scored, so a target is predicted with ``length - tail +
1 .. length`` bytes of context at every length (``scored_set`` describes and fingerprints those targets).
``eval_windows`` (windows spread over the split, each length scoring different text) is kept for
callers that want disjoint windows of one length.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import math
import os
import sys
import sysconfig
import warnings
from typing import Iterable, Sequence

import numpy as np

from relpos_jax import validation
from relpos_jax.data import corpora

VOCAB_SIZE = 256
DOC_SEPARATOR = 0
DEFAULT_MAX_TRAIN_BYTES = 8_000_000
DEFAULT_VAL_FRACTION = 0.05
DEFAULT_TEST_FRACTION = 0.05
DEFAULT_SUFFIXES = ('.py', '.txt', '.md', '.rst')
STDLIB_EXCLUDED_DIRS = frozenset(
    {'site-packages', 'dist-packages', 'test', 'tests', 'idlelib', 'lib2to3', '__pycache__', 'encodings'}
)
SPLITS = ('train', 'validation', 'test')
STDLIB = 'stdlib'

__all__ = ['Corpus', 'VOCAB_SIZE', 'DOC_SEPARATOR', 'STDLIB', 'check_source', 'nats_to_bits_per_byte']


def nats_to_bits_per_byte(loss_nats: float) -> float:
  """Mean cross-entropy per token in nats -> bits per byte (= bits per character for this corpus)."""
  return float(loss_nats) / math.log(2.0)


def _check_options(max_train_bytes, val_fraction, test_fraction=0.0) -> None:
  for name, value in (('val_fraction', val_fraction), ('test_fraction', test_fraction)):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
      raise ValueError(f'{name} must be in [0, 1), got {name}={value!r}')
  if val_fraction + test_fraction >= 1:
    raise ValueError(
        f'val_fraction + test_fraction must be < 1 (training needs files), got {val_fraction} + {test_fraction}'
    )
  if max_train_bytes is not None:
    validation.positive_int('corpus', 'max_train_bytes', max_train_bytes)


def check_source(corpus) -> str:
  """`corpus` as `Corpus.load` reads it ('stdlib', a named corpus, or the path with `~` expanded); raises
  TypeError if it is not a string and ValueError if it names nothing: a missing file or directory, a glob
  matching no file, a named corpus whose package is not installed (the message gives the install command).
  (Whether the files are text is found when they are read.)"""
  if not isinstance(corpus, (str, os.PathLike)) or isinstance(corpus, bytes):
    raise TypeError(f"corpus must be 'stdlib' or a path (str), got {type(corpus).__name__} {corpus!r}")
  text = os.fspath(corpus)
  if text == STDLIB:
    return text
  named = corpora.parse(text)
  if named is not None:
    corpora.NAMED[named[0]].check(named[1])
    return text
  if not text.strip():
    raise ValueError(f"corpus must be 'stdlib' or a path to a directory, a text file or a glob, got {text!r}")
  path = os.path.expanduser(text)
  if glob.has_magic(path):
    if not any(os.path.isfile(p) for p in glob.iglob(path, recursive=True)):
      raise ValueError(f'the glob pattern {text!r} matches no file')
  elif not os.path.exists(path):
    raise ValueError(
        f'path {text!r} does not exist and is not a named corpus (a corpus is one of the names '
        f'{", ".join(map(repr, corpora.NAMES))}, a directory, a text file or a glob)'
    )
  elif not os.path.isdir(path) and not os.path.isfile(path):
    raise ValueError(_not_regular(text))
  return path


def _not_regular(text: str) -> str:
  return (
      f'path {text!r} is not a regular file or a directory (a FIFO, a socket or a device, whose reading would '
      "block or never end); allowed: 'stdlib', a directory, a text file or a glob"
  )


def _glob_root(pattern: str) -> str:
  """The directory part of `pattern` before its first wildcard: what matched paths are made relative to."""
  head = pattern
  while glob.has_magic(head):
    head = os.path.dirname(head)
  return head or os.curdir


def _path_hash(rel_path: str) -> int:
  return int(hashlib.sha256(rel_path.encode('utf-8')).hexdigest()[:8], 16)


def _split_of(rel_path: str, val_fraction: float, test_fraction: float) -> str:
  """'validation', 'test' or 'train': a function of the relative path only (module docstring)."""
  h = _path_hash(rel_path) % 10_000
  validation_cut = round(10_000 * val_fraction)
  if h < validation_cut:
    return 'validation'
  return 'test' if h < validation_cut + round(10_000 * test_fraction) else 'train'


def _digest(docs) -> str:
  h = hashlib.sha256()
  for split, rel, data in docs:
    h.update(f'{split}\x00{rel}\x00{len(data)}\x00'.encode('utf-8'))
    h.update(data)
  return h.hexdigest()[:16]


def _read_text(path: str) -> tuple[bytes | None, str | None]:
  """(bytes, None) for a readable UTF-8 text file without NUL bytes; (None, why) for a file that cannot be read
  or is not text, which the corpus reports (`Corpus.skipped`); (None, None) for an empty file (nothing to use,
  nothing to report: the standard library has empty __init__.py files)."""
  if not os.path.isfile(path):  # A FIFO would block the read forever; a broken link cannot be read.
    return None, 'not a regular file (a broken link, a pipe or a device)'
  try:
    with open(path, 'rb') as f:
      data = f.read()
  except OSError as e:
    return None, f'unreadable ({type(e).__name__}: {e.strerror or e})'
  if not data:
    return None, None
  if b'\x00' in data:
    return None, 'not text (holds NUL bytes)'
  try:
    data.decode('utf-8')
  except UnicodeDecodeError:
    return None, 'not text (not UTF-8)'
  return data, None


def _read_text_bytes(path: str) -> bytes | None:
  """The file's bytes if it is a readable UTF-8 text file without NUL bytes, else None."""
  return _read_text(path)[0]


# How many skipped files a warning names, and how many `describe()` (data.json) lists.
_SKIPPED_IN_WARNING = 5
_SKIPPED_RECORDED = 100


def _listed(skipped: Sequence[tuple[str, str]]) -> str:
  more = f' (and {len(skipped) - _SKIPPED_IN_WARNING} more)' if len(skipped) > _SKIPPED_IN_WARNING else ''
  return '; '.join(f'{rel}: {why}' for rel, why in skipped[:_SKIPPED_IN_WARNING]) + more


def _report_skipped(skipped: Sequence[tuple[str, str]], where: str) -> None:
  if skipped:
    warnings.warn(
        f'corpus {where}: {len(skipped)} file(s) skipped, neither readable nor UTF-8 text: {_listed(skipped)}. '
        'They are listed in the corpus description (data.json, skipped_files).',
        stacklevel=3,
    )


def _walk_sorted(root: str, suffixes: tuple[str, ...], excluded_dirs: frozenset[str]) -> list[tuple[str, str]]:
  """(relative path with '/' separators, absolute path) of matching files under root, sorted."""
  found = []
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = [d for d in dirnames if d not in excluded_dirs]
    for name in filenames:
      if name.endswith(suffixes):
        full = os.path.join(dirpath, name)
        rel = os.path.relpath(full, root).replace(os.sep, '/')
        found.append((rel, full))
  found.sort()
  return found


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
  """A byte-level corpus with a fixed by-file train/validation/test split. Build with ``stdlib``/``from_paths``."""

  train_tokens: np.ndarray  # uint8 (num_train_tokens,)
  val_tokens: np.ndarray  # uint8 (num_val_tokens,)
  files: tuple[tuple[str, str], ...]  # (split, relative path) in load order
  fingerprint: str
  source: str
  max_train_bytes: int | None
  val_fraction: float
  vocab_size: int = VOCAB_SIZE
  test_tokens: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint8))
  test_fraction: float = 0.0
  split_fingerprints: tuple[tuple[str, str], ...] = ()  # (split, digest of that split's files)
  # (relative path, why) of every file met before the cap that could not be read or was not text.
  skipped: tuple[tuple[str, str], ...] = ()

  # ---------------------------------------------------------------- construction
  @classmethod
  def stdlib(
      cls,
      max_train_bytes: int | None = DEFAULT_MAX_TRAIN_BYTES,
      val_fraction: float = DEFAULT_VAL_FRACTION,
      test_fraction: float = DEFAULT_TEST_FRACTION,
  ) -> 'Corpus':
    """The running interpreter's standard-library ``.py`` sources (see module docstring)."""
    _check_options(max_train_bytes, val_fraction, test_fraction)
    root = sysconfig.get_paths()['stdlib']
    if not os.path.isdir(root):
      raise ValueError(f'standard library directory {root!r} not found')
    entries = _walk_sorted(root, ('.py',), STDLIB_EXCLUDED_DIRS)
    source = f'python{sys.version_info.major}.{sys.version_info.minor} stdlib .py sources at {root}'
    return cls._build(
        entries,
        source=source,
        max_train_bytes=max_train_bytes,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
        empty_what=root,
    )

  @classmethod
  def from_paths(
      cls,
      paths: Sequence[str | os.PathLike] | str | os.PathLike,
      max_train_bytes: int | None = DEFAULT_MAX_TRAIN_BYTES,
      val_fraction: float = DEFAULT_VAL_FRACTION,
      suffixes: Iterable[str] = DEFAULT_SUFFIXES,
      test_fraction: float = DEFAULT_TEST_FRACTION,
  ) -> 'Corpus':
    """Text files and/or directories (walked recursively for ``suffixes``). Order of ``paths`` is kept."""
    _check_options(max_train_bytes, val_fraction, test_fraction)
    if isinstance(paths, (str, os.PathLike)):
      paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
      raise ValueError('from_paths needs at least one path, got an empty list')
    suffixes = tuple(suffixes)
    entries: list[tuple[str, str]] = []
    for i, p in enumerate(paths):
      prefix = f'{i}:' if len(paths) > 1 else ''
      if os.path.isdir(p):
        found = _walk_sorted(p, suffixes, frozenset({'__pycache__'}))
        read = [(rel, _read_text(full)) for rel, full in found]
        if not any(data is not None for _, (data, _) in read):
          skipped = [(rel, why) for rel, (_, why) in read if why is not None]
          raise ValueError(
              f'no text files (suffixes {suffixes}) found under directory {p!r}'
              + (f' ({len(skipped)} skipped: {_listed(skipped)})' if skipped else '')
          )
        entries.extend((prefix + rel, full) for rel, full in found)
      elif os.path.isfile(p):
        data, why = _read_text(p)
        if data is None:
          raise ValueError(f'path {p!r} is {why or "empty"}; allowed: a readable, non-empty UTF-8 text file')
        entries.append((prefix + os.path.basename(p), p))
      elif os.path.exists(p):
        raise ValueError(_not_regular(p))
      else:
        raise ValueError(f'path {p!r} does not exist')
    source = 'files: ' + ', '.join(os.path.abspath(p) for p in paths)
    return cls._build(
        entries,
        source=source,
        max_train_bytes=max_train_bytes,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
        empty_what=', '.join(paths),
    )

  @classmethod
  def from_glob(
      cls,
      pattern: str | os.PathLike,
      max_train_bytes: int | None = DEFAULT_MAX_TRAIN_BYTES,
      val_fraction: float = DEFAULT_VAL_FRACTION,
      test_fraction: float = DEFAULT_TEST_FRACTION,
  ) -> 'Corpus':
    """The files `pattern` matches (`glob`, `**` recursing), any suffix; relative paths (split, fingerprint)
    are taken from the pattern's leading directory without wildcards."""
    _check_options(max_train_bytes, val_fraction, test_fraction)
    pattern = check_source(pattern)
    if not glob.has_magic(pattern):
      raise ValueError(f'{pattern!r} is not a glob pattern (no *, ? or [...]); use Corpus.from_paths')
    root = _glob_root(pattern)
    entries = sorted(
        (os.path.relpath(p, root).replace(os.sep, '/'), p)
        for p in glob.iglob(pattern, recursive=True)
        if os.path.isfile(p)
    )
    return cls._build(
        entries,
        source=f'glob: {os.path.abspath(pattern)}',
        max_train_bytes=max_train_bytes,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
        empty_what=pattern,
    )

  @classmethod
  def load(
      cls,
      corpus: str | os.PathLike,
      max_train_bytes: int | None = DEFAULT_MAX_TRAIN_BYTES,
      val_fraction: float = DEFAULT_VAL_FRACTION,
      test_fraction: float = DEFAULT_TEST_FRACTION,
  ) -> 'Corpus':
    """`'stdlib'`, or a path: a directory (walked for ``DEFAULT_SUFFIXES``), a text file, or a glob pattern.

    What `config.data.corpus` names. Raises TypeError for a non-string, ValueError naming the path when it
    does not exist, matches nothing or holds no readable text file.
    """

    path = check_source(corpus)
    options = dict(max_train_bytes=max_train_bytes, val_fraction=val_fraction, test_fraction=test_fraction)
    if path == STDLIB:
      return cls.stdlib(**options)
    named = corpora.parse(path)
    if named is not None:  # a named corpus splits by its own rule (whole works): the fractions do not apply
      module = corpora.NAMED[named[0]]
      where = module.check(named[1])
      return cls.from_documents(
          module.documents(where),
          split_of=module.split_of,
          source=f'{named[0]}: {module.DESCRIPTION} at {where}; {module.SPLIT_RULE}',
          max_train_bytes=max_train_bytes,
      )
    if glob.has_magic(path):
      return cls.from_glob(path, **options)
    return cls.from_paths(path, **options)

  @classmethod
  def from_documents(
      cls,
      documents: Sequence[tuple[str, bytes]],
      *,
      split_of,
      source: str,
      max_train_bytes: int | None = DEFAULT_MAX_TRAIN_BYTES,
  ) -> 'Corpus':
    """Documents in memory, (name, UTF-8 bytes without NUL) in load order, each put in the split
    `split_of(name)` returns ('train', 'validation' or 'test'): a named corpus's own rule, such as a whole
    novel held out. The cap and fingerprints are as for files; `val_fraction`/`test_fraction` are recorded
    as the fractions of documents that landed in each split."""
    if max_train_bytes is not None:
      validation.positive_int('corpus', 'max_train_bytes', max_train_bytes)
    documents = list(documents)
    for name, data in documents:
      if not isinstance(data, bytes) or b'\x00' in data:
        raise ValueError(f'document {name!r} must be bytes without NUL (the separator), got {type(data).__name__}')
      try:
        data.decode('utf-8')
      except UnicodeDecodeError as e:
        raise ValueError(f'document {name!r} is not UTF-8 text ({e})') from None
      if split_of(name) not in SPLITS:
        raise ValueError(f'split_of({name!r}) = {split_of(name)!r}; allowed: one of {SPLITS}')
    count = max(len(documents), 1)
    fractions = {s: sum(1 for n, _ in documents if split_of(n) == s) / count for s in SPLITS}
    return cls._build(
        documents,
        source=source,
        max_train_bytes=max_train_bytes,
        val_fraction=fractions['validation'],
        test_fraction=fractions['test'],
        empty_what=source,
        split_of=split_of,
    )

  @classmethod
  def _build(
      cls,
      entries: list[tuple[str, str | bytes]],
      *,
      source: str,
      max_train_bytes: int | None,
      val_fraction: float,
      test_fraction: float = 0.0,
      empty_what: str,
      split_of=None,
  ) -> 'Corpus':
    """`entries`: (relative path, file path or the document's bytes); `split_of(rel)` overrides the path-hash
    split (then no split is filled in for a small corpus: the rule is the corpus's own)."""
    if split_of is None:
      _check_options(max_train_bytes, val_fraction, test_fraction)
    # Read every candidate lazily, in order, and assign splits.
    docs: list[tuple[str, str, bytes]] = []  # (split, rel, data)
    train_bytes = 0
    skipped = []
    for rel, full in entries:
      data, why = (full or None, None) if isinstance(full, bytes) else _read_text(full)
      if data is None:
        if why is not None:
          skipped.append((rel, why))
        continue
      split = _split_of(rel, val_fraction, test_fraction) if split_of is None else split_of(rel)
      if split == 'train':
        added = len(data) + (1 if train_bytes else 0)  # + the NUL separator
        if max_train_bytes is not None and train_bytes + added > max_train_bytes and train_bytes > 0:
          break
        train_bytes += added
      docs.append((split, rel, data))
    if not docs:
      raise ValueError(
          f'no readable text files found in {empty_what!r}'
          + (f' ({len(skipped)} skipped: {_listed(skipped)})' if skipped else '')
      )
    _report_skipped(skipped, empty_what)
    if split_of is None and val_fraction > 0 and len(docs) >= 2 and not any(s == 'validation' for s, _, _ in docs):
      j = min(range(len(docs)), key=lambda k: (_path_hash(docs[k][1]), docs[k][1]))
      docs[j] = ('validation',) + docs[j][1:]
    train_docs = [k for k, d in enumerate(docs) if d[0] == 'train']
    if split_of is None and test_fraction > 0 and len(train_docs) >= 2 and not any(s == 'test' for s, _, _ in docs):
      j = min(train_docs, key=lambda k: (_path_hash(docs[k][1]), docs[k][1]))
      docs[j] = ('test',) + docs[j][1:]
    if split_of is None and not any(
        s == 'train' for s, _, _ in docs
    ):  # only possible with a single, held-out-hashed file
      docs = [('train',) + d[1:] for d in docs]

    sep = bytes([DOC_SEPARATOR])
    # np.frombuffer over immutable bytes gives read-only arrays: the token arrays cannot be modified.
    tokens = {split: np.frombuffer(sep.join(d for s, _, d in docs if s == split), dtype=np.uint8) for split in SPLITS}
    return cls(
        train_tokens=tokens['train'],
        val_tokens=tokens['validation'],
        test_tokens=tokens['test'],
        files=tuple((s, r) for s, r, _ in docs),
        fingerprint=_digest(docs),
        split_fingerprints=tuple((split, _digest([d for d in docs if d[0] == split])) for split in SPLITS),
        source=source,
        max_train_bytes=None if max_train_bytes is None else int(max_train_bytes),
        val_fraction=float(val_fraction),
        test_fraction=float(test_fraction),
        skipped=tuple(skipped),
    )

  # ---------------------------------------------------------------- info
  @property
  def num_files(self) -> int:
    return len(self.files)

  @property
  def num_train_files(self) -> int:
    return sum(1 for s, _ in self.files if s == 'train')

  @property
  def num_val_files(self) -> int:
    return sum(1 for s, _ in self.files if s == 'validation')

  @property
  def num_test_files(self) -> int:
    return sum(1 for s, _ in self.files if s == 'test')

  @property
  def num_test_tokens(self) -> int:
    return int(self.test_tokens.size)

  @property
  def num_train_tokens(self) -> int:
    return int(self.train_tokens.size)

  @property
  def num_val_tokens(self) -> int:
    return int(self.val_tokens.size)

  def split_files(self, split: str) -> tuple[str, ...]:
    self._check_split(split)
    return tuple(r for s, r in self.files if s == split)

  def tokens(self, split: str) -> np.ndarray:
    """The uint8 token array of ``split`` ('train', 'validation' or 'test')."""
    self._check_split(split)
    return {'train': self.train_tokens, 'validation': self.val_tokens, 'test': self.test_tokens}[split]

  def describe(self) -> dict:
    """JSON-friendly summary to record next to results."""
    return {
        'source': self.source,
        'fingerprint': self.fingerprint,
        'vocab_size': self.vocab_size,
        'unit': 'byte (UTF-8); bits per character = bits per byte',
        'num_files': self.num_files,
        'num_train_files': self.num_train_files,
        'num_val_files': self.num_val_files,
        'num_test_files': self.num_test_files,
        'num_train_tokens': self.num_train_tokens,
        'num_val_tokens': self.num_val_tokens,
        'num_test_tokens': self.num_test_tokens,
        'max_train_bytes': self.max_train_bytes,
        'val_fraction': self.val_fraction,
        'test_fraction': self.test_fraction,
        'split_fingerprints': dict(self.split_fingerprints),
        'num_skipped_files': len(self.skipped),
        'skipped_files': [f'{rel}: {why}' for rel, why in self.skipped[:_SKIPPED_RECORDED]],
    }

  # ---------------------------------------------------------------- batches
  def sample_batch(
      self, rng: np.random.Generator, batch_size: int, length: int, split: str = 'train', rows: slice | None = None
  ) -> np.ndarray:
    """Random crops: int32 array (batch_size, length + 1).

    Row ``r`` is ``tokens[s_r : s_r + length + 1]`` with ``s_r`` uniform over all valid starts; use
    ``x[:, :-1]`` as inputs and ``x[:, 1:]`` as next-token targets (both of length ``length``).
    ``rows`` (a slice of ``range(batch_size)``) returns only those rows: the starts of all
    ``batch_size`` rows are drawn first, so they equal the same rows of the whole batch (what one
    process of a multi-process run feeds).
    """
    validation.generator('corpus', rng)
    validation.positive_int('corpus', 'batch_size', batch_size)
    validation.positive_int('corpus', 'length', length)
    toks = self.tokens(split)
    if length + 1 > toks.size:
      raise ValueError(
          f'length={length} needs length + 1 = {length + 1} tokens but the {split} split has ' f'only {toks.size}'
      )
    starts = rng.integers(0, toks.size - length, size=batch_size)
    if rows is not None:
      if not isinstance(rows, slice) or rows.step not in (None, 1):
        raise TypeError(f'rows must be a slice of consecutive rows, got {rows!r}')
      starts = starts[rows]
    return toks[starts[:, None] + np.arange(length + 1)].astype(np.int32)

  def eval_windows(self, length: int, max_windows: int, split: str = 'validation') -> np.ndarray:
    """Deterministic evaluation windows: int32 array (N, length + 1), N = min(max_windows, K).

    Windows start at multiples of ``length`` (``K = (num_tokens - 1) // length`` of them fit), so their
    *targets* (``w[:, 1:]``) are disjoint: neighbouring windows share only a boundary input token and
    every scored token is scored once. When ``max_windows < K``, the N windows are spread evenly over
    the whole split (window indices ``floor(i * K / N)``), not bunched at its start.
    """
    validation.positive_int('corpus', 'length', length)
    validation.positive_int('corpus', 'max_windows', max_windows)
    toks = self.tokens(split)
    k = (toks.size - 1) // length if toks.size > 0 else 0
    if k < 1:
      raise ValueError(
          f'length={length} needs length + 1 = {length + 1} tokens but the {split} split has ' f'only {toks.size}'
      )
    n = min(int(max_windows), k)
    idx = (np.arange(n, dtype=np.int64) * k) // n
    starts = idx * length
    return toks[starts[:, None] + np.arange(length + 1)].astype(np.int32)

  def anchors(self, reach: int, tail: int, count: int, split: str = 'validation') -> np.ndarray:
    """Split positions (int64, increasing) of the last target of each evaluation window, shared by every length.

    The candidates are ``reach, reach + tail, reach + 2 tail, ...`` (``K`` of them fit in the split): a
    window of up to ``reach`` inputs ends at each, and their scored tails of ``tail`` targets are disjoint
    and contiguous. ``min(count, K)`` of them are taken, spread evenly over the split (candidate indices
    ``floor(i * K / N)``), not bunched at its start.
    """
    for name, value in (('reach', reach), ('tail', tail), ('count', count)):
      validation.positive_int('corpus', name, value)
    if tail > reach:
      raise ValueError(f'tail={tail} must be <= reach={reach}: a window scores at most its own targets')
    size = self.tokens(split).size
    k = (size - 1 - reach) // tail + 1 if size - 1 >= reach else 0
    if k < 1:
      raise ValueError(f'a window of {reach} inputs needs {reach + 1} tokens but the {split} split has only {size}')
    n = min(int(count), k)
    return reach + ((np.arange(n, dtype=np.int64) * k) // n) * tail

  def anchored_windows(self, length: int, reach: int, tail: int, count: int, split: str = 'validation') -> np.ndarray:
    """int32 (N, length + 1): the windows of `length` inputs ending at `anchors(reach, tail, count, split)`.

    Window ``i`` is ``tokens[a_i - length : a_i + 1]``; its last ``tail`` targets (``w[:, -tail:]``) are the
    scored ones, the same bytes at every ``length`` in ``[tail, reach]``, each predicted with ``length -
    tail + 1 .. length`` bytes of context.
    """
    validation.positive_int('corpus', 'length', length)
    if not tail <= length <= reach:
      raise ValueError(f'length={length} must be in [tail, reach] = [{tail}, {reach}]')
    starts = self.anchors(reach, tail, count, split) - length
    return self.tokens(split)[starts[:, None] + np.arange(length + 1)].astype(np.int32)

  def scored_set(self, length: int, reach: int, tail: int, count: int, split: str = 'validation') -> dict:
    """What the windows of `length` score: the split, how many targets, and a fingerprint of their split
    positions and bytes, computed from those windows (equal at every length iff they score the same bytes)."""
    windows = self.anchored_windows(length, reach, tail, count, split)
    starts = self.anchors(reach, tail, count, split) - length
    positions = starts[:, None] + length - tail + 1 + np.arange(tail)  # split index of each scored target
    h = hashlib.sha256(f'{split}\x00'.encode('utf-8'))
    h.update(positions.astype(np.int64).tobytes())
    h.update(windows[:, -tail:].astype(np.uint8).tobytes())
    return {'split': split, 'num_scored': int(positions.size), 'fingerprint': h.hexdigest()[:16]}

  def _check_split(self, split: str) -> None:
    if split not in SPLITS:
      raise ValueError(f'split must be one of {SPLITS}, got {split!r}')
