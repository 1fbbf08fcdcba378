"""``cope_counting``: the counting task of Golovneva et al. 2024 ("Contextual Position Encoding: Learning to
Count What's Important", arXiv 2405.18719), transcribed from its reference code, a causal task.

Reference code (facebookresearch/RAM, ``projects/cope``): the generator ``scripts/count_data_gen.py``, the
tokenizer ``src/data/tokenizer.py`` (``SimpleTokenizer``), the sequence layout ``src/data/data_collator.py``
(``DataCollatorForDecoder``) and the loss ``src/utils/world.py`` (``--train-on answer``); ``run.sh`` trains
with ``--nvars 3`` and ``--nvars 5``.

A context is a program of ``n`` statements over ``num_vars`` variables (the reference's ``nvars``: the first
letters a, b, c, ...), then a question that prints one variable; the answer is its value::

    a = 0 ; pass; pass; a ++; b = 0 ; pass; a ++; b ++; pass; print a   ->   2

Each statement is drawn as ``generate_statement`` draws it: an operation with weights set 1, pass 50,
increment 7 (``OP_WEIGHTS``); ``set`` picks a variable uniformly among all ``num_vars`` and sets it to 0 (a
variable may be set again, which resets it); ``increment`` picks one uniformly among the variables already set
and adds 1, and fails if none is set or the value would exceed ``max_value`` (``MAX_VAL = 10``); a failed draw
is drawn again (a new operation, not only a new variable). The question prints a variable drawn uniformly among
those set; a program that set none is thrown away and drawn again whole (``generate_sample``). The counts a
model must track are therefore sparse: about 1 statement in 8 changes a value, the rest are ``pass;``.

Differences from the reference, all in what is held fixed, none in the distribution given ``n``:

* The length axis ``n`` is the number of statements, fixed per batch (``relpos_jax.data.buckets`` draws it),
  where the reference draws ``nsteps ~ U{3..max_steps}`` (``--max-steps 512``) per example. Because the
  reference redraws a whole sample (and its ``nsteps``) when no variable was set, its ``nsteps`` is not quite
  uniform: P(kept | n) = 1 - (50/51)^n, 0.06 at n = 3, 0.9999 at n = 512. Given ``n`` the two agree.
* The reference gives up after 100 failed draws of a statement and 1,000 of a sample (``ValueError``);
  here draws repeat until they succeed, the same conditional distribution (a statement can only fail on an
  increment, so 100 failures in a row have probability below 0.13^100; a sample at n = 1 keeps 1 in 51, so
  1,000 failures have probability below 3e-9).
* The reference trains 100 epochs over a fixed file of 10,000 samples; a task here draws fresh examples.

Tokens are the words of ``SimpleTokenizer.encode`` (lower case, split on spaces; it splits off ``.``, ``,``
and ``?`` only, so ``pass;`` and ``++;`` stay one word while ``a = 0 ;`` is four); the reference numbers
words by first appearance in its data, here the ids are fixed:

    values 0 .. max_value   ids 0 .. max_value      (the ``0`` of ``a = 0 ;`` is the value 0)
    ``=`` ``;`` ``pass;`` ``++;`` ``print``           ids V, V + 1, V + 2, V + 3, V + 4   (V = max_value + 1)
    variables a, b, ...     ids V + 5 ..
    pad                     ``vocab_size - 1``

Statements take 4 (set), 1 (pass) or 2 (increment) tokens, so examples of one ``n`` differ in length:
``sequences`` right-pads each one with ``pad_id``, as the reference's collator pads (``pad_right``). The
reference adds no BOS (``SimpleTokenizer.encode`` ignores ``add_bos``). ``sample`` returns teacher-forcing
arrays of length ``total_length(n) = 4n + 2`` (the longest example, every statement a set, minus one):
``inputs = seq[:-1]``, ``targets = seq[1:]`` over an example's ``m - 1`` input positions (``m`` its tokens;
past them ``pad_id`` and 0), ``padding_mask`` True at those positions, and ``loss_mask`` = ``accuracy_mask`` = 1 at the one position whose target is
the answer (``--train-on answer``: the reference's loss and error count only that token). One scored token:
per-token accuracy equals exact match.
"""

from __future__ import annotations

import dataclasses
import string

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, CausalTask

# count_data_gen.py's OP_WEIGHTS, in its order (random.choices draws by these cumulative weights).
SET, PASS, INCREMENT = range(3)
OP_WEIGHTS = {SET: 1, PASS: 50, INCREMENT: 7}
VARIABLE_NAMES = string.ascii_lowercase  # count_data_gen.py's VARIABLE_NAMES
WORDS = ('=', ';', 'pass;', '++;', 'print')


