"""The plan of a study, read from its config: the `study` section, its entries (label, training spec, evaluation
spec), its seeds, its committed learning rates, its comparisons and the checks of its protocol keys.

What a study (`relpos_jax.study.runner`) and a re-evaluation of a trained one (`relpos_jax.study.reevaluate`)
both read; neither is imported here, so both build on this module (`runner` re-exports its names). The module
docstring of `runner` describes the keys.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Sequence

from relpos_jax.study import protocol
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files, data_sources, schema

_LABEL = re.compile(r'^[A-Za-z0-9_.+-]+$')


@dataclasses.dataclass(frozen=True)
class Study:
  """The `study` section of a study config (a training config plus this section)."""

  encoders: tuple[str, ...] = schema.key()  # 'label: spec' entries, or bare specs (see parse_entries)
  title: str = schema.key('Length generalization')
  description: str = schema.key('')
  seeds: tuple[int, ...] | None = schema.key(
      None, ge=0, lt=config_lib.SEED_LIMIT
  )  # every encoder trained once per seed
  # Another study's workdir: evaluate its trained runs at this config's lengths, no training (`reevaluate`).
  trained_workdir: str = schema.key('')
  # The split the tables report; choices (learning rates) are made on 'validation' at the training length.
  split: str = schema.key('test', choices=protocol.SPLITS)
  # Peak learning rates tried per encoder at the first seed (None: no grid); see the module docstring.
  lr_grid: tuple[float, ...] | None = schema.key(None, gt=0)
  # The seed the grid trains at (None: the first of `seeds`, whose grid run is then that seed's reported run).
  # A seed outside `seeds` keeps the choice out of the reported average: its runs are scored on validation
  # at the training length only.
  selection_seed: int | None = schema.key(None, ge=0, lt=config_lib.SEED_LIMIT)
  # Committed per-encoder rates, 'label: lr' (e.g. what a grid chose): not searched again.
  learning_rates: tuple[str, ...] = schema.key(())
  # A config file's committed rates, 'label: lr': as learning_rates, for the labels the study has (a study
  # whose encoders were overridden keeps them for the labels it shares); learning_rates wins where both name one.
  default_learning_rates: tuple[str, ...] = schema.key(())
  # Paired differences over seeds: 'A vs B' (at the training length, the out-of-distribution mean and the
  # longest length) or 'A vs B at <length | train | ood | longest>'.
  comparisons: tuple[str, ...] = schema.key(())
  # Randomized encoders: also report the evaluation at positions 0..L-1, as a second row.
  sequential_positions: bool = schema.key(True)


SEQUENTIAL_SUFFIX = '@0..L-1'


COMPARISON_STATISTICS = ('train', 'ood', 'longest')


def rate_name(rate: float) -> str:
  """A learning rate as run directories and `lr_grid` keys name it: `f'{rate:g}'` (six significant digits, the
  names every committed run has: 0.001, 0.03) where that reads back as the same float, else `repr(rate)`, the
  shortest string that does. Two distinct rates never share a name (each name reads back as its own rate), so
  1e-3 and 1.0000001e-3, which print alike under :g, cannot share a run directory."""
  rate = float(rate)
  short = f'{rate:g}'
  return short if float(short) == rate else repr(rate)


@dataclasses.dataclass(frozen=True)
class Entry:
  """One encoder of the study: a label (a directory name and a legend entry), the spec it trains with and,
  for 'label: X -> Y', the spec it is evaluated with (None: the training one)."""

  label: str
  spec: str
  eval_spec: str | None = None

  @property
  def reported_spec(self) -> str:
    return self.spec if self.eval_spec is None else self.eval_spec


def parse_entries(encoders: Sequence[str]) -> list[Entry]:
  """`'label: spec'` or a bare spec whose label is the spec itself (if it is a valid directory name)."""
  if isinstance(encoders, str) or not encoders:
    raise config_lib.ConfigError(
        f'config.study.encoders={encoders!r} is invalid: allowed: a non-empty tuple of encoder specs, each '
        "'label: spec' or a bare spec such as 'alibi'."
    )
  entries = []
  for item in encoders:
    label, sep, spec = str(item).partition(':')
    label, spec = (label.strip(), spec.strip()) if sep else (item.strip(), item.strip())
    if not _LABEL.match(label) or not label.strip('.'):
      raise config_lib.ConfigError(
          f'config.study.encoders entry {item!r} has label {label!r}; allowed: letters, digits, _ . + - '
          "and not only dots (the label names the run's directory under runs/; write 'label: spec' for "
          'specs with other characters).'
      )
    train_spec, arrow, eval_spec = spec.partition('->')
    if arrow:
      if not train_spec.strip() or not eval_spec.strip() or '->' in eval_spec:
        raise config_lib.ConfigError(
            f"config.study.encoders entry {item!r}: allowed: 'label: train_spec -> eval_spec' with one "
            'arrow and a spec on each side.'
        )
      entries.append(Entry(label, train_spec.strip(), eval_spec.strip()))
      continue
    entries.append(Entry(label, spec))
  labels = [e.label for e in entries]
  duplicated = sorted({x for x in labels if labels.count(x) > 1})
  if duplicated:
    raise config_lib.ConfigError(f'config.study.encoders repeats label(s) {duplicated}; each must be unique.')
  return entries


@dataclasses.dataclass(frozen=True)
class StudyConfig:
  """A study config parsed once, at its entry point: the training config every run derives from (`base`,
  typed) and the `study` section. Everything below the entry reads these, never the ConfigDict."""

  base: config_lib.Config
  study: Study


def split_study_config(config) -> tuple[config_lib.Config, Study]:
  """(the training config shared by every encoder, parsed, the `study` section) of a study config: a ConfigDict
  as the file and flags give it, or its dict."""
  as_dict = config_files.as_dict(config)
  if 'study' not in as_dict:
    raise config_lib.ConfigError(
        'missing key config.study: a study config is a training config plus a '
        'study section (see configs/studies/study.py).'
    )
  study = as_dict.pop('study')
  if isinstance(study, dict) and 'encoders' in study:
    parse_entries(study['encoders'])  # A bare string, no entry, a bad label: the entries' own message.
  section = schema.parse_section(Study, 'study', study)
  return config_lib.parse(as_dict), section


def parse_seeds(study: Study, base) -> tuple[int, ...]:
  """`config.study.seeds`: a non-empty tuple of distinct ints >= 0; None (absent), the config's own `seed`."""
  seeds = study.seeds
  if seeds is None:
    return (int(base.seed),)
  if not seeds or len(set(seeds)) != len(seeds):
    raise config_lib.ConfigError(
        f'config.study.seeds={seeds!r} is invalid: allowed: a non-empty tuple of distinct ints >= 0 and '
        f"< {config_lib.SEED_LIMIT}, e.g. (0,) or (0, 1, 2) (on the command line: --config.study.seeds='(0,1,2)')."
    )
  return tuple(int(s) for s in seeds)


