"""Benchmark results as markdown: one section per measurement, headed by a description of the machine."""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform

import jax
import jaxlib


@dataclasses.dataclass
class Section:
  """One measurement's table, what exactly was timed, and what was found."""

  title: str
  timed: str  # What is inside the timed function, in words.
  columns: list[str]
  rows: list[list[str]] = dataclasses.field(default_factory=list)
  notes: list[str] = dataclasses.field(default_factory=list)

  def add_row(self, *cells) -> None:
    if len(cells) != len(self.columns):
      raise ValueError(f'{self.title}: a row of {len(cells)} cells for {len(self.columns)} columns ' f'{self.columns}.')
    self.rows.append([str(c) for c in cells])

  def markdown(self) -> str:
    lines = [
        f'## {self.title}',
        '',
        self.timed,
        '',
        '| ' + ' | '.join(self.columns) + ' |',
        '|' + '|'.join('---' for _ in self.columns) + '|',
    ]
    lines += ['| ' + ' | '.join(row) + ' |' for row in self.rows]
    if self.notes:
      lines += [''] + [f'- {note}' for note in self.notes]
    return '\n'.join(lines) + '\n'


def cpu_model() -> str:
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def machine_description() -> list[str]:
  """Lines naming the machine and software the numbers were taken on."""
  device = jax.devices()[0]
  try:
    usable = len(os.sched_getaffinity(0))
  except AttributeError:
    usable = os.cpu_count()
  return [
      f'date: {datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}',
      f'CPU: {cpu_model()}, {os.cpu_count()} cores ({usable} usable by this process)',
      f'backend: {jax.default_backend()} ({device.device_kind}, {jax.device_count()} device(s))',
      f'jax {jax.__version__}, jaxlib {jaxlib.__version__}, python {platform.python_version()}',
      f'XLA_FLAGS: {os.environ.get("XLA_FLAGS", "(unset)")}',
      f'load average when the page was written (1, 5, 15 min): {_load_average()} (above ~0.5 per core, '
      'other work shared the machine: expect noisy medians)',
  ]


def _load_average() -> str:
  try:
    return ', '.join(f'{x:.1f}' for x in os.getloadavg())
  except OSError:
    return 'unknown'


def document(sections: list[Section], command: str) -> str:
  """The whole markdown page: title, how it was made, the machine, then every section."""
  head = [
      '# relpos_jax benchmarks: what position encodings cost',
      '',
      f'Made by `{command}`. Every time is the median of interleaved repeats of a jitted, '
      'warmed-up, ahead-of-time compiled function (see benchmarks/measure.py); a ratio is the median of '
      'the per-round ratios of two contenders that ran back to back. '
      "Memory is XLA's buffer assignment of the compiled program (argument + output - alias + temp), "
      'never a guess.',
      '',
      '## Machine',
      '',
  ]
  head += [f'- {line}' for line in machine_description()]
  return '\n'.join(head) + '\n\n' + '\n'.join(s.markdown() for s in sections)


def ms(seconds: float) -> str:
  return f'{seconds * 1e3:.3g}' if seconds < 1 else f'{seconds * 1e3:.0f}'


def ratio(x: float) -> str:
  return f'{x:.2f}x'


def verdict(value: float, limit: float) -> str:
  return f'met (<= {limit:g}x)' if value <= limit else f'**missed** (> {limit:g}x)'


def noise_note(spreads, repeats: int) -> str:
  """How far apart the samples of the noisiest contender were: read the ratios with that in mind."""
  worst = max(spreads) if spreads else 0.0
  return (
      f'Noise: {repeats} timed rounds; the samples of the noisiest contender spread over {worst:.0%} of '
      'its median ((max - min) / median). Differences smaller than that are not resolved.'
  )
