r"""The grid studies' variant names before each had its own file (configs/studies/resolution*.py): aliases of those.

    python -m experiments.resolution --config=configs/resolution.py:study   # = configs/studies/resolution_study.py

Commands recorded before the move (docs/resolution, docs/resolution_study) name these; each builds exactly what its
studies file builds (tests/test_configs.py pins both):

    configs/resolution.py                        configs/studies/resolution.py
    configs/resolution.py:fashion_mnist          configs/studies/resolution.py:fashion_mnist
    configs/resolution.py:study                  configs/studies/resolution_study.py
    configs/resolution.py:study,fashion_mnist    configs/studies/resolution_study.py:fashion_mnist
    configs/resolution.py:full                   configs/studies/resolution_full.py
    configs/resolution.py:full,fashion_mnist     configs/studies/resolution_full.py:fashion_mnist
"""

from __future__ import annotations

import ml_collections

from relpos_jax import resources

PROTOCOLS = {None: 'studies/resolution', 'study': 'studies/resolution_study', 'full': 'studies/resolution_full'}


def get_config(variants: str | None = None) -> ml_collections.ConfigDict:
  variants = set((variants or '').split(',')) - {''}
  unknown = variants - {'fashion_mnist', 'full', 'study'}
  if unknown:
    raise ValueError(
        f'configs/resolution.py: unknown variant(s) {sorted(unknown)}; allowed: fashion_mnist, full, study.'
    )
  protocols = variants & {'full', 'study'}
  if len(protocols) > 1:
    raise ValueError('configs/resolution.py: variants full and study are two protocols; choose one.')
  studies_file = PROTOCOLS[next(iter(protocols), None)]
  return resources.config_module(studies_file).get_config('fashion_mnist' if 'fashion_mnist' in variants else None)
