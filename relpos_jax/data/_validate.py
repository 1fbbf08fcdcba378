"""Argument checks shared by the data modules (errors always name the offending value)."""

from __future__ import annotations

import numpy as np


def check_generator(rng) -> None:
  if not isinstance(rng, np.random.Generator):
    raise TypeError('rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed)), '
                    f'got {type(rng).__name__}')


def check_positive_int(name: str, value) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
    raise ValueError(f'{name} must be a positive int, got {name}={value!r}')
  return int(value)
