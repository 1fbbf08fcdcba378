"""The IDX reader and Fashion-MNIST loader on tiny IDX files the tests write (no dependency on the package)."""

import gzip
import os
import struct

import numpy as np
import pytest

from relpos_jax.data import idx


def _idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
  """IDX by the format's text: 0x0000, type code, ndim, big-endian int32 dims, big-endian data."""
  dtype = {0x08: '>u1', 0x0B: '>i2', 0x0D: '>f4'}[type_code]
  header = bytes([0, 0, type_code, array.ndim]) + b''.join(struct.pack('>I', d) for d in array.shape)
  return header + np.asarray(array, dtype).tobytes()


def _write_dataset(directory, n_train=20, n_test=6, compress=True):
  rng = np.random.default_rng(0)
  arrays = {
      'train_images': rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
      'train_labels': (np.arange(n_train) % 10).astype(np.uint8),
      'test_images': rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
      'test_labels': (np.arange(n_test) % 10).astype(np.uint8),
  }
  os.makedirs(directory, exist_ok=True)
  for key, stem in idx.FILES.items():
    raw = _idx_bytes(arrays[key])
    with open(os.path.join(directory, stem + ('.gz' if compress else '')), 'wb') as f:
      f.write(gzip.compress(raw) if compress else raw)
  return arrays


def test_parse_idx_by_hand():
  raw = bytes([0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 255])
  np.testing.assert_array_equal(idx.parse_idx(raw), [[1, 2, 3], [4, 5, 255]])
  shorts = _idx_bytes(np.array([-2, 300], np.int16), 0x0B)
  assert shorts[-4:] == b'\xff\xfe\x01\x2c'  # big-endian on disk
  np.testing.assert_array_equal(idx.parse_idx(shorts), [-2, 300])
  floats = idx.parse_idx(_idx_bytes(np.array([[0.5], [-1.25]], np.float32), 0x0D))
  assert floats.dtype == np.float32 and floats.shape == (2, 1) and floats.dtype.isnative
  np.testing.assert_array_equal(floats, [[0.5], [-1.25]])


def test_read_gzip_and_plain(tmp_path):
  array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
  (tmp_path / 'a').write_bytes(_idx_bytes(array))
  (tmp_path / 'a.gz').write_bytes(gzip.compress(_idx_bytes(array)))
  np.testing.assert_array_equal(idx.read_idx(tmp_path / 'a'), array)
  np.testing.assert_array_equal(idx.read_idx(tmp_path / 'a.gz'), array)


def test_bad_files_name_the_path(tmp_path):
  bad = tmp_path / 'bad'
  bad.write_bytes(bytes([0, 1, 0x08, 1, 0, 0, 0, 1, 7]))
  with pytest.raises(idx.IdxError, match=rf'{bad} has a bad IDX magic number 0x00010801'):
    idx.read_idx(bad)
  short = tmp_path / 'short'
  short.write_bytes(_idx_bytes(np.zeros((4, 5), np.uint8))[:-3])
  with pytest.raises(
      idx.IdxError, match=rf'{short} is truncated: shape \(4, 5\) of uint8 needs 20 data bytes, the file has 17'
  ):
    idx.read_idx(short)
  header = tmp_path / 'header'
  header.write_bytes(bytes([0, 0, 0x08, 3, 0, 0]))
  with pytest.raises(idx.IdxError, match=rf'{header} is truncated: its header needs 16 bytes'):
    idx.read_idx(header)
  gz = tmp_path / 'cut.gz'
  gz.write_bytes(gzip.compress(_idx_bytes(np.zeros((50, 50), np.uint8)))[:-10])
  with pytest.raises(idx.IdxError, match=rf'{gz} is a damaged or truncated gzip file'):
    idx.read_idx(gz)
  with pytest.raises(idx.IdxError, match=rf'cannot read IDX file {tmp_path / "nope"}'):
    idx.read_idx(tmp_path / 'nope')


