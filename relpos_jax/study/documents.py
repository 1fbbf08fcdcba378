"""Per-document totals of a trained language model: the input of the document bootstrap.

Why: a study's seed interval holds the scored text fixed; `relpos_jax.study.stats.document_bootstrap` resamples
the test documents instead, and needs each encoder's total bits and characters on each document. The
evaluation loop sums over the whole set (`relpos_jax.train.loop.evaluate_set`); asked with `token_losses=True` it
also hands back each target's loss, and a study passes those here (`nats_by_batch`) so that the set is scored
once (otherwise this module scores it again). The losses are summed by the document each target lies in
(`relpos_jax.data.bpe.document_ids` of the target's first byte; a window whose scored tail crosses a document
boundary splits between the two). Characters are the targets' `characters` (BPE) or `BYTE_CHARS` (bytes), so the
totals over all documents give exactly the loop's `bits_per_char`.

Positions are 0..L-1 (an encoder that draws random positions is refused: its metric averages over draws).
"""

from __future__ import annotations

import jax
import numpy as np

from relpos_jax.data import bpe
from relpos_jax.train import loop, step
from relpos_jax.train.objectives import token_cross_entropy
from relpos_jax.train.state import split_model

__all__ = ['document_totals', 'scored_targets', 'sequential_positions', 'sparse_totals']


def sequential_positions(model) -> bool:
  """Whether `model` is evaluated at positions 0..L-1 (the only case `document_totals` scores): False for an
  encoder that draws random positions, whose metric averages over draws."""
  return loop.EvalPositions.of(model, 1, 0).encoder is None


def sparse_totals(totals: dict) -> dict:
  """`document_totals` as a result file stores it: the documents some window scored ('documents', their
  indices in the split), their 'bits' and 'characters' (lists), and 'num_documents' (all of the split's). The
  documents no window reached hold zeros and are left out: the bootstrap leaves them out too."""
  keep = np.flatnonzero(np.asarray(totals['characters']) > 0)
  return {
      'num_documents': int(totals['num_documents']),
      'documents': [int(k) for k in keep],
      'bits': [float(x) for x in np.asarray(totals['bits'])[keep]],
      'characters': [float(x) for x in np.asarray(totals['characters'])[keep]],
  }


def scored_targets(model, data, length: int, split: str = 'test', *, nats_by_batch=None) -> dict:
  """Every scored target of `data.eval_set(length, split)`, flat in the set's order: 'positions' (int64: the
  split position of the target's first byte, the same target at every length when the windows share their
  scored tails), 'nats' (its loss), 'characters' and 'documents' (the document it lies in), float64 / int64
  arrays of one entry per target, and 'num_documents'. What `document_totals` sums, and what the key-token loss
  (`relpos_jax.study.key_tokens`) compares across lengths.

  nats_by_batch: each batch's (rows, length) per-target losses from an evaluation pass already made over this
  set at 0..L-1 (`relpos_jax.train.loop.evaluate_set(..., token_losses=True).token_nll`): used instead of
  scoring the set again."""
  if not sequential_positions(model):
    raise ValueError('document_totals scores positions 0..L-1; an encoder drawing random positions is not supported')
  parts, params = split_model(model)

  @jax.jit
  def losses(params, rest, batch):
    logits = step.forward(parts.graphdef, params, rest, batch, deterministic=True, use_padding_mask=data.uses_padding)
    return token_cross_entropy(logits, batch['targets'])

  split_bytes = data.corpus.tokens(split)
  documents = int(np.count_nonzero(split_bytes == bpe.SEPARATOR_BYTE)) + 1
  positions = data.target_positions(int(length), split)
  batches = list(data.eval_set(int(length), split))
  if nats_by_batch is not None and [np.shape(n) for n in nats_by_batch] != [b['targets'].shape for b in batches]:
    raise ValueError(
        f'document_totals: nats_by_batch has shapes {[np.shape(n) for n in nats_by_batch]}; allowed: one per batch '
        f"of the evaluation set at length {length}, shaped as its targets {[b['targets'].shape for b in batches]}."
    )
  parts_of = {'positions': [], 'nats': [], 'characters': [], 'documents': []}
  row = 0
  for index, batch in enumerate(batches):
    if nats_by_batch is not None:
      nats = np.asarray(nats_by_batch[index], np.float64)
    else:
      nats = np.asarray(
          losses(params, parts.rest, {k: v for k, v in batch.items() if k != 'position_mask'}), np.float64
      )
    mask = np.asarray(batch['loss_mask'], np.float64)
    chars = batch['characters'] if 'characters' in batch else bpe.BYTE_CHARS[batch['targets']]
    real = int(np.count_nonzero(mask.any(axis=1)))  # the filler rows of the last batch are all masked
    rows = slice(row, row + real)
    scored = mask[:real] > 0
    parts_of['positions'].append(np.asarray(positions[rows], np.int64)[scored])
    parts_of['nats'].append(nats[:real][scored])
    parts_of['characters'].append(np.asarray(chars, np.float64)[:real][scored])
    parts_of['documents'].append(bpe.document_ids(split_bytes, positions[rows])[scored].astype(np.int64))
    row += real
  flat = {key: np.concatenate(values) if values else np.zeros(0) for key, values in parts_of.items()}
  return {**flat, 'num_documents': documents}


def document_totals(model, data, length: int, split: str = 'test', *, nats_by_batch=None) -> dict:
  """{'bits', 'characters' (float64 arrays, one entry per document of `split`), 'tokens', 'num_documents'}: the
  scored targets of `data.eval_set(length, split)` summed by document (module docstring; `scored_targets` for
  `nats_by_batch`)."""
  targets = scored_targets(model, data, length, split, nats_by_batch=nats_by_batch)
  documents = targets['num_documents']
  bits = np.bincount(targets['documents'], targets['nats'] / np.log(2.0), minlength=documents)
  characters = np.bincount(targets['documents'], targets['characters'], minlength=documents)
  return {'bits': bits, 'characters': characters, 'tokens': float(len(targets['nats'])), 'num_documents': documents}
