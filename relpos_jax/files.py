"""The one atomic file writer: every record, results file and report of relpos_jax is written through it.

    write_text_atomic(epath.Path(workdir) / 'data.json', text)

The text goes to a temporary file beside the target, which is then renamed over it, so a reader (another
process of a multi-process run, a notebook polling a study) sees the old content or the new, never a part,
and an interrupted write never leaves a truncated file. The temporary name is unique per process and thread:
several writers of one file (suite processes with --tasks all write summary.json) never rename each other's
half-written file.
"""

from __future__ import annotations

import os
import threading

from etils import epath


def write_text_atomic(path: str | os.PathLike, text: str) -> epath.Path:
  """Writes `text` to `path` (a local or cloud path) atomically; returns the path."""
  path = epath.Path(path)
  temporary = path.parent / f'.{path.name}.{os.getpid()}.{threading.get_ident()}.tmp'
  temporary.write_text(text, encoding='utf-8')
  temporary.replace(path)
  return path