def test_missing_directory_and_file_say_how_to_install(tmp_path):
  with pytest.raises(idx.IdxError, match=r'does not exist.*apt-get install -y dataset-fashion-mnist'):
    idx.load_fashion_mnist(tmp_path / 'absent')
  _write_dataset(tmp_path)
  os.remove(tmp_path / 't10k-labels-idx1-ubyte.gz')
  with pytest.raises(idx.IdxError, match=rf'{tmp_path}/t10k-labels-idx1-ubyte\(.gz\) is missing.*apt-get install'):
    idx.load_fashion_mnist(tmp_path)


@pytest.mark.parametrize('compress', [True, False])
def test_splits_carved_deterministically(tmp_path, compress):
  arrays = _write_dataset(tmp_path, compress=compress)
  data = idx.load_fashion_mnist(tmp_path, num_validation=5)
  again = idx.load_fashion_mnist(tmp_path, num_validation=5)
  assert (len(data['train']), len(data['validation']), len(data['test'])) == (15, 5, 6)
  np.testing.assert_array_equal(data['validation'].images, again['validation'].images)
  carved = np.concatenate([data['train'].images, data['validation'].images])
  rows = {im.tobytes() for im in carved}
  assert rows == {im.tobytes() for im in arrays['train_images']}  # a partition of the train file
  assert not {im.tobytes() for im in data['train'].images} & {im.tobytes() for im in data['validation'].images}
  np.testing.assert_array_equal(data['test'].images, arrays['test_images'])
  assert data['test'].labels.dtype == np.int32
  with pytest.raises(ValueError, match=r'num_validation=20 is invalid: allowed: an int in \[1, 19\]'):
    idx.load_fashion_mnist(tmp_path, num_validation=20)


def test_wrong_shapes_are_refused(tmp_path):
  _write_dataset(tmp_path)
  (tmp_path / 'train-labels-idx1-ubyte.gz').write_bytes(gzip.compress(_idx_bytes(np.zeros(3, np.uint8))))
  with pytest.raises(idx.IdxError, match=r'train-labels-idx1-ubyte: expected 20 labels in 0..9'):
    idx.load_fashion_mnist(tmp_path)


def test_protocols(tmp_path):
  _write_dataset(tmp_path)
  data = idx.load_fashion_mnist(tmp_path, num_validation=5)
  canvas = idx.FashionMnist(data, protocol='canvas')
  up = idx.FashionMnist(data, protocol='upsample')
  test = data['test']
  at28 = canvas.batch(side=28, batch_size=4, seed=0, split='test', step=0)
  np.testing.assert_allclose(at28['images'][..., 0], test.images[:4] / 255.0)  # at 28 the image itself
  np.testing.assert_array_equal(at28['labels'], test.labels[:4])
  big = canvas.batch(side=56, batch_size=6, seed=0, split='test', step=0)
  assert big['images'].shape == (6, 56, 56, 1)
  for image, original in zip(big['images'][..., 0], test.images[:6]):
    r, c = np.argwhere(image > 0).min(axis=0)  # random images: the corner pixel is non-zero w.p. ~1
    np.testing.assert_allclose(image[r : r + 28, c : c + 28], original / 255.0)
    assert image.sum() == pytest.approx(original.sum() / 255.0, rel=1e-5)  # nothing else on the canvas
  np.testing.assert_array_equal(big['images'], canvas.batch(56, 6, 0, 'test', 0)['images'])
  corners = {tuple(np.argwhere(im > 0).min(axis=0)) for im in big['images'][..., 0]}
  assert len(corners) > 1  # positions vary per example
  x3 = up.batch(side=84, batch_size=2, seed=0, split='test', step=0)['images'][..., 0]
  np.testing.assert_allclose(x3[:, ::3, ::3], test.images[:2] / 255.0)
  np.testing.assert_allclose(x3[:, 2::3, 1::3], test.images[:2] / 255.0)
  with pytest.raises(ValueError, match=r'side=60 is invalid for fashion_mnist \(upsample\): allowed: a multiple of 28'):
    up.batch(side=60, batch_size=1, seed=0, split='test', step=0)
  with pytest.raises(ValueError, match=r"protocol='crop' is invalid"):
    idx.FashionMnist(data, protocol='crop')


