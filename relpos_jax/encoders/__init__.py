"""Position encoders: pure functions of positions, one module per family.

Every module in this package registers its encoders with `registry.register` when imported; importing the
package imports them all, so `make(name, **hparams)` and `names()` see every encoder.
"""

import importlib as _importlib
import pkgutil as _pkgutil

from relpos_jax.encoders.contract import (
    AbsoluteEncoder,
    AttentionContext,
    ContextualEncoder,
    Dims,
    Encoder,
    Kind,
    NormalizerEncoder,
    PositionRemapEncoder,
    RotaryEncoder,
    TemperatureEncoder,
    ScalarBiasEncoder,
    ScoreTransformEncoder,
    VectorRelativeEncoder,
)
from relpos_jax.encoders.registry import encoder_class, make, make_default, names, register

for _module in sorted(m.name for m in _pkgutil.iter_modules(__path__)):
  if _module not in ('contract', 'registry'):
    _importlib.import_module(f'{__name__}.{_module}')

from relpos_jax.encoders.combine import Combined, combine  # noqa: E402
from relpos_jax.encoders.spec import from_spec, to_spec  # noqa: E402