def check_selection_seed(study: Study, seeds: Sequence[int]) -> None:
  """`config.study.selection_seed`: a grid to train it for, and not one of the reported seeds."""
  check_selection_seed_key(
      'config.study.', study.selection_seed, seeds, None if study.lr_grid is not None else 'config.study.lr_grid'
  )


def check_selection_seed_key(prefix: str, selection_seed, seeds: Sequence[int], missing_grid: str | None) -> None:
  """The one check of a selection seed, for the LM study, the suite and the grid study: `<prefix>selection_seed`
  (None: the first seed selects, and is reported) needs a rate grid to train (`missing_grid`: None when there is
  one, else what lacks it, named in the error) and must lie outside the reported `seeds`."""
  if selection_seed is None:
    return
  if missing_grid is not None:
    raise config_lib.ConfigError(
        f'{prefix}selection_seed={selection_seed!r} is invalid without {missing_grid}: it is the seed the '
        'learning-rate grid trains at; allowed: None, or a rate grid (e.g. (3e-3, 1e-2, 3e-2)).'
    )
  if int(selection_seed) in seeds:
    raise config_lib.ConfigError(
        f'{prefix}selection_seed={selection_seed!r} is one of the reported seeds {tuple(seeds)}: the rate would be '
        f'chosen on a run the average then reports; allowed: a seed outside {tuple(seeds)} (>= 0), or None (the '
        'first seed selects, and is reported).'
    )


def _parse_rates(key: str, items, labels, strict: bool) -> dict[str, float]:
  rates = {}
  for item in items:
    label, sep, value = str(item).partition(':')
    label = label.strip()
    try:
      rate = float(value) if sep else float('nan')
    except ValueError:
      rate = float('nan')
    if not sep or not rate > 0 or rate == float('inf'):
      raise config_lib.ConfigError(
          f"config.study.{key} entry {item!r} is invalid: allowed: 'label: lr' with a learning rate > 0, "
          "e.g. 'alibi: 3e-3'."
      )
    if label not in labels:
      if not strict:
        continue
      raise config_lib.ConfigError(
          f'config.study.{key} entry {item!r} names no encoder of config.study.encoders; allowed labels: {labels}.'
      )
    if label in rates:
      raise config_lib.ConfigError(f'config.study.{key} gives {label!r} twice.')
    rates[label] = rate
  return rates


def committed_learning_rates(study: Study, entries: Sequence[Entry]) -> dict[str, float]:
  """{label: lr} committed for this study's entries: `config.study.default_learning_rates` for the labels the
  study has, then `config.study.learning_rates` (every label an entry's)."""
  labels = [e.label for e in entries]
  return {
      **_parse_rates('default_learning_rates', study.default_learning_rates, labels, strict=False),
      **_parse_rates('learning_rates', study.learning_rates, labels, strict=True),
  }


