"""Fashion-MNIST from its standard IDX files, and the resolution study's three test protocols for it.

    data = load_fashion_mnist('/usr/share/datasets/fashion-mnist')   # the Debian package's directory
    data['train'].images   # uint8[55000, 28, 28]; validation 5000 carved from the train file; test 10000
    task = FashionMnist(data, protocol='canvas')    # a grid task (relpos_jax.data.grid_tasks interface)
    task.batch(side=56, batch_size=32, seed=0, split='test', step=0)['images']   # float32[32, 56, 56, 1]

The files: `apt-get install -y dataset-fashion-mnist` installs train-images-idx3-ubyte.gz,
train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz in
/usr/share/datasets/fashion-mnist (Xiao et al. 2017, zalandoresearch/fashion-mnist; the same names and format as
MNIST). Uncompressed copies (no .gz) are read as well.

The IDX format (LeCun et al., http://yann.lecun.com/exdb/mnist/, "FILE FORMATS FOR THE MNIST DATABASE"): a magic
number of 4 bytes, 0x00 0x00, a type code (0x08 unsigned byte, 0x09 signed byte, 0x0B short, 0x0C int,
0x0D float, 0x0E double) and the number of dimensions; then each dimension's size as a big-endian int32; then
the data, big-endian, in C order. Parsed here with numpy only.

Splits: 'train' and 'validation' are carved from the train file by one fixed permutation (seed VALIDATION_SEED,
the same for every study seed), the first `num_validation` (5,000) images of it validating; 'test' is the
test file (10,000).

Protocols (the 28 x 28 image at a grid side S, as `FashionMnist.batch(side=S)` returns it):
  canvas     the image placed on a blank S x S canvas (S >= 28) at a position drawn per (seed, split, index):
             the object keeps its scale and only the grid grows around it (pure extrapolation: the positions
             the model has not seen, with nothing new to resolve).
  upsample   the image upsampled by the integer factor S / 28 (S a multiple of 28), each pixel repeated
             (nearest neighbour): the same content on a finer grid (a change of scale). A larger grid also changes
             what each patch contains (a patch of 4 pixels covers 1 / (S / 28)^2 of the stroke it covered at 28),
             so a fall with S confounds position with patch content.
  tiles      the S x S canvas (S a multiple of 28) tiled with (S / 28)^2 images of the example's class: the
             example's own image in the top-left tile, the others drawn from the same split's images of that class
             per (seed, split, side, index). Each patch shows what it showed at 28 (one object at its scale, the
             same statistics), there are only more of them, and no blank tokens dilute the pool: a fall with S
             measures how the model handles the larger grid of positions, not new content (issue 49, item 4).
At S = 28 all three are the image itself. With patch_size p (default 4) a model sees (S / p)^2 tokens: S = 28, 56,
84, 112 are 7, 14, 21, 28 tokens per side.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import os
import zlib
from typing import ClassVar

import numpy as np

from relpos_jax.data import grid_tasks

INSTALL_COMMAND = 'apt-get install -y dataset-fashion-mnist'
DEFAULT_DIRECTORY = '/usr/share/datasets/fashion-mnist'
FILES = {
    'train_images': 'train-images-idx3-ubyte',
    'train_labels': 'train-labels-idx1-ubyte',
    'test_images': 't10k-images-idx3-ubyte',
    'test_labels': 't10k-labels-idx1-ubyte',
}
CLASS_NAMES = ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot')
IMAGE_SIDE = 28
VALIDATION_SEED = 20170825  # Fashion-MNIST's release date: one fixed carve of the train file.
PROTOCOLS = ('canvas', 'upsample', 'tiles')
# Protocols whose side must be a whole number of images.
WHOLE_IMAGE_PROTOCOLS = ('upsample', 'tiles')

# IDX type code -> big-endian numpy dtype.
_DTYPES = {0x08: '>u1', 0x09: '>i1', 0x0B: '>i2', 0x0C: '>i4', 0x0D: '>f4', 0x0E: '>f8'}


class IdxError(ValueError):
  """A missing, malformed or truncated IDX file; the message names the path."""


def _read_bytes(path: str) -> bytes:
  try:
    with open(path, 'rb') as f:
      raw = f.read()
  except OSError as e:
    raise IdxError(f'cannot read IDX file {path}: {e.strerror}.') from None
  if raw[:2] == b'\x1f\x8b':  # gzip's magic
    try:
      return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
      raise IdxError(f'{path} is a damaged or truncated gzip file: {e}.') from None
  return raw


def parse_idx(raw: bytes, path: str = '<bytes>') -> np.ndarray:
  """The array an IDX byte string holds (native byte order); IdxError naming `path` when it is malformed."""
  if len(raw) < 4:
    raise IdxError(f'{path} is not an IDX file: {len(raw)} bytes, shorter than the 4-byte magic number.')
  zero, type_code, ndim = raw[:2], raw[2], raw[3]
  if zero != b'\x00\x00' or type_code not in _DTYPES:
    raise IdxError(
        f'{path} has a bad IDX magic number 0x{raw[:4].hex()}: allowed: 0x0000 then a type code in '
        f'{{{", ".join(f"0x{c:02x}" for c in _DTYPES)}}} then the number of dimensions.'
    )
  header = 4 + 4 * ndim
  if len(raw) < header:
    raise IdxError(
        f'{path} is truncated: its header needs {header} bytes for {ndim} dimensions, the file has {len(raw)}.'
    )
  shape = tuple(int(d) for d in np.frombuffer(raw, '>u4', count=ndim, offset=4))
  dtype = np.dtype(_DTYPES[type_code])
  expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  if len(raw) - header < expected:
    raise IdxError(
        f'{path} is truncated: shape {shape} of {dtype.name} needs {expected} data bytes, the file has '
        f'{len(raw) - header}.'
    )
  if len(raw) - header > expected:
    raise IdxError(f'{path} has {len(raw) - header - expected} bytes after the {expected} its header {shape} declares.')
  return (
      np.frombuffer(raw, dtype, count=expected // dtype.itemsize, offset=header)
      .reshape(shape)
      .astype(dtype.newbyteorder('='))
  )


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """The array of the IDX file at `path` (gzip-compressed or not)."""
  path = os.fspath(path)
  return parse_idx(_read_bytes(path), path)


def _find(directory: str, stem: str) -> str:
  for name in (stem + '.gz', stem):
    path = os.path.join(directory, name)
    if os.path.isfile(path):
      return path
  raise IdxError(
      f'{os.path.join(directory, stem)}(.gz) is missing: the Fashion-MNIST directory needs '
      f'{", ".join(FILES.values())} (each .gz or not). Install them with `{INSTALL_COMMAND}` (into '
      f'{DEFAULT_DIRECTORY}) or pass the directory that holds them.'
  )


@dataclasses.dataclass(frozen=True)
class Split:
  images: np.ndarray  # uint8[N, 28, 28]
  labels: np.ndarray  # int32[N]

  def __len__(self) -> int:
    return len(self.labels)


def load_fashion_mnist(
    directory: str | os.PathLike = DEFAULT_DIRECTORY, num_validation: int = 5000
) -> dict[str, Split]:
  """{'train', 'validation', 'test'} Splits from the four IDX files in `directory` (module docstring)."""
  directory = os.fspath(directory)
  if not os.path.isdir(directory):
    raise IdxError(
        f'Fashion-MNIST directory {directory} does not exist. Install the files with `{INSTALL_COMMAND}` '
        f'(into {DEFAULT_DIRECTORY}) or pass the directory that holds {", ".join(FILES.values())}.'
    )
  arrays = {key: read_idx(_find(directory, stem)) for key, stem in FILES.items()}
  for part in ('train', 'test'):
    images, labels = arrays[f'{part}_images'], arrays[f'{part}_labels']
    where = os.path.join(directory, FILES[f'{part}_images'])
    if images.ndim != 3 or images.shape[1:] != (IMAGE_SIDE, IMAGE_SIDE) or images.dtype != np.uint8:
      raise IdxError(f'{where}: expected uint8 images of shape (N, 28, 28), got {images.dtype} {images.shape}.')
    if not len(images):  # every split is read by index modulo its size: an empty one has nothing to read
      raise IdxError(f'{where}: holds no images (shape {images.shape}); allowed: at least one.')
    if labels.dtype.kind not in 'iu':  # a float label would be truncated to a class silently
      raise IdxError(
          f'{os.path.join(directory, FILES[f"{part}_labels"])}: labels of type {labels.dtype} are invalid; allowed: '
          'an integer IDX type (0x08 unsigned byte in the Fashion-MNIST files).'
      )
    if labels.shape != (len(images),) or labels.min() < 0 or labels.max() >= len(CLASS_NAMES):
      raise IdxError(
          f'{os.path.join(directory, FILES[f"{part}_labels"])}: expected {len(images)} labels in 0..9 (one per '
          f'image), got shape {labels.shape}.'
      )
  n_train = len(arrays['train_labels'])
  if isinstance(num_validation, bool) or not isinstance(num_validation, int) or not 0 < num_validation < n_train:
    raise ValueError(f'num_validation={num_validation!r} is invalid: allowed: an int in [1, {n_train - 1}].')
  order = np.random.default_rng(VALIDATION_SEED).permutation(n_train)
  val, train = np.sort(order[:num_validation]), np.sort(order[num_validation:])
  images, labels = arrays['train_images'], arrays['train_labels'].astype(np.int32)
  return {
      'train': Split(images[train], labels[train]),
      'validation': Split(images[val], labels[val]),
      'test': Split(arrays['test_images'], arrays['test_labels'].astype(np.int32)),
  }


def place_on_canvas(images: np.ndarray, side: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
  """images [B, h, w] at the top-left corners (rows[b], cols[b]) of blank [B, side, side] canvases."""
  b, h, w = images.shape
  out = np.zeros((b, side, side), images.dtype)
  for i in range(b):
    out[i, rows[i] : rows[i] + h, cols[i] : cols[i] + w] = images[i]
  return out


def tile(images: np.ndarray) -> np.ndarray:
  """images [B, t * t, h, w] (row-major tiles) as [B, t * h, t * w] canvases."""
  b, count, h, w = images.shape
  t = int(round(count**0.5))
  if t * t != count:
    raise ValueError(f'tile needs a square number of tiles per example, got {count}.')
  return images.reshape(b, t, t, h, w).transpose(0, 1, 3, 2, 4).reshape(b, t * h, t * w)


def upsample(images: np.ndarray, factor: int) -> np.ndarray:
  """Each pixel repeated factor x factor times (nearest neighbour) over the last two axes."""
  return np.repeat(np.repeat(images, factor, axis=-2), factor, axis=-1)


@dataclasses.dataclass(frozen=True, eq=False)
class FashionMnist(grid_tasks.GridTask):
  """Fashion-MNIST classification as a grid task at side S (pixels) under one protocol (module docstring).

  The (seed, split) stream: 'train' draws example k from a permutation of the train split per epoch
  (np.random.default_rng([salt, seed, epoch])); 'validation' and 'test' are the split in file order
  (example k is image k mod N), so every seed and encoder scores the same images. A canvas position is drawn
  per (seed, split, side, k)."""

  name: ClassVar[str] = 'fashion_mnist'
  data: dict = dataclasses.field(repr=False)
  # Keyword-only: the base class's ClassVar patch_size keeps its place first among the fields.
  protocol: str = dataclasses.field(default='canvas', kw_only=True)
  patch_size: int = dataclasses.field(default=4, kw_only=True)

  def __post_init__(self):
    if self.protocol not in PROTOCOLS:
      raise ValueError(f'fashion_mnist: protocol={self.protocol!r} is invalid: allowed: one of {PROTOCOLS}.')
    grid_tasks.check_int('fashion_mnist: patch_size', self.patch_size, 1)

  @property
  def num_classes(self) -> int:
    return len(CLASS_NAMES)

  def min_side(self) -> int:
    return IMAGE_SIDE

  def check_side(self, side, key: str = 'side') -> int:
    side = super().check_side(side, key)
    if self.protocol in WHOLE_IMAGE_PROTOCOLS and side % IMAGE_SIDE:
      what = 'an integer upsampling factor' if self.protocol == 'upsample' else 'a whole number of image tiles'
      raise ValueError(
          f'{key}={side} is invalid for fashion_mnist ({self.protocol}): allowed: a multiple of {IMAGE_SIDE} ({what}).'
      )
    return side

  @functools.cached_property
  def _by_class(self) -> dict[str, list[np.ndarray]]:
    """Per split, the indices of its images of each class (the tiles protocol draws a tile's image from them)."""
    return {
        split: [np.flatnonzero(self.data[split].labels == c) for c in range(self.num_classes)]
        for split in grid_tasks.SPLITS
    }

  def _tiles(self, index: np.ndarray, labels: np.ndarray, side: int, seed: int, split: str, first: int) -> np.ndarray:
    """[B, (side / 28)^2, 28, 28]: each example's own image first, then images of its class drawn per example."""
    count = (side // IMAGE_SIDE) ** 2
    chosen = np.empty((len(index), count), np.int64)
    for i, (own, label) in enumerate(zip(index, labels)):
      pool = self._by_class[split][int(label)]
      rng = self._rng(seed, split, side, first + i)
      chosen[i] = np.concatenate([[own], rng.choice(pool, size=count - 1)])
    return self.data[split].images[chosen]

  @functools.cached_property
  def _fingerprint(self) -> str:
    h = hashlib.sha256()
    for split in grid_tasks.SPLITS:
      for array in (self.data[split].images, self.data[split].labels):
        array = np.ascontiguousarray(array)
        h.update(f'{split} {array.dtype.str} {array.shape}'.encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]

  def data_fingerprint(self) -> str:
    """sha256 (16 hex digits) over every split's images and labels (dtype, shape, bytes) as loaded: the files'
    contents and the validation carve, wherever the directory is."""
    return self._fingerprint

  def describe(self) -> dict:
    sizes = {split: len(self.data[split]) for split in grid_tasks.SPLITS}
    return {
        'name': f'{self.name}_{self.protocol}',
        'protocol': self.protocol,
        'patch_size': self.patch_size,
        'num_classes': self.num_classes,
        'per_cell': False,
        'split_sizes': sizes,
    }

  def _indices(self, seed: int, split: str, start: int, count: int) -> np.ndarray:
    n = len(self.data[split])
    ks = np.arange(start, start + count)
    if split != 'train':
      return ks % n
    salt = zlib.crc32(self.name.encode())
    out = np.empty(count, np.int64)
    for epoch in np.unique(ks // n):
      where = ks // n == epoch
      out[where] = np.random.default_rng([salt, seed, int(epoch)]).permutation(n)[ks[where] % n]
    return out

  def batch(self, side: int, batch_size: int, seed: int, split: str, step: int) -> dict[str, np.ndarray]:
    side = self.check_side(side)
    batch_size = grid_tasks.check_int('batch_size', batch_size, 1)
    seed = grid_tasks.check_int('seed', seed, 0)
    step = grid_tasks.check_int('step', step, 0)
    if split not in grid_tasks.SPLITS:
      raise ValueError(f'split={split!r} is invalid: allowed: one of {grid_tasks.SPLITS}.')
    index = self._indices(seed, split, step * batch_size, batch_size)
    images, labels = self.data[split].images[index], self.data[split].labels[index]
    if self.protocol == 'upsample':
      images = upsample(images, side // IMAGE_SIDE)
    elif self.protocol == 'tiles':
      images = tile(self._tiles(index, labels, side, seed, split, step * batch_size))
    else:
      corners = np.array(
          [
              self._rng(seed, split, side, step * batch_size + i).integers(0, side - IMAGE_SIDE + 1, size=2)
              for i in range(batch_size)
          ]
      ).reshape(batch_size, 2)
      images = place_on_canvas(images, side, corners[:, 0], corners[:, 1])
    return {'images': (images.astype(np.float32) / 255.0)[..., None], 'labels': labels.astype(np.int32)}
