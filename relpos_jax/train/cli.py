"""The command line of the entry points: `--config=<file>[:variants]` plus `--config.<key>=<value>` overrides.

ml_collections' `config_flags.DEFINE_config_file` does the loading and the overrides; `parse_flags`, given to
`absl.app.run(main, flags_parser=parse_flags)`, first checks what it reports badly, each with one message:

  * a config file that does not exist is named (config_flags defers that error to the first use),
  * an override of a key the config does not have names the key and the keys allowed there (config_flags
    raises a bare AttributeError),
  * an override given twice is refused: for a tuple key config_flags would concatenate the values
    (`--config.eval.lengths='(128,)' --config.eval.lengths='(64,)'` gives (128, 64)), for any other key
    the last would silently win. Write a tuple once: `--config.eval.lengths='(64, 128)'`.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Sequence

from absl import app

from relpos_jax.train import config as config_lib


def _flag_token(arg: str) -> tuple[str, str | None] | None:
  """('name', value or None) of a '--name=value' / '--name' / '-name' argument; None for anything else."""
  if not arg.startswith('-') or arg in ('-', '--'):
    return None
  name, sep, value = arg.lstrip('-').partition('=')
  return name, (value if sep else None)


def check_command_line(argv: Sequence[str], *, name: str = 'config', default: str | None = None) -> None:
  """Raises ConfigError for a missing config file, an unknown override key or a repeated override."""
  path, overrides = default, []
  args = list(argv[1:])
  if '--' in args:
    args = args[: args.index('--')]
  for i, arg in enumerate(args):
    token = _flag_token(arg)
    if token is None:
      continue
    flag, value = token
    if flag == name:
      path = value if value is not None else (args[i + 1] if i + 1 < len(args) else None)
    elif flag.startswith(name + '.') or flag.startswith(f'no{name}.'):
      overrides.append(flag.split('.', 1)[1])
  repeated = sorted({k for k in overrides if overrides.count(k) > 1})
  if repeated:
    raise config_lib.ConfigError(
        f'--{name}.{repeated[0]} is given {overrides.count(repeated[0])} times; give each override once '
        f"(a tuple as one value: --{name}.eval.lengths='(64, 128)')."
    )
  if path is None or not overrides and path == default:
    return
  config = config_lib.config_from_file(path)  # Names a file that does not exist.
  for key in overrides:
    config_lib.override(config, key, dataclasses.MISSING)  # Names an unknown key and the allowed ones.


def parse_flags(argv: Sequence[str], *, name: str = 'config', default: str | None = None) -> list[str]:
  """absl's flag parsing after `check_command_line` (its error printed as absl prints flag errors).

  `default`: the config used when the command line names none (define the flag without a default:
  config_flags would load a default at import, overrides included, before any check could run).
  """
  argv = list(argv)
  try:
    check_command_line(argv, name=name, default=default)
  except config_lib.ConfigError as e:
    print(f'FATAL Flags parsing error: {e}', file=sys.stderr)
    sys.exit(1)
  if default is not None and not any((_flag_token(a) or ('',))[0] == name for a in argv[1:]):
    argv.insert(1, f'--{name}={default}')
  return app.parse_flags_with_usage(argv)
