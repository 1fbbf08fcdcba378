"""Shared by the study tests: tiny Fashion-MNIST IDX files (the system package is optional and absent on CI)."""

from __future__ import annotations

import gzip
import os
import struct

import numpy as np
import pytest

from relpos_jax.data import idx


def write_fashion_mnist(directory, n_train=24, n_test=8, seed=0) -> str:
  """The four IDX files (gzip) of a tiny Fashion-MNIST in `directory`: random images (`seed`), labels k mod 10."""
  rng = np.random.default_rng(seed)
  arrays = {
      'train_images': rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
      'train_labels': (np.arange(n_train) % 10).astype(np.uint8),
      'test_images': rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
      'test_labels': (np.arange(n_test) % 10).astype(np.uint8),
  }
  os.makedirs(directory, exist_ok=True)
  for key, stem in idx.FILES.items():
    a = arrays[key]
    raw = bytes([0, 0, 8, a.ndim]) + b''.join(struct.pack('>I', d) for d in a.shape) + a.tobytes()
    with open(os.path.join(directory, stem + '.gz'), 'wb') as f:
      f.write(gzip.compress(raw))
  return os.fspath(directory)


@pytest.fixture
def fashion_mnist_files():
  """`write_fashion_mnist`, for a test to call with its directories."""
  return write_fashion_mnist
