"""Shared by the study tests: a small corpus of text files and the tiny byte-level LM trained on it (per-document
totals and the key-token loss read them)."""

from __future__ import annotations

import numpy as np
import pytest


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
