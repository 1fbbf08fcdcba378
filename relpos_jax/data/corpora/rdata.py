"""A small reader of R's serialization format (XDR), enough for an installed package's lazy-load data.

Why: the English corpus (`relpos_jax.data.corpora.austen`) ships as an R package's lazy-load database, and
this reads it with the standard library (gzip, zlib, struct) instead of requiring R.

Formats (R Internals, "Serialization Formats" and "Lazy loading"; R's src/main/serialize.c):

* A serialized object starts with ``X\\n`` (XDR: big-endian), then the format version (2 or 3), the writer's
  R version and the minimum reader version; version 3 adds the native encoding (an int length and its bytes).
* Each item is a 32-bit flags word: SEXP type ``flags & 0xFF``, is-object ``1 << 8``, has-attributes
  ``1 << 9``, has-tag ``1 << 10``, "levels" ``flags >> 12`` (for a CHARSXP its encoding: UTF-8 ``1 << 3``,
  latin-1 ``1 << 2``, ASCII ``1 << 6``). A vector is its int length then its elements; a CHARSXP is its int
  length (-1: NA) then its bytes; a pairlist node is [attributes] [tag] CAR CDR. Symbols and environments
  enter a reference table that REFSXP items (``flags >> 8`` = 1-based index) point back to.
* An ``.rds`` file is one gzip-compressed serialized object. A lazy-load database is ``NAME.rdx`` (an .rds
  holding a list: ``variables`` maps each name to c(offset, length) in ``NAME.rdb``) and ``NAME.rdb``, whose
  entry at (offset, length) is a 4-byte big-endian uncompressed length, then, for ``compressed`` 2 or 3, one
  type byte ('2' bzip2, 'Z' xz, '0' none), then the compressed serialized object (zlib when ``compressed`` is
  TRUE, R's default for LazyData).

Only the types an R package's data uses are read (NULL, symbols, pairlists, logical / integer / double /
character vectors and lists, and references to symbols); anything else raises ``RDataError`` naming the type.
Attributes are returned beside the value (`RObject`) when present.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import lzma
import os
import struct
import zlib

__all__ = ['RDataError', 'RObject', 'Symbol', 'read_rds', 'read_lazyload', 'unserialize']

NILSXP, SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 0, 1, 2, 9, 10, 13, 14, 16, 19
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP = 255, 254, 253, 242, 241
NA_INTEGER = -(2**31)
_UTF8, _LATIN1 = 1 << 3, 1 << 2


class RDataError(ValueError):
  """The bytes are not an R serialization this reader understands (names what it met and where)."""


@dataclasses.dataclass(frozen=True)
class Symbol:
  name: str


@dataclasses.dataclass
class RObject:
  """A value with attributes (``names``, ``class``, ...): ``attributes`` maps tag names to values."""

  value: object
  attributes: dict


class _Reader:

  def __init__(self, data: bytes):
    self.data, self.pos, self.refs = data, 0, []

  def take(self, n: int) -> bytes:
    if n < 0 or self.pos + n > len(self.data):
      raise RDataError(f'truncated R serialization: need {n} bytes at offset {self.pos} of {len(self.data)}')
    out = self.data[self.pos : self.pos + n]
    self.pos += n
    return out

  def int(self) -> int:
    return struct.unpack('>i', self.take(4))[0]

  def length(self) -> int:
    n = self.int()
    if n == -1:  # a long vector: two ints, upper and lower 32 bits
      upper, lower = struct.unpack('>II', self.take(8))
      n = (upper << 32) + lower
    return n

  def item(self):
    flags = self.int()
    kind, has_attr, has_tag = flags & 0xFF, bool(flags & (1 << 9)), bool(flags & (1 << 10))
    if kind in (NILVALUE_SXP, NILSXP):
      return None
    if kind in (GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP):
      return Symbol({GLOBALENV_SXP: '<globalenv>', EMPTYENV_SXP: '<emptyenv>', BASEENV_SXP: '<baseenv>'}[kind])
    if kind == REFSXP:
      index = flags >> 8 or self.int()
      if not 1 <= index <= len(self.refs):
        raise RDataError(f'reference {index} to an unread item (the table holds {len(self.refs)})')
      return self.refs[index - 1]
    if kind == SYMSXP:
      symbol = Symbol(self.item())
      self.refs.append(symbol)
      return symbol
    if kind == CHARSXP:
      n = self.int()
      if n == -1:
        return None  # NA_character_
      raw = self.take(n)
      try:
        return raw.decode('latin-1' if flags >> 12 & _LATIN1 else 'utf-8')
      except UnicodeDecodeError as e:
        raise RDataError(f'a string at offset {self.pos - n} is not UTF-8 ({e.reason} at byte {e.start})') from None
    if kind == LISTSXP:  # a pairlist: attributes, tag, value, then the rest of the list
      out = {}
      while kind == LISTSXP:
        if has_attr:
          self.item()  # a node's own attributes: not used by data
        tag = self.item() if has_tag else None
        key = tag.name if isinstance(tag, Symbol) else len(out)
        out[key] = self.item()
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, bool(flags & (1 << 9)), bool(flags & (1 << 10))
      if kind not in (NILVALUE_SXP, NILSXP):
        raise RDataError(f'a pairlist ends in SEXP type {kind}, not NULL')
      return out
    if kind in (LGLSXP, INTSXP):
      n = self.length()
      values = [
          None if v == NA_INTEGER else (bool(v) if kind == LGLSXP else v)
          for v in struct.unpack(f'>{n}i', self.take(4 * n))
      ]
    elif kind == REALSXP:
      n = self.length()
      values = list(struct.unpack(f'>{n}d', self.take(8 * n)))
    elif kind in (STRSXP, VECSXP):
      values = [self.item() for _ in range(self.length())]
    else:
      raise RDataError(f'SEXP type {kind} at offset {self.pos - 4} is not read (only data vectors and lists)')
    if has_attr:
      return RObject(values, self.item())
    return values


def unserialize(data: bytes):
  """The object serialized in `data` (XDR format, version 2 or 3)."""
  reader = _Reader(data)
  if reader.take(2) != b'X\n':
    raise RDataError(f'not an XDR R serialization (starts with {data[:2]!r}, expected b"X\\n")')
  version = reader.int()
  if version not in (2, 3):
    raise RDataError(f'R serialization format version {version} is not read (2 or 3)')
  reader.int(), reader.int()  # writer's and minimum reader's R versions
  if version == 3:
    reader.take(reader.int())  # native encoding
  return reader.item()


# What the standard library's decompressors raise on damaged or truncated input: gzip (BadGzipFile, an OSError,
# and EOFError), zlib.error, lzma.LZMAError, bz2 (OSError on a bad stream, ValueError or EOFError on a short one).
_DAMAGED = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError)


def read_rds(path: str | os.PathLike):
  """The object in an .rds file (gzip-compressed, or not compressed); RDataError naming the file if damaged."""
  with open(path, 'rb') as f:
    data = f.read()
  try:
    if data[:2] == b'\x1f\x8b':
      try:
        data = gzip.decompress(data)
      except _DAMAGED as e:
        raise RDataError(f'a damaged or truncated gzip stream ({type(e).__name__}: {e})') from None
    return unserialize(data)
  except RDataError as e:
    raise RDataError(f'{os.fspath(path)}: {e}') from None


def _entry(rdb: bytes, offset: int, length: int, compressed) -> bytes:
  chunk = rdb[offset : offset + length]
  if len(chunk) != length or length < 5:
    raise RDataError(f'entry (offset {offset}, length {length}) lies outside the .rdb file of {len(rdb)} bytes')
  size = struct.unpack('>I', chunk[:4])[0]
  body = chunk[4:]
  if compressed in (2, 3):
    kind, body = body[:1], body[1:]
    if kind not in (b'2', b'Z', b'0'):
      raise RDataError(f'unknown compression type byte {kind!r} in an .rdb entry')
    method, decompress = {b'2': ('bzip2', bz2.decompress), b'Z': ('xz', lzma.decompress), b'0': ('none', bytes)}[kind]
  else:
    method, decompress = 'zlib', zlib.decompress
  try:
    out = decompress(body)
  except _DAMAGED as e:
    raise RDataError(f'a damaged or truncated {method} entry ({type(e).__name__}: {e})') from None
  if len(out) != size:
    raise RDataError(f'an .rdb entry decompresses to {len(out)} bytes, its header says {size}')
  return out


def read_lazyload(base: str | os.PathLike) -> dict:
  """Every variable of the lazy-load database `base` (`base`.rdx and `base`.rdb), by name."""
  index = read_rds(f'{os.fspath(base)}.rdx')
  if not isinstance(index, RObject) or 'variables' not in _named(index):
    raise RDataError(f'{base}.rdx is not a lazy-load index (no "variables" entry)')
  named = _named(index)
  compressed = named.get('compressed', [True])
  compressed = compressed[0] if isinstance(compressed, list) and compressed else compressed
  with open(f'{os.fspath(base)}.rdb', 'rb') as f:
    rdb = f.read()
  variables = _named(named['variables'])
  out = {}
  for name, pos in variables.items():
    try:
      out[name] = unserialize(_entry(rdb, int(pos[0]), int(pos[1]), compressed))
    except RDataError as e:
      raise RDataError(f'{os.fspath(base)}.rdb, entry {name!r}: {e}') from None
  return out


def _named(obj) -> dict:
  """A named R list (an RObject with a `names` attribute) as a dict."""
  if not isinstance(obj, RObject) or 'names' not in obj.attributes:
    raise RDataError(f'expected a named list, got {type(obj).__name__}')
  return dict(zip(obj.attributes['names'], obj.value))
