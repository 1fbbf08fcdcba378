"""How a study evaluates one trained run: the evaluation part of the protocol every study result records
(docs/guide, "Words": a protocol is everything besides the encoder that decides a number).

    record = evaluate_run(model, data, lengths=[64, ..., 1024], split='test', train_length=64, seed=0,
                          draws=4, sequential_row=True)

* **Same targets at every length** (corpus): every evaluation length scores one identical set of target
  bytes (windows ending at common anchors, scored tail T: `relpos_jax.train.inputs`); each length's scored
  set is fingerprinted (`scored_sets`), and `same_targets` says whether the fingerprints are all equal.
* **Held-out split**: the numbers a study reports are read on `split` ('test' by default); every choice
  (the learning rate of a grid) is read on 'validation' at the training length only (`selection`).
* **Randomized positions evaluated as published** (Ruoss et al. 2023): an encoder trained on random
  positions is evaluated on ordered random positions from [0, max_position), averaged over `draws` draws
  (`relpos_jax.train.loop.EvalPositions`); with `sequential_row` the same run is also evaluated at 0..L-1
  (`sequential`), the labeled second row of the report.
* **Loss against position**: at the longest length, the mean loss of the tokens at each position of the
  window (the whole window scored), binned log-spaced in the context each token sees (`position_curve`).
* **Beyond chance**: a run whose metric is not finite, or whose loss is more than twice that of uniform
  guessing (16 bits per byte; at the training length, and for a language model at any length), is marked
  diverged and kept out of the means (`beyond_chance`). An untrained model scores about 1.2x uniform, the
  worst trained ones here 0.5x; blown-up runs score thousands of times more.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from relpos_jax.train import loop

SELECTION_SPLIT = 'validation'
SPLITS = ('validation', 'test')
# Twice the loss of guessing uniformly: far beyond what an untrained model scores (about 1.2x).
CHANCE_FACTOR = 2.0
BINS_PER_OCTAVE = 2


def position_curve(position_loss: np.ndarray, position_tokens: np.ndarray, in_bits: bool) -> dict:
  """The per-position loss binned log-spaced in context: position p (0-based) of a window predicts its
  token from p + 1 tokens of context; bin k holds the contexts in (2^((k-1)/2), 2^(k/2)] (BINS_PER_OCTAVE
  bins per doubling, closed above so that a power-of-two window length ends a full bin).

  Returns {'context_from': [...], 'context_to': [...] (inclusive), 'loss': [...] (nats, pooled over the
  tokens of the bin), 'bits_per_char': [...] (language models), 'tokens': [...]}; empty bins are left out.
  """
  loss = np.asarray(position_loss, np.float64)
  tokens = np.asarray(position_tokens, np.float64)
  context = np.arange(1, loss.size + 1)
  bins = np.ceil(np.log2(context) * BINS_PER_OCTAVE - 1e-9).astype(int)
  out = {'context_from': [], 'context_to': [], 'loss': [], 'tokens': []}
  for k in np.unique(bins):
    chosen = (bins == k) & (tokens > 0)
    if not chosen.any():
      continue
    out['context_from'].append(int(context[chosen].min()))
    out['context_to'].append(int(context[chosen].max()))
    out['loss'].append(float(np.sum(loss[chosen] * tokens[chosen]) / np.sum(tokens[chosen])))
    out['tokens'].append(float(np.sum(tokens[chosen])))
  if in_bits:
    out['bits_per_char'] = [v / math.log(2.0) for v in out['loss']]
  return out


def beyond_chance(loss: float | None, num_classes: int) -> bool:
  """Whether `loss` (nats per token) is not finite or more than CHANCE_FACTOR times uniform guessing's."""
  return loss is None or not math.isfinite(loss) or loss > CHANCE_FACTOR * math.log(num_classes)


