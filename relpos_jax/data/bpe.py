"""Subword tokens: a byte-level BPE tokenizer trained on a corpus's training split, and bits per character.

Why: a byte-level model spends its context on characters; whether the encoders' ranking holds when a position
is a subword (the usual setting of the papers) needs the same text tokenized by BPE, scored on the same scale.

Tokenizer
---------
Byte-level BPE (Sennrich et al. 2016, "Neural Machine Translation of Rare Words with Subword Units"; the
byte-level variant of GPT-2, Radford et al. 2019) built with Hugging Face ``tokenizers``: the GPT-2 regex
splits a document into words, each word's UTF-8 bytes start as 256 single-byte symbols (all of them in the
vocabulary, so every text encodes and decodes back exactly), and ``BpeTrainer`` adds merges of the most
frequent adjacent pair (pairs seen fewer than ``min_frequency`` = 2 times are never merged) until
``vocab_size`` symbols exist. Training reads **only the training split's documents** (`training_documents`):
no validation or test text reaches the merges. Training is deterministic (same text, same tokenizer JSON).

A split is tokenized document by document (merges never cross a document boundary) and the documents are joined
by the token of the NUL byte, as the byte corpus joins them by NUL: one token, one character, in both.

``fingerprint`` digests the tokenizer's JSON (vocabulary and merges); ``describe()`` records it with the
vocabulary size, ``min_frequency`` and the fingerprint of the training split it was trained on. A cache
(`load_or_train`) keeps a trained tokenizer in one JSON file named by that split fingerprint and the
vocabulary size, and refuses a file trained on other text.

Bits per character
------------------
Every metric is **total bits over total characters** of the scored text, whatever the token: a token's
characters are the UTF-8 code points that *start* in its bytes (a byte that is not a continuation byte
``10xxxxxx``), so characters add up exactly over any cut of the text into tokens, bytes included
(`BYTE_CHARS`), and a byte-level and a BPE model of one text are compared on one scale
(`bits_per_character`). With ASCII text a character is a byte.

Scored set in characters (the same-targets protocol with tokens)
--------------------------------------------------------------
The byte corpus scores, at every length, the bytes ``(a - tail, a]`` before common anchors ``a``
(`relpos_jax.data.corpus.Corpus.anchors`). With tokens the scored text is defined in the same **bytes**, and
a token is scored iff its first byte lies in ``(a - tail, a]`` (anchors from `anchors`, which counts a
window's reach in tokens): which tokens and characters are scored depends on
the split's tokenization only, never on the window length; the window of ``length`` tokens ends at the last
scored token (`scored_windows`), and `scored_set` fingerprints the scored tokens' byte spans and bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile

import numpy as np

from relpos_jax import validation

INSTALL = 'pip install tokenizers'  # or: pip install relpos_jax[bpe]
MIN_FREQUENCY = 2
CACHE_FORMAT = 1
SEPARATOR_BYTE = 0

# Characters per byte token: 1 for a byte that starts a UTF-8 code point, 0 for a continuation byte (10xxxxxx).
BYTE_CHARS = np.array([0 if (b & 0xC0) == 0x80 else 1 for b in range(256)], np.int64)

__all__ = [
    'BPE',
    'BYTE_CHARS',
    'bits_per_character',
    'count_characters',
    'anchors',
    'document_ids',
    'document_totals',
    'load_or_train',
    'scored_ranges',
    'scored_set',
    'scored_windows',
    'train',
    'training_documents',
]


def require_tokenizers():
  """The tokenizers module, or an ImportError saying how to install it (the one place it is imported)."""
  try:
    import tokenizers
  except ImportError:
    raise ImportError(f'BPE tokens need the package tokenizers: install it with `{INSTALL}`') from None
  return tokenizers


def bytes_to_unicode() -> dict[int, str]:
  """GPT-2's map from each byte to the printable character byte-level BPE writes it as (openai/gpt-2,
  src/encoder.py, `bytes_to_unicode`; the `tokenizers` ByteLevel pre-tokenizer uses the same)."""
  keep = list(range(ord('!'), ord('~') + 1)) + list(range(ord('¡'), ord('¬') + 1)) + list(range(ord('®'), ord('ÿ') + 1))
  out, extra = {}, 0
  for b in range(256):
    if b in keep:
      out[b] = chr(b)
    else:
      out[b] = chr(256 + extra)
      extra += 1
  return out


_UNICODE_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}


def count_characters(data) -> int:
  """UTF-8 code points in `data` (bytes or a uint8 array), each counted at its first byte."""
  array = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray)) else np.asarray(data, np.uint8)
  return int(BYTE_CHARS[array].sum())


def training_documents(corpus) -> list[bytes]:
  """The documents BPE is trained on: the training split's, and no other (split at the NUL separators)."""
  return [d for d in bytes(corpus.tokens('train')).split(bytes([SEPARATOR_BYTE])) if d]


