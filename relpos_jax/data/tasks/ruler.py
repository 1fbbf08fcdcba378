"""Two RULER tasks at token level for causal models (Hsieh et al. 2024, "RULER: What's the Real Context Size of
Your Long-Context Language Models?", COLM 2024): ``variable_tracking`` (multi-hop tracing, a retrieval that
follows a chain) and ``common_words`` (common-word extraction, an aggregation over the whole context).

Both follow the generators of the reference code (NVIDIA/RULER, scripts/data/synthetic/variable_tracking.py and
common_words_extraction.py, read at its newest snapshot), with one token per word or sentence, as
``passkey_tokens`` does for the passkey template, so that their length axes fit a CPU. RULER scores both with
``string_match_all``: the fraction of the reference words that appear anywhere in the model's generated answer,
in any order. A causal model scored by teacher forcing needs one answer order; each task fixes one (below) and
scores the answer tokens by per-token accuracy (each answer word, at its place) and exact match (all of them).

Teacher-forcing layout as ``recall``: ``inputs = seq[:-1]``, ``targets = seq[1:]``, ``loss_mask`` =
``accuracy_mask`` = 1 exactly where the target is an answer token. Every ``sample`` draws only from its
Generator, so a seed reproduces a batch.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, CausalTask


def _teacher_forcing(seq: np.ndarray, num_answers: int) -> Batch:
  """The last ``num_answers`` tokens of each row are the answer: scored where they are targets."""
  mask = np.zeros(seq[:, 1:].shape, np.float32)
  mask[:, -num_answers:] = 1.0
  return {'inputs': seq[:, :-1].copy(), 'targets': seq[:, 1:].copy(), 'loss_mask': mask, 'accuracy_mask': mask.copy()}


def _distinct(rng: np.random.Generator, batch_size: int, pool: int, count: int) -> np.ndarray:
  """(B, count) ids, distinct within each row, drawn uniformly from [0, pool)."""
  return np.argsort(rng.random((batch_size, pool)), axis=1)[:, :count].astype(np.int32)


@dataclasses.dataclass(frozen=True)
class VariableTracking(CausalTask):
  """RULER's variable tracking: chains of assignments hidden in noise; name every variable holding a value.

  RULER's generator (its `vt` default: 1 chain, 4 hops, the "noise" haystack): chain c assigns a fresh value to
  a first variable and then passes it along, ``VAR X1 = 12345``, ``VAR X2 = VAR X1``, ..., ``VAR X5 = VAR X4``
  (num_hops + 1 distinct variables); each chain's statements are inserted in order at random places among
  ``n`` noise sentences; the question gives the first chain's value and the answer is every variable of that
  chain. Other chains (``num_chains`` > 1) are distractors holding other values.

  Tokens: variable names ``[0, num_names)``, values ``[num_names, num_names + num_values)``, then NOISE (one
  filler sentence), VAR, QUERY and pad. A statement is ``VAR name source`` (source a value, or a name: the
  hop). Sequence::

      noise and statements (n NOISE + 3 (num_hops + 1) num_chains tokens)  QUERY value  X1 X2 .. X(hops+1)

  Answer order: the chain's order (the variable assigned the value, then each hop), so a model follows the
  chain; RULER accepts any order. The names of all chains are distinct and so are the chains' values, so the
  answer is determined (RULER draws 5-letter names and 5-digit values, where collisions are negligible).
  ``sequence_length(n) = n + 3 (num_hops + 1) num_chains + 2 + num_hops + 1``.
  """

  name = 'variable_tracking'
  reference = 'Hsieh et al. 2024, RULER (variable tracking), one token per word or sentence'
  num_chains: int = 1
  num_hops: int = 4
  num_names: int = 32
  num_values: int = 32

  def __post_init__(self):
    validation.positive_int('task', 'num_chains', self.num_chains)
    validation.positive_int('task', 'num_hops', self.num_hops)
    validation.positive_int('task', 'num_values', self.num_values, minimum=self.num_chains)
    needed = self.num_chains * (self.num_hops + 1)
    validation.require(
        validation.is_int(self.num_names) and self.num_names >= needed,
        'variable_tracking',
        'num_names',
        self.num_names,
        f'an int >= num_chains * (num_hops + 1) = {needed} (every variable of every chain has its own name)',
    )

  @property
  def noise_id(self) -> int:
    return self.num_names + self.num_values

  @property
  def var_id(self) -> int:
    return self.noise_id + 1

  @property
  def query_id(self) -> int:
    return self.noise_id + 2

  @property
  def pad_id(self) -> int:
    return self.noise_id + 3

  @property
  def vocab_size(self) -> int:
    return self.noise_id + 4

  def output_length(self, n: int) -> int:
    return self.num_hops + 1

  def statements_length(self) -> int:
    return 3 * (self.num_hops + 1) * self.num_chains

  def sequence_length(self, n: int) -> int:
    return n + self.statements_length() + 2 + self.output_length(n)

  def total_length(self, n: int) -> int:
    return self.sequence_length(n) - 1

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    batch_size, n = self._check_args(rng, batch_size, length)
    hops = self.num_hops + 1
    names = _distinct(rng, batch_size, self.num_names, self.num_chains * hops).reshape(
        batch_size, self.num_chains, hops
    )
    values = self.num_names + _distinct(rng, batch_size, self.num_values, self.num_chains)
    seq = np.empty((batch_size, self.sequence_length(n)), np.int32)
    for row in range(batch_size):
      # Each statement, then where it goes: statement s of chain c at a random slot among the noise, the slots
      # of one chain in increasing order (RULER's `positions = sorted(random.sample(...))`), so a chain reads
      # in order.
      statements, slots = [], []
      for c in range(self.num_chains):
        chain = names[row, c]
        sources = [values[row, c], *chain[:-1]]
        statements += [[self.var_id, int(chain[h]), int(sources[h])] for h in range(hops)]
        slots += sorted(rng.integers(0, n + 1, size=hops).tolist())
      # Stable order: statements at one slot keep their chain order.
      order = np.argsort(np.asarray(slots), kind='stable')
      context, cursor = [], 0
      for i in order:
        context += [self.noise_id] * (slots[i] - cursor)
        cursor = slots[i]
        context += statements[i]
      context += [self.noise_id] * (n - cursor)
      seq[row] = [*context, self.query_id, int(values[row, 0]), *names[row, 0].tolist()]
    return _teacher_forcing(seq, hops)


@dataclasses.dataclass(frozen=True)
class CommonWords(CausalTask):
  """RULER's common-word extraction: a list of words where a few occur much more often; name those.

  RULER's generator (`get_example`): ``num_words`` distinct words, the first ``num_cw`` "common" ones repeated
  ``freq_cw`` times and the others ``freq_ucw`` times, shuffled; the answer is the common words. Its
  short-context setting (max_seq_length < 4096) repeats them 6 and 1 times, its long one 30 and 3, with 10
  common words; the length axis is the number of words, so the common words' count stays fixed while the
  uncommon ones grow around them.

  Here the length axis ``n`` is the number of distinct uncommon words, drawn with the ``num_common`` common ones
  from a vocabulary of ``num_words`` word tokens (so ``num_common + n <= num_words``: a longer list is
  refused, naming ``num_words``). Sequence::

      the shuffled list (num_common freq_common + n freq_uncommon tokens)  QUERY  c_1 .. c_num_common

  Answer order: ascending token id (a set written canonically: aggregation, not a position lookup); RULER
  accepts any order. RULER numbers the list ("1. word 2. word ..."); the numbers carry nothing here and are
  left out. Defaults: RULER's short-context frequencies and 10 common words.
  ``sequence_length(n) = num_common freq_common + n freq_uncommon + 1 + num_common``.
  """

  name = 'common_words'
  reference = 'Hsieh et al. 2024, RULER (common words extraction), one token per word'
  num_common: int = 10
  freq_common: int = 6
  freq_uncommon: int = 1
  num_words: int = 512

  def __post_init__(self):
    validation.positive_int('task', 'num_common', self.num_common)
    validation.positive_int('task', 'freq_uncommon', self.freq_uncommon)
    validation.require(
        validation.is_int(self.freq_common) and self.freq_common > self.freq_uncommon,
        'common_words',
        'freq_common',
        self.freq_common,
        f'an int > freq_uncommon={self.freq_uncommon} (else the common words are not the most frequent)',
    )
    validation.positive_int('task', 'num_words', self.num_words, minimum=self.num_common + 1)

  @property
  def query_id(self) -> int:
    return self.num_words

  @property
  def pad_id(self) -> int:
    return self.num_words + 1

  @property
  def vocab_size(self) -> int:
    return self.num_words + 2

  def output_length(self, n: int) -> int:
    return self.num_common

  def list_length(self, n: int) -> int:
    return self.num_common * self.freq_common + n * self.freq_uncommon

  def sequence_length(self, n: int) -> int:
    return self.list_length(n) + 1 + self.num_common

  def total_length(self, n: int) -> int:
    return self.sequence_length(n) - 1

  def check_length(self, n: int) -> None:
    """Raises ValueError naming num_words when ``n`` uncommon words do not fit beside the common ones."""
    validation.require(
        self.num_common + n <= self.num_words,
        'common_words',
        'num_words',
        self.num_words,
        f'an int >= num_common + length = {self.num_common} + {n} (each word of the list is distinct; raise '
        'num_words or shorten the length)',
    )

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    batch_size, n = self._check_args(rng, batch_size, length)
    self.check_length(n)
    words = _distinct(rng, batch_size, self.num_words, self.num_common + n)
    common, uncommon = words[:, : self.num_common], words[:, self.num_common :]
    listed = np.concatenate(
        [np.repeat(common, self.freq_common, axis=1), np.repeat(uncommon, self.freq_uncommon, axis=1)], axis=1
    )
    listed = np.take_along_axis(listed, np.argsort(rng.random(listed.shape), axis=1), axis=1)
    query = np.full((batch_size, 1), self.query_id, np.int32)
    seq = np.concatenate([listed, query, np.sort(common, axis=1)], axis=1).astype(np.int32)
    return _teacher_forcing(seq, self.num_common)