def parse_comparisons(study: Study, entries: Sequence[Entry], lengths) -> list[dict]:
  """`config.study.comparisons` as [{'a', 'b', 'statistics'}]: 'A vs B' (every statistic of
  COMPARISON_STATISTICS) or 'A vs B at S' with S an evaluation length, 'train', 'ood' or 'longest'. Labels are
  the study's; a randomized entry's 0..L-1 row is '<label>@0..L-1'."""
  labels = [e.label for e in entries] + [e.label + SEQUENTIAL_SUFFIX for e in entries]
  allowed = (
      f"allowed: 'A vs B' or 'A vs B at S', A and B labels of config.study.encoders ({labels[: len(entries)]}, "
      f"or a randomized one's '<label>{SEQUENTIAL_SUFFIX}'), S an evaluation length {tuple(lengths)} or one of "
      f'{COMPARISON_STATISTICS}'
  )
  parsed = []
  for item in study.comparisons:
    words = str(item).split()
    shape_ok = len(words) in (3, 5) and words[1] == 'vs' and (len(words) == 3 or words[3] == 'at')
    if not shape_ok or words[0] not in labels or words[2] not in labels or words[0] == words[2]:
      raise config_lib.ConfigError(f'config.study.comparisons entry {item!r} is invalid: {allowed}.')
    statistics = list(COMPARISON_STATISTICS)
    if len(words) == 5:
      statistic = words[4]
      if statistic not in COMPARISON_STATISTICS and not (statistic.isdigit() and int(statistic) in lengths):
        raise config_lib.ConfigError(f'config.study.comparisons entry {item!r} has statistic {statistic!r}: {allowed}.')
      statistics = [int(statistic) if statistic.isdigit() else statistic]
    parsed.append({'a': words[0], 'b': words[2], 'statistics': statistics})
  return parsed


def check_protocol(study: Study, entries: Sequence[Entry], lengths) -> None:
  """The study's protocol keys: a grid that is a grid, and no report on the split its choices were made on."""
  if study.lr_grid is not None and (not study.lr_grid or len(set(study.lr_grid)) != len(study.lr_grid)):
    raise config_lib.ConfigError(
        f'config.study.lr_grid={study.lr_grid!r} is invalid: allowed: None (no grid) or a non-empty tuple of '
        "distinct learning rates > 0, e.g. (1e-3, 3e-3, 1e-2) (on the command line: --config.study.lr_grid='(1e-3,3e-3,1e-2)')."
    )
  committed = committed_learning_rates(study, entries)
  if study.split == protocol.SELECTION_SPLIT and (study.lr_grid is not None or committed):
    raise config_lib.ConfigError(
        f'config.study.split={study.split!r} is invalid for this study: its learning rates are chosen on '
        f"'{protocol.SELECTION_SPLIT}' (config.study.lr_grid / config.study.learning_rates), so reporting that split "
        "would report the numbers the choice was made on; allowed: 'test'."
    )
  parse_comparisons(study, entries, lengths)


def random_position_limits(base: config_lib.Config, entries: Sequence[Entry]):
  """(entry, spec, max_position) for every spec an entry trains or evaluates with at random positions (a
  randomized encoder): the bound its evaluation, as published, draws positions below."""
  for entry in entries:
    for spec in dict.fromkeys(s for s in (entry.spec, entry.eval_spec) if s is not None):
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        limit = config_lib.train_position_limit(base.derive(encoder=spec).encoder)
      if limit is not None:
        yield entry, spec, limit


def check_random_positions(base: config_lib.Config, entries: Sequence[Entry]) -> None:
  """An encoder trained at random positions is evaluated as published, at ordered random positions from [0,
  max_position) (`protocol`), so its max_position must hold the longest evaluation window: refused up front,
  not when that length is reached."""
  longest = max(int(n) for n in base.eval.lengths)
  for entry, spec, limit in random_position_limits(base, entries):
    if limit < longest:
      raise config_lib.ConfigError(
          f'config.study.encoders entry {entry.label!r} ({spec!r}): max_position={limit} is below the longest '
          f'evaluation length, {longest} (config.eval.lengths): evaluated as published, at ordered random '
          f'positions from [0, {limit}), it cannot place a window of {longest}; allowed: max_position >= '
          f'{longest} at training, or config.eval.lengths up to {limit}.'
      )


def metric_name(base: config_lib.Config) -> tuple[str, bool]:
  """(metric, lower_is_better) of a run, as its data class states them (bits per character for a corpus,
  accuracy for tasks), read without loading the data."""
  data_class = data_sources.data_class(base)
  return data_class.metric, data_class.lower_is_better


def train_length(base: config_lib.Config) -> int:
  """The longest training length (the reference point of every ratio)."""
  return base.data.train_length
