"""The grid encoder families, one module each; importing the package registers them all (grid.registry)."""

import importlib as _importlib
import pkgutil as _pkgutil

for _module in sorted(m.name for m in _pkgutil.iter_modules(__path__)):
  _importlib.import_module(f'{__name__}.{_module}')