def test_tile_lays_tiles_row_major():
  tiles = np.arange(4 * 2 * 2).reshape(1, 4, 2, 2)  # four 2 x 2 tiles: 0-3, 4-7, 8-11, 12-15
  np.testing.assert_array_equal(idx.tile(tiles)[0], [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]])
  with pytest.raises(ValueError, match='a square number of tiles per example, got 3'):
    idx.tile(np.zeros((1, 3, 2, 2)))


def test_the_tiles_protocol_fills_the_grid_with_objects_of_the_example_class(tmp_path):
  arrays = _write_dataset(tmp_path, n_train=60, n_test=30)
  data = idx.load_fashion_mnist(tmp_path, num_validation=5)
  tiles = idx.FashionMnist(data, protocol='tiles')
  test = data['test']
  at28 = tiles.batch(side=28, batch_size=4, seed=0, split='test', step=0)
  np.testing.assert_allclose(at28['images'][..., 0], test.images[:4] / 255.0)  # at 28 the image itself
  big = tiles.batch(side=84, batch_size=5, seed=0, split='test', step=1)  # examples 5-9, 3 x 3 tiles
  assert big['images'].shape == (5, 84, 84, 1)
  np.testing.assert_array_equal(big['labels'], test.labels[5:10])
  by_bytes = {image.tobytes(): label for image, label in zip(arrays['test_images'], arrays['test_labels'])}
  for k, (canvas, label) in enumerate(zip(big['images'][..., 0], big['labels'])):
    pieces = [np.round(canvas[r : r + 28, c : c + 28] * 255).astype(np.uint8) for r in (0, 28, 56) for c in (0, 28, 56)]
    np.testing.assert_array_equal(pieces[0], test.images[5 + k])  # the example's own image, top left
    assert all(by_bytes[p.tobytes()] == label for p in pieces)  # every tile a test image of its class
  again = tiles.batch(side=84, batch_size=5, seed=0, split='test', step=1)
  np.testing.assert_array_equal(big['images'], again['images'])  # the same tiles for every encoder and seed
  with pytest.raises(ValueError, match=r'side=42 is invalid for fashion_mnist \(tiles\): allowed: a multiple of 28'):
    tiles.batch(side=42, batch_size=1, seed=0, split='test', step=0)


def test_train_stream_is_a_permutation_per_epoch(tmp_path):
  _write_dataset(tmp_path)
  data = idx.load_fashion_mnist(tmp_path, num_validation=5)
  task = idx.FashionMnist(data, protocol='upsample')
  epoch = task.batch(side=28, batch_size=15, seed=3, split='train', step=0)['images'][..., 0]
  seen = sorted(im.tobytes() for im in epoch)
  assert seen == sorted((im / 255.0).astype(np.float32).tobytes() for im in data['train'].images)
  other = task.batch(side=28, batch_size=15, seed=4, split='train', step=0)['images']
  assert not np.array_equal(epoch, other[..., 0])


def test_an_empty_split_and_float_labels_are_refused_naming_the_file(tmp_path):
  """An empty test file ended in an IndexError in the study's majority baseline; float labels (IDX type 0x0D)
  were truncated to classes. Each is refused when loaded, naming the file."""
  _write_dataset(tmp_path)
  (tmp_path / 't10k-images-idx3-ubyte.gz').write_bytes(gzip.compress(_idx_bytes(np.zeros((0, 28, 28), np.uint8))))
  (tmp_path / 't10k-labels-idx1-ubyte.gz').write_bytes(gzip.compress(_idx_bytes(np.zeros(0, np.uint8))))
  with pytest.raises(idx.IdxError, match=r't10k-images-idx3-ubyte: holds no images \(shape \(0, 28, 28\)\)'):
    idx.load_fashion_mnist(tmp_path)
  _write_dataset(tmp_path)
  labels = (np.arange(20) % 10 + 0.5).astype(np.float32)
  (tmp_path / 'train-labels-idx1-ubyte.gz').write_bytes(gzip.compress(_idx_bytes(labels, 0x0D)))
  with pytest.raises(idx.IdxError, match=r'train-labels-idx1-ubyte: labels of type float32 are invalid'):
    idx.load_fashion_mnist(tmp_path)
