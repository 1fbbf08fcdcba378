"""The README and the docs pages point only at files the repository has.

- every relative link in README.md and docs/**/*.md (`[text](target)`, images included, an `#anchor` dropped)
  names a file or folder of the repository, resolved from the page's own folder;
- docs/README.md indexes every entry of docs/ (a page or a study folder), so no page goes unlisted;
- nothing the repository ships sends the reader outside it: no path into the checkout's neighbours (the
  `shared/` folder the project started from) and no design document the repository does not have.
"""

import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ['README.md'] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, 'docs', '**', '*.md'), recursive=True)
)
# [text](target) or ![alt](target); the target ends at the first ')' or space (a title may follow a space).
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)(?:\s[^)]*)?\)')
FENCE = re.compile(r'```.*?```', flags=re.S)


def _read(path: str) -> str:
  with open(os.path.join(REPO, path), encoding='utf-8') as f:
    return f.read()


def relative_links(text: str) -> list[str]:
  """The link targets of a markdown text that point into the repository: no URL, no bare #anchor, none in code."""
  text = FENCE.sub('', text)
  targets = [m.group(1) for m in LINK.finditer(text)]
  return [t for t in targets if not re.match(r'[a-z][a-z0-9+.-]*:', t) and not t.startswith('#')]


def test_relative_links_are_found_and_urls_and_anchors_are_not():
  text = '[a](docs/x.md#part) ![b](plot.png) [c](https://example.org/y) [d](#here)\n```\n[e](in/code.md)\n```'
  assert relative_links(text) == ['docs/x.md#part', 'plot.png']


@pytest.mark.parametrize('page', PAGES)
def test_every_relative_link_resolves_to_a_file_of_the_repository(page):
  folder = os.path.dirname(os.path.join(REPO, page))
  broken = []
  for target in relative_links(_read(page)):
    path = os.path.normpath(os.path.join(folder, target.split('#')[0]))
    inside = os.path.commonpath([path, REPO]) == REPO
    if not inside or not os.path.exists(path):
      broken.append(target)
  assert not broken, f'{page}: links to nothing in the repository: {broken}'


def test_the_docs_index_lists_every_page_and_folder():
  index = {os.path.normpath(t.split('#')[0]) for t in relative_links(_read('docs/README.md'))}
  listed = {target.split('/')[0] for target in index}
  entries = {e for e in os.listdir(os.path.join(REPO, 'docs')) if e != 'README.md' and not e.startswith('.')}
  assert entries <= listed, f'docs/README.md does not index: {sorted(entries - listed)}'


# Names of places outside the repository that pages and docstrings once cited.
OUTSIDE = re.compile(r'shared/seed|shared/DESIGN|\.\./shared|DESIGN\.md')
# Files still allowed to cite outside the repository (none: relpos_jax/nn/attention.py's grid path, which cited
# DESIGN.md, went through the Terms in issue 51 item 1 and its docstring with it).
STILL_CITED_IN = set()


def _shipped_text_files() -> list[str]:
  python = glob.glob(os.path.join(REPO, 'relpos_jax', '**', '*.py'), recursive=True)
  python += glob.glob(os.path.join(REPO, 'configs', '**', '*.py'), recursive=True)
  python += glob.glob(os.path.join(REPO, 'experiments', '*.py'))
  return PAGES + sorted(os.path.relpath(p, REPO) for p in python)


def test_nothing_points_outside_the_repository():
  citing = {path for path in _shipped_text_files() if OUTSIDE.search(_read(path))}
  assert citing <= STILL_CITED_IN, f'these cite a file outside the repository: {sorted(citing - STILL_CITED_IN)}'
  assert citing == STILL_CITED_IN, f'no longer cites outside the repository, drop the exemption: {STILL_CITED_IN}'


def test_the_readme_leads_with_how_to_use_it():
  """A newcomer's ten minutes reach "Using the pieces": the README stays within about 300 lines, opens with the
  quick start and one line per finding, and puts "Using the pieces" in its first third (issue 51)."""
  lines = _read('README.md').splitlines()
  headings = [line for line in lines if line.startswith('## ')]
  assert headings[:3] == ['## Quick start', '## What the studies find', '## Using the pieces'], headings
  assert len(lines) <= 300, f'README.md has {len(lines)} lines; the findings in full go to docs/findings.md'
  assert lines.index('## Using the pieces') < len(lines) / 3