@dataclasses.dataclass(frozen=True)
class CopeCounting(CausalTask):
  """``n`` statements (set / pass / increment) over ``num_vars`` variables, then ``print x``; the answer is
  x's value. See the module docstring for the generator, the tokens and the batch."""

  name = 'cope_counting'
  reference = (
      'Golovneva et al. 2024 (CoPE), counting task: facebookresearch/RAM projects/cope/scripts/count_data_gen.py'
  )
  num_vars: int = 3
  max_value: int = 10

  def __post_init__(self):
    validation.positive_int('task', 'num_vars', self.num_vars, maximum=len(VARIABLE_NAMES))
    validation.positive_int('task', 'max_value', self.max_value)

  # ------------------------------------------------------------------------------------------- vocabulary
  def word_id(self, word: str) -> int:
    """The id of one word of the reference's text (a value, ``=``, ``;``, ``pass;``, ``++;``, ``print`` or a
    variable name)."""
    v = self.max_value + 1
    if word.isdigit() and int(word) <= self.max_value:
      return int(word)
    if word in WORDS:
      return v + WORDS.index(word)
    if word in VARIABLE_NAMES[: self.num_vars]:
      return v + len(WORDS) + VARIABLE_NAMES.index(word)
    raise ValueError(
        f'task cope_counting: word={word!r} is invalid; allowed: 0..{self.max_value}, {", ".join(WORDS)} or a '
        f'variable of {VARIABLE_NAMES[: self.num_vars]!r}.'
    )

  def encode(self, text: str) -> list[int]:
    """Ids of a text written as the reference writes it (``SimpleTokenizer.encode``: lower case, split on
    spaces), e.g. ``encode('a = 0 ; a ++; print a 1')``."""
    return [self.word_id(w) for w in text.strip().lower().split()]

  def decode(self, ids) -> str:
    """The reference's text of a row of ids (padding dropped)."""
    v = self.max_value + 1
    words = []
    for i in np.asarray(ids).tolist():
      if i == self.pad_id:
        continue
      if i < v:
        words.append(str(i))
      elif i < v + len(WORDS):
        words.append(WORDS[i - v])
      else:
        words.append(VARIABLE_NAMES[i - v - len(WORDS)])
    return ' '.join(words)

  @property
  def pad_id(self) -> int:
    return self.max_value + 1 + len(WORDS) + self.num_vars

  @property
  def vocab_size(self) -> int:
    return self.pad_id + 1

  def output_length(self, n: int) -> int:
    return 1

  def total_length(self, n: int) -> int:
    return 4 * n + 2

  @property
  def metadata(self) -> dict:
    return {**super().metadata, 'op_weights': {'set': 1, 'pass': 50, 'increment': 7}}

  # ------------------------------------------------------------------------------------------- generator
  def _program(self, rng: np.random.Generator, n: int) -> list[int]:
    """One example's ids (context, question, answer), drawn as ``generate_sample`` draws it given n."""
    k, cap, v = self.num_vars, self.max_value, self.max_value + 1
    assign, semicolon, pass_, plus, print_ = (v + i for i in range(len(WORDS)))
    var0 = v + len(WORDS)
    total = sum(OP_WEIGHTS.values())
    while True:  # generate_sample: redraw the whole program until some variable is set
      values = [-1] * k  # -1: not set yet
      ids = []
      for _ in range(n):
        while True:  # generate_statement: redraw the operation until one succeeds
          u = rng.random() * total
          op = SET if u < OP_WEIGHTS[SET] else PASS if u < OP_WEIGHTS[SET] + OP_WEIGHTS[PASS] else INCREMENT
          if op == SET:
            x = int(rng.integers(k))
            values[x] = 0
            ids += [var0 + x, assign, 0, semicolon]
            break
          if op == PASS:
            ids.append(pass_)
            break
          live = [i for i in range(k) if values[i] >= 0]
          if not live:
            continue  # GenerationFail: no variable to increment
          x = live[int(rng.integers(len(live)))]
          if values[x] + 1 > cap:
            continue  # GenerationFail: above MAX_VAL
          values[x] += 1
          ids += [var0 + x, plus]
          break
      live = [i for i in range(k) if values[i] >= 0]
      if live:  # Ops.PRINT: a variable that was set, and its value
        x = live[int(rng.integers(len(live)))]
        return ids + [print_, var0 + x, values[x]]

  def sequences(self, rng: np.random.Generator, batch_size: int, length: int) -> np.ndarray:
    """Full sequences (B, 4n + 3): each example's ids, right-padded with ``pad_id``."""
    batch_size, n = self._check_args(rng, batch_size, length)
    seq = np.full((batch_size, 4 * n + 3), self.pad_id, np.int32)
    for b in range(batch_size):
      ids = self._program(rng, n)
      seq[b, : len(ids)] = ids
    return seq

  def sample(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    seq = self.sequences(rng, batch_size, length)
    real = np.sum(seq != self.pad_id, axis=1)  # tokens of each example, the answer included
    t = self.total_length(int(length))
    columns = np.arange(t)[None, :]
    answer = (real - 2)[:, None]  # the target position whose target is the answer (input: the printed variable)
    mask = (columns == answer).astype(np.float32)
    inside = columns < (real - 1)[:, None]  # an example of m tokens has m - 1 inputs (its answer is no input)
    return {
        'inputs': np.where(inside, seq[:, :-1], self.pad_id).astype(np.int32),
        'targets': np.where(inside, seq[:, 1:], 0).astype(np.int32),
        'loss_mask': mask,
        'accuracy_mask': mask.copy(),
        'padding_mask': inside,
    }

  def answers(self, batch: Batch) -> np.ndarray:
    """Each example's answer (the value printed), read from a batch."""
    return np.sum(batch['targets'] * batch['accuracy_mask'], axis=1).astype(np.int32)