def evaluate_run(
    model,
    data,
    *,
    lengths: Sequence[int],
    split: str,
    train_length: int,
    metric: str,
    seed: int,
    draws: int,
    sequential_row: bool = True,
    selection: bool = True,
    keep_token_losses: Sequence[int] = (),
    token_losses_out: dict | None = None,
) -> dict:
  """One trained run evaluated by the study's protocol (module docstring); JSON-able.

  Keys: split, positions (how positions were chosen), by_length / loss_by_length ({str(length): value}
  on `split`; for tasks also exact_match_by_length, the per-sequence accuracy), scored_sets ({str(length):
  {split, num_scored, fingerprint, protocol, ...}}), same_targets,
  position_curve (at the longest length), selection ({split: 'validation', length, loss, metric} at the
  training length; `selection=False` leaves it out), and for an encoder evaluated at random positions with
  `sequential_row`, `sequential` (the same at 0..L-1).

  keep_token_losses, token_losses_out: for the lengths in `keep_token_losses`, evaluated on `split` at positions
  0..L-1, `token_losses_out[length]` receives that pass's `Evaluation.token_nll` (each batch's per-target
  nats), so a caller's per-document totals sum the very losses the metric summed instead of a second pass.
  """
  lengths = [int(n) for n in lengths]
  longest = max(lengths)
  kept_lengths = {int(n) for n in keep_token_losses}

  def at(positions, which) -> dict:
    by_length, losses, exact, curve = {}, {}, {}, None
    for n in which:
      keep = token_losses_out is not None and n in kept_lengths and positions.encoder is None
      evaluation = loop.evaluate_set(model, data, n, split=split, positions=positions, token_losses=keep)
      if keep:
        token_losses_out[n] = evaluation.token_nll
      by_length[str(n)] = evaluation.metrics.get(metric)
      losses[str(n)] = evaluation.metrics['loss']
      exact[str(n)] = evaluation.metrics.get('exact_match')
      if n == longest:
        curve = position_curve(evaluation.position_loss, evaluation.position_tokens, data.position_curve_in_bits)
    out = {'by_length': by_length, 'loss_by_length': losses, 'position_curve': curve}
    if any(v is not None for v in exact.values()):  # tasks: per-sequence accuracy beside the per-token metric
      out['exact_match_by_length'] = exact
    return out

  positions = loop.EvalPositions.of(model, draws, seed)
  record = {'split': split, 'positions': positions.describe(), 'position_draws': positions.draws}
  record.update(at(positions, lengths))
  scored = {str(n): data.scored_set(n, split) for n in lengths}
  record['scored_sets'] = scored
  record['same_targets'] = len({s['fingerprint'] for s in scored.values()}) == 1
  if selection:
    record['selection'] = _selection(model, data, train_length, metric, positions)
  if positions.random and sequential_row:
    sequential = loop.EvalPositions.of(model, draws, seed, sequential=True)
    record['sequential'] = {'positions': sequential.describe(), 'position_draws': 1, **at(sequential, lengths)}
  return record


def _selection(model, data, train_length: int, metric: str, positions) -> dict:
  evaluation = loop.evaluate_set(model, data, int(train_length), split=SELECTION_SPLIT, positions=positions)
  return {
      'split': SELECTION_SPLIT,
      'length': int(train_length),
      'loss': evaluation.metrics['loss'],
      metric: evaluation.metrics.get(metric),
  }


def evaluate_selection(model, data, *, train_length: int, metric: str, seed: int, draws: int) -> dict:
  """A selection seed's run: `selection` only (what a grid chooses on), with the positions it was read at."""
  positions = loop.EvalPositions.of(model, draws, seed)
  return {
      'positions': positions.describe(),
      'position_draws': positions.draws,
      'selection': _selection(model, data, train_length, metric, positions),
  }


def diverged_marker(record: dict, *, num_classes: int, every_length: bool, train_length: int, step: int) -> dict | None:
  """A 'diverged' marker for a run whose evaluation is not finite or beyond chance (None if it is sound):
  the selection loss at the training length, and the loss at the training length or, with `every_length` (the
  data's `diverged_at_every_length`: a language model, whose every length is a prediction of the same kind of
  text), at every length."""
  checked = {}
  if 'selection' in record:
    checked[f'validation loss at {train_length}'] = record['selection']['loss']
  losses = record.get('loss_by_length', {})
  for n, value in losses.items():
    if every_length or int(n) == int(train_length):
      checked[f'{record["split"]} loss at {n}'] = value
  bad = {what: value for what, value in checked.items() if beyond_chance(value, num_classes)}
  if not bad:
    return None
  chance = math.log(num_classes)
  return {
      'step': int(step),
      'message': (
          f'evaluation beyond chance: {", ".join(f"{k} = {v}" for k, v in bad.items())} (uniform guessing '
          f'scores {chance:.3f} nats; more than {CHANCE_FACTOR * chance:.3f} or a non-finite value marks '
          'the run as diverged, kept out of the means)'
      ),
      'beyond_chance': True,
  }