@dataclasses.dataclass(frozen=True, eq=False)
class BPE:
  """A trained byte-level BPE tokenizer: ids, per-token bytes and characters, fingerprints (module docstring)."""

  tokenizer: object  # tokenizers.Tokenizer
  train_fingerprint: str
  min_frequency: int = MIN_FREQUENCY

  def __post_init__(self):
    vocab = self.tokenizer.get_vocab()
    token_bytes = [b''] * len(vocab)
    for token, i in vocab.items():
      token_bytes[i] = bytes(_UNICODE_TO_BYTE[c] for c in token)
    object.__setattr__(self, 'token_bytes', tuple(token_bytes))
    object.__setattr__(self, 'token_chars', np.array([count_characters(t) for t in token_bytes], np.int64))
    object.__setattr__(self, 'token_lengths', np.array([len(t) for t in token_bytes], np.int64))
    object.__setattr__(self, 'separator_id', vocab[bytes_to_unicode()[SEPARATOR_BYTE]])

  @property
  def vocab_size(self) -> int:
    return len(self.token_bytes)

  @property
  def fingerprint(self) -> str:
    return hashlib.sha256(self.tokenizer.to_str().encode('utf-8')).hexdigest()[:16]

  def describe(self) -> dict:
    """What data.json records: the tokenizer, its vocabulary size, and the training text it was fit on."""
    return {
        'tokenizer': 'byte-level BPE (Hugging Face tokenizers, GPT-2 pre-tokenization)',
        'vocab_size': self.vocab_size,
        'min_frequency': self.min_frequency,
        'fingerprint': self.fingerprint,
        'train_fingerprint': self.train_fingerprint,
        'unit': 'metrics are bits per character: total bits / total UTF-8 code points of the scored text',
    }

  def encode(self, document: bytes) -> np.ndarray:
    """int32 ids of one document (no NUL inside); decoding them gives the document back, byte for byte."""
    ids = np.asarray(self.tokenizer.encode(document.decode('utf-8')).ids, np.int32)
    if b''.join(self.token_bytes[i] for i in ids) != document:
      raise ValueError('the tokenizer does not give the document back byte for byte (not a byte-level BPE)')
    return ids

  def encode_split(self, corpus, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids, starts): the split's documents encoded one by one and joined by the NUL token, and each token's
    first byte in the split's byte array (`corpus.tokens(split)`), so ``starts[i] + token_lengths[ids[i]]``
    ends it."""
    documents = bytes(corpus.tokens(split)).split(bytes([SEPARATOR_BYTE]))
    parts = []
    for k, document in enumerate(documents):
      if k:
        parts.append(np.array([self.separator_id], np.int32))
      parts.append(self.encode(document) if document else np.zeros(0, np.int32))
    ids = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    lengths = self.token_lengths[ids]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return ids, starts

  def to_json(self) -> str:
    return json.dumps(
        {
            'format': CACHE_FORMAT,
            'train_fingerprint': self.train_fingerprint,
            'vocab_size': self.vocab_size,
            'min_frequency': self.min_frequency,
            'fingerprint': self.fingerprint,
            'tokenizer': self.tokenizer.to_str(),
        }
    )


def train(corpus, vocab_size: int, min_frequency: int = MIN_FREQUENCY) -> BPE:
  """Byte-level BPE of `vocab_size` symbols trained on `training_documents(corpus)` only.

  ValueError naming `vocab_size` when it is below the 256 byte symbols, or larger than the training text
  supports (training stopped with fewer symbols: no pair left that occurs `min_frequency` times).
  """
  tokenizers = require_tokenizers()
  validation.positive_int('bpe', 'vocab_size', vocab_size)
  validation.positive_int('bpe', 'min_frequency', min_frequency)
  if vocab_size < 256:
    raise ValueError(f'vocab_size={vocab_size} is invalid: byte-level BPE starts from the 256 bytes; allowed: >= 256')
  documents = training_documents(corpus)
  tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
  tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
  tokenizer.decoder = tokenizers.decoders.ByteLevel()
  trainer = tokenizers.trainers.BpeTrainer(
      vocab_size=int(vocab_size),
      min_frequency=int(min_frequency),
      initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
      show_progress=False,
      special_tokens=[],
  )
  tokenizer.train_from_iterator((d.decode('utf-8') for d in documents), trainer=trainer)
  reached = tokenizer.get_vocab_size()
  if reached < vocab_size:
    raise ValueError(
        f'vocab_size={vocab_size} is larger than the training text supports: its {len(documents)} training '
        f'document(s) ({sum(map(len, documents))} bytes) give {reached} symbols (256 bytes and every merge of a pair '
        f'seen >= {min_frequency} times); allowed: vocab_size <= {reached} for this corpus'
    )
  return BPE(tokenizer, corpus.describe()['split_fingerprints']['train'], int(min_frequency))


def cache_path(cache: str | os.PathLike, corpus, vocab_size: int) -> str:
  """The cache file: `cache` itself when it names a .json file, else a file in the directory `cache`."""
  cache = os.path.expanduser(os.fspath(cache))
  if cache.endswith('.json'):
    return cache
  train_fingerprint = corpus.describe()['split_fingerprints']['train']
  return os.path.join(cache, f'bpe-{train_fingerprint}-{int(vocab_size)}.json')


def check_writable(path: str) -> None:
  """ValueError (naming the cache) unless the cache file `path` can be written: its nearest existing ancestor
  directory takes a file (probed with a temporary file, removed). Nothing is created: a refused run leaves no
  directory behind."""
  existing = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  allowed = 'allowed: a writable directory, or a .json file path in one'
  if not os.path.isdir(existing):
    raise ValueError(f'tokenizer cache {path!r} cannot be written: {existing} is a file, not a directory; {allowed}')
  try:
    fd, probe = tempfile.mkstemp(dir=existing, prefix='.bpe-', suffix='.probe')
  except OSError as e:
    raise ValueError(f'tokenizer cache {path!r} cannot be written: {existing}: {e.strerror}; {allowed}') from None
  os.close(fd)
  os.remove(probe)


def load_or_train(corpus, vocab_size: int, cache: str | os.PathLike, min_frequency: int = MIN_FREQUENCY) -> BPE:
  """The tokenizer of `corpus`'s training split from the cache `cache` (a directory or a .json file), trained and
  written there (atomically, after every check) when absent.

  ValueError naming the key when the cached file was trained on other text (its train fingerprint differs from
  the corpus's), for another `vocab_size` or `min_frequency`, or no longer matches its own fingerprint.
  """
  tokenizers = require_tokenizers()
  path = cache_path(cache, corpus, vocab_size)
  train_fingerprint = corpus.describe()['split_fingerprints']['train']
  if os.path.exists(path):
    try:
      with open(path) as f:
        stored = json.load(f)
      tokenizer = tokenizers.Tokenizer.from_str(stored['tokenizer'])
    except Exception as e:  # OSError, bad JSON, a missing key, or tokenizers' own exception for a bad tokenizer
      raise ValueError(
          f'tokenizer cache {path!r} cannot be read ({type(e).__name__}: {e}); delete it to retrain'
      ) from None
    expected = {'train_fingerprint': train_fingerprint, 'vocab_size': int(vocab_size), 'min_frequency': min_frequency}
    for key, value in expected.items():
      if stored.get(key) != value:
        raise ValueError(
            f'tokenizer cache {path!r} is invalid: it was built with {key}={stored.get(key)!r}, this run needs '
            f'{key}={value!r} (a tokenizer from other text or settings); delete it or name another cache'
        )
    bpe = BPE(tokenizer, train_fingerprint, int(min_frequency))
    if bpe.fingerprint != stored.get('fingerprint'):
      raise ValueError(
          f'tokenizer cache {path!r} is invalid: its tokenizer digests to fingerprint={bpe.fingerprint}, the file '
          f'records {stored.get("fingerprint")!r} (edited or corrupt); delete it to retrain'
      )
    return bpe
  check_writable(path)  # before training: a cache that cannot take the file failed only once the tokenizer had trained
  bpe = train(corpus, vocab_size, min_frequency)
  directory = os.path.dirname(path) or os.curdir
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, prefix='.bpe-', suffix='.tmp')
  with os.fdopen(fd, 'w') as f:
    f.write(bpe.to_json())
  os.replace(tmp, path)
  return bpe


# ---------------------------------------------------------------- bits per character
def bits_per_character(logprobs_nats, targets, chars_per_token, mask=None) -> dict:
  """Total bits of the scored targets over their total characters.

  `logprobs_nats`: log p(target) of each target (natural log), `targets`: the target ids, `chars_per_token`:
  characters of each id (`BPE.token_chars`, or `BYTE_CHARS` for bytes), `mask`: 1 where a target is scored.
  Returns {'bits', 'characters', 'tokens', 'bits_per_character', 'bits_per_token'}.
  """
  logprobs = np.asarray(logprobs_nats, np.float64)
  targets = np.asarray(targets)
  mask = np.ones(logprobs.shape) if mask is None else np.asarray(mask, np.float64)
  if not logprobs.shape == targets.shape == mask.shape:
    raise ValueError(f'logprobs, targets and mask need one shape, got {logprobs.shape}, {targets.shape}, {mask.shape}')
  bits = float(-(mask * logprobs).sum() / math.log(2.0))
  characters = float((mask * characters_of(targets, chars_per_token, mask != 0)).sum())
  tokens = float(mask.sum())
  return {
      'bits': bits,
      'characters': characters,
      'tokens': tokens,
      'bits_per_character': bits / characters if characters else None,
      'bits_per_token': bits / tokens if tokens else None,
  }


def characters_of(targets, chars_per_token, scored) -> np.ndarray:
  """The characters of each target id (`chars_per_token[id]`; 0 where not `scored`). A scored id outside the
  vocabulary is refused (ValueError naming it): numpy would read id -1 as the last token's characters."""
  table, targets = np.asarray(chars_per_token), np.asarray(targets)
  scored = np.broadcast_to(np.asarray(scored, bool), targets.shape)
  if targets.size and not np.issubdtype(targets.dtype, np.integer):
    raise ValueError(f'targets of dtype {targets.dtype} are invalid: allowed: integer token ids.')
  bad = scored & ((targets < 0) | (targets >= len(table)))
  if bad.any():
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    raise ValueError(
        f'target id {int(targets[where])} at index {where} is invalid: allowed: 0..{len(table) - 1}, the ids of '
        'chars_per_token.'
    )
  return np.where(scored, table[np.where(scored, targets, 0)], 0)


def document_ids(split_tokens, positions) -> np.ndarray:
  """int64: the document (0, 1, ... in split order) of each byte position of a split (`corpus.tokens(split)`),
  a NUL separator counting as the end of the document before it; for BPE targets, pass their first bytes."""
  separators = np.flatnonzero(np.asarray(split_tokens) == SEPARATOR_BYTE)
  return np.searchsorted(separators, np.asarray(positions, np.int64), side='left').astype(np.int64)


def document_totals(bits, targets, chars_per_token, document_ids, num_documents: int) -> tuple[np.ndarray, np.ndarray]:
  """(bits, characters) per document: the scored targets' bits and characters summed by `document_ids` (one
  per target; -1 for an unscored one), the input of `relpos_jax.study.stats.document_bootstrap`."""
  document_ids = np.asarray(document_ids).reshape(-1)
  keep = document_ids >= 0
  chars = characters_of(np.asarray(targets).reshape(-1), chars_per_token, keep)
  out_bits = np.bincount(document_ids[keep], np.asarray(bits, np.float64).reshape(-1)[keep], minlength=num_documents)
  out_chars = np.bincount(document_ids[keep], chars[keep].astype(np.float64), minlength=num_documents)
  return out_bits, out_chars


# ---------------------------------------------------------------- the scored set in characters
def anchors(starts: np.ndarray, num_bytes: int, reach: int, tail: int, count: int) -> np.ndarray:
  """Byte anchors (int64, increasing) for windows of up to `reach` tokens scoring `tail` bytes each: as
  `Corpus.anchors` (candidates `tail` bytes apart, `count` of them spread evenly over the split), but starting
  where `reach` tokens precede the first scored token, since a window's reach is counted in tokens."""
  for name, value in (('reach', reach), ('tail', tail), ('count', count)):
    validation.positive_int('bpe', name, value)
  starts = np.asarray(starts, np.int64)
  if reach >= starts.size:
    raise ValueError(f'reach={reach} tokens needs more than {reach} tokens, but the split has {starts.size}')
  first = int(starts[reach]) + tail - 1  # its scored bytes (first - tail, first] start at token `reach`
  k = (int(num_bytes) - 1 - first) // tail + 1 if num_bytes - 1 >= first else 0
  if k < 1:
    raise ValueError(f"reach={reach} tokens and tail={tail} bytes need more than the split's {num_bytes} bytes")
  n = min(int(count), k)
  return first + ((np.arange(n, dtype=np.int64) * k) // n) * tail


def scored_ranges(starts: np.ndarray, anchors: np.ndarray, tail: int) -> np.ndarray:
  """int64 (N, 2): for each byte anchor ``a``, the token range [first, last] of the tokens whose first byte
  lies in ``(a - tail, a]`` (`starts`: each token's first byte, increasing). A range with no token is refused
  (the tail is shorter than a token there)."""
  starts = np.asarray(starts, np.int64)
  anchors = np.asarray(anchors, np.int64)
  first = np.searchsorted(starts, anchors - tail + 1, side='left')
  last = np.searchsorted(starts, anchors, side='right') - 1
  if np.any(last < first):
    raise ValueError(f'tail={tail} bytes holds no token start before some anchors; use a longer tail')
  if np.any(first < 1):
    raise ValueError('the first token of a split has no input before it: anchors must leave tail + 1 bytes')
  return np.stack([first, last], axis=1)


def scored_windows(ids: np.ndarray, ranges: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
  """(windows int32 (N, length + 1), loss_mask float32 (N, length)): the window of `length` input tokens that
  ends with each range's last token as its last target, scoring exactly the range's tokens (the same tokens,
  and so the same characters, at every length)."""
  validation.positive_int('bpe', 'length', length)
  ids = np.asarray(ids, np.int32)
  first, last = ranges[:, 0], ranges[:, 1]
  widest = int((last - first + 1).max())
  if widest > length:
    raise ValueError(f'length={length} tokens cannot score a range of {widest} tokens; allowed: length >= {widest}')
  if int((last - length).min()) < 0:
    raise ValueError(f'length={length} tokens reaches before the start of the split; anchors(reach >= {length})')
  starts = last - length
  windows = ids[starts[:, None] + np.arange(length + 1)]
  target_index = starts[:, None] + 1 + np.arange(length)  # split index of each target
  mask = ((target_index >= first[:, None]) & (target_index <= last[:, None])).astype(np.float32)
  return windows, mask


def scored_set(bpe: BPE, ids: np.ndarray, starts: np.ndarray, ranges: np.ndarray, split: str) -> dict:
  """What the windows score: the split, tokens and characters, and a fingerprint of the scored byte spans and
  their bytes (computed from the ranges, which no window length changes)."""
  h = hashlib.sha256(f'{split}\x00'.encode('utf-8'))
  tokens = characters = 0
  for first, last in ranges:
    span = (int(starts[first]), int(starts[last] + bpe.token_lengths[ids[last]]))
    h.update(np.array(span, np.int64).tobytes())
    h.update(b''.join(bpe.token_bytes[i] for i in ids[first : last + 1]))
    tokens += int(last - first + 1)
    characters += int(bpe.token_chars[ids[first : last + 1]].sum())
  return {'split': split, 'num_scored': tokens, 'num_characters': characters, 'fingerprint': h.hexdigest()[:16]}
