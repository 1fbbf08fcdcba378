"""Shared by the study tests: tiny Fashion-MNIST IDX files (the system package is optional and absent on CI), and
a small corpus of text files with the tiny byte-level LM trained on it (per-document totals and the key-token loss
read them)."""

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
  os.makedirs(directory, exist_ok=True)
  for part, n in (('train', n_train), ('test', n_test)):
    for kind, array in (('images', rng.integers(0, 256, (n, 28, 28))), ('labels', np.arange(n) % 10)):
      array = array.astype(np.uint8)
      header = bytes([0, 0, 8, array.ndim]) + struct.pack(f'>{array.ndim}I', *array.shape)
      with open(os.path.join(directory, idx.FILES[f'{part}_{kind}'] + '.gz'), 'wb') as f:
        f.write(gzip.compress(header + array.tobytes()))
  return os.fspath(directory)


@pytest.fixture
def fashion_mnist_files():
  """`write_fashion_mnist`, for a test to call with its directories."""
  return write_fashion_mnist


@pytest.fixture(scope='module')
def texts(tmp_path_factory):
  root = tmp_path_factory.mktemp('texts')
  rng = np.random.default_rng(0)
  words = 'the cat sat on a mat and the dog ran to the old tree where a bird sang its song'.split()
  for i in range(60):
    (root / f'doc{i:02d}.txt').write_text(' '.join(rng.choice(words, 60 + 3 * i)))
  return root


@pytest.fixture(scope='module')
def tiny_lm(texts):
  """configs/lm.py overrides: the model and windows of a few seconds' evaluation on `texts`."""
  return {
      'data.corpus': str(texts),
      'data.train_length': 16,
      'model.num_layers': 1,
      'model.model_dim': 16,
      'model.num_heads': 2,
  }
