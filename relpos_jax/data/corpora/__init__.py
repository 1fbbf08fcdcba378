"""Named corpora beside the built-in one: what `config.data.corpus` may name besides a path.

  'stdlib'              the running interpreter's standard-library .py sources (built in, the default)
  'austen'              Jane Austen's six novels, a chapter per document, split by novel
                        (`relpos_jax.data.corpora.austen`; needs `apt-get install --no-install-recommends
                        r-cran-janeaustenr`); 'austen:PATH' reads the package's directory at PATH

A named corpus loads into the same `relpos_jax.data.Corpus` as a path does (byte tokens, NUL-joined documents,
fingerprints over every document), with its own split rule (a whole work held out) instead of the path hash.
"""

from __future__ import annotations

from relpos_jax.data.corpora import austen, rdata

# Names `Corpus.load` dispatches here ('stdlib' stays in relpos_jax.data.corpus, which builds it).
NAMED = {austen.NAME: austen}
NAMES = ('stdlib',) + tuple(NAMED)

__all__ = ['NAMED', 'NAMES', 'austen', 'parse', 'rdata']


def parse(spec: str) -> tuple[str, str | None] | None:
  """(name, path or None) when `spec` names a corpus of `NAMED` ('austen' or 'austen:PATH'); else None."""
  name, sep, path = spec.partition(':')
  if name in NAMED:
    return name, (path or None) if sep else None
  return None
