"""Jane Austen's six novels as an English-prose corpus, read offline from the R package janeaustenr.

Why this text: the language-model study was measured on Python source only; these novels are natural
language (public domain, Project Gutenberg texts as Julia Silge's CRAN package ``janeaustenr`` 1.0.0 ships
them), reachable from Debian's registry without a network at run time:

    apt-get install --no-install-recommends r-cran-janeaustenr

installs them at ``/usr/lib/R/site-library/janeaustenr`` (R comes with it, and is never run: the data is
read by `relpos_jax.data.corpora.rdata`). Without R, ``apt-get download r-cran-janeaustenr && dpkg-deb -x
r-cran-janeaustenr_*.deb DIR`` unpacks the same files under ``DIR/usr/lib/R/site-library/janeaustenr``;
name that directory as ``austen:DIR/usr/lib/R/site-library/janeaustenr``.

Documents and splits
--------------------
Each novel is a character vector of its text lines; a document is one **chapter**: the lines from a chapter
heading (``CHAPTER I``, ``Chapter 1``, ...) to the next, joined with ``\\n``. A volume heading (Emma's
``VOLUME II``) opens the chapter that follows it, and a novel's front matter (title, author, Northanger
Abbey's advertisement) opens its first chapter, so no line of text is dropped (only the blank lines at a chapter's two ends). Documents are named
``<novel>/<chapter number, 2 digits>`` (numbering runs through the volumes) and visited in a fixed novel
order (`NOVELS`: the held-out novels first, so a training cap cuts training text only).

The split is **by novel**, a whole work held out each way (not by the path hash of the other corpora, which
would leak a novel's characters and plot from train into test): ``emma`` (55 chapters, 882,809 bytes) is the
test split, ``persuasion`` (24 chapters, 466,761 bytes) the validation split, and the other four novels
(190 chapters, 2,674,366 bytes) train (the bytes of the documents, before the NUL separators). Emma is the test novel because it has the most chapters (the study asks
for >= 50 test documents). Every text is ASCII but one pound sign (Mansfield Park), so bits per byte and
bits per character differ by one byte in 2.7 million.

The corpus is a `relpos_jax.data.Corpus` like the others: byte tokens, documents joined by NUL, the same
fingerprints (over split, document name, size and bytes), so `describe()` (data.json) records which text a
run saw.
"""

from __future__ import annotations

import os
import re

from relpos_jax.data.corpora import rdata

NAME = 'austen'
DEFAULT_PATH = '/usr/lib/R/site-library/janeaustenr'
INSTALL = 'apt-get install --no-install-recommends r-cran-janeaustenr'
# The order documents are visited in, and each novel's split.
# Test and validation come first, so that a cap on the training bytes (`max_train_bytes`, which stops the scan
# when the training split is full) never drops held-out text.
NOVELS = ('emma', 'persuasion', 'sensesensibility', 'prideprejudice', 'mansfieldpark', 'northangerabbey')
SPLIT_OF_NOVEL = {'emma': 'test', 'persuasion': 'validation'}
DESCRIPTION = "Jane Austen's six novels (R package janeaustenr 1.0.0), a chapter per document"
SPLIT_RULE = 'split by novel: test emma, validation persuasion, train the other four'
_CHAPTER = re.compile(r'^\s*chapter\s+([0-9]+|[ivxlc]+)\s*\.?\s*$', re.IGNORECASE)
_VOLUME = re.compile(r'^\s*volume\s+([0-9]+|[ivxlc]+)\s*\.?\s*$', re.IGNORECASE)

__all__ = ['NAME', 'DEFAULT_PATH', 'INSTALL', 'NOVELS', 'SPLIT_OF_NOVEL', 'check', 'chapters', 'documents', 'split_of']


def _data_base(path: str) -> str:
  return os.path.join(path, 'data', 'Rdata')


def check(path: str | None = None) -> str:
  """The package directory to read (`path`, default `DEFAULT_PATH`, `~` expanded); ValueError with the install
  command when its lazy-load data (data/Rdata.rdx and .rdb) is not there."""
  path = os.path.expanduser(path or DEFAULT_PATH)
  base = _data_base(path)
  if not (os.path.isfile(base + '.rdx') and os.path.isfile(base + '.rdb')):
    raise ValueError(
        f'the corpus {NAME!r} needs the Debian package r-cran-janeaustenr, not found at {path!r} (no '
        f'data/Rdata.rdx and data/Rdata.rdb there). Install it with `{INSTALL}`, or name an unpacked copy as '
        f"'{NAME}:/path/to/janeaustenr'."
    )
  return path


def chapters(lines) -> list[str]:
  """A novel's lines cut into chapters (module docstring): a list of texts, in order."""
  lines = ['' if line is None else str(line) for line in lines]
  starts = []
  for i, line in enumerate(lines):
    if _CHAPTER.match(line):
      start = i
      # A volume heading just before (blank lines between) opens this chapter.
      j = i - 1
      while j >= 0 and not lines[j].strip():
        j -= 1
      if j >= 0 and _VOLUME.match(lines[j]) and (not starts or j > starts[-1]):
        start = j
      starts.append(start)
  if not starts:
    raise ValueError('no chapter heading found (expected lines such as "CHAPTER I" or "Chapter 1")')
  starts[0] = 0  # front matter opens the first chapter
  bounds = starts + [len(lines)]
  return ['\n'.join(lines[a:b]).strip('\n') for a, b in zip(bounds[:-1], bounds[1:])]


def documents(path: str | None = None) -> list[tuple[str, bytes]]:
  """(name, UTF-8 bytes) of every chapter of the six novels, in `NOVELS` order."""
  path = check(path)
  try:
    novels = rdata.read_lazyload(_data_base(path))
  except (OSError, rdata.RDataError) as e:
    raise ValueError(f'cannot read the janeaustenr data under {path!r}: {e}') from None
  missing = [n for n in NOVELS if n not in novels]
  if missing:
    raise ValueError(f'the janeaustenr data under {path!r} lacks {missing} (it holds {sorted(novels)})')
  out = []
  for novel in NOVELS:
    for k, text in enumerate(chapters(novels[novel]), start=1):
      out.append((f'{novel}/{k:02d}', text.encode('utf-8')))
  return out


def split_of(name: str) -> str:
  """'train', 'validation' or 'test' of the document `name` ('<novel>/<chapter>'): its novel's split."""
  return SPLIT_OF_NOVEL.get(name.split('/', 1)[0], 'train')
