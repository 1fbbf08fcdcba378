"""The key-token loss: the loss on the tokens that need the long context (Fang et al. 2025, "What is Wrong with
Perplexity for Long-context Language Modeling?", ICLR 2025: LongPPL).

Why: a flat average loss at long context can come from a model that attends locally; the tokens whose
prediction the long context improves are few, and the average hides them. LongPPL scores only those.

Definition (the paper, and its reference code PKU-ML/LongPPL, `find_key_token` / `compute_longppl`). A stated
reference model r scores each token x_i twice: with the long context (the whole window) and with a short one
(truncated to the last K tokens). With the natural log,

    LSD_i = log p_r(x_i | long) - log p_r(x_i | short)     long-short difference
    LCL_i = log p_r(x_i | long)                             long-context likelihood
    key_i = LSD_i > alpha  and  LCL_i > beta,               alpha = 2, beta = -2 (the paper's thresholds)

and the key-token loss of an evaluated model m is its mean loss over the key tokens, -1/|key| sum_key log
p_m(x_i | long); LongPPL = exp of it. The key tokens depend on the reference only, so every model is scored on the
same tokens. The paper's reference is a strong pretrained LM (Qwen2-72B-Instruct; the code defaults to
Llama-3.1-8B) with K = 4,096; no pretrained model shares this project's byte vocabulary, so the reference is a
named trained run of the study itself (`reference`), stated beside every number.

Here a study's windows of every length end at common anchors and score the same tail of targets, so a target is
one split position at every length: the short context is the reference length's window (`short_length`, the
long-context studies' 1,024 bytes), the long context each longer window. The thresholds are in nats as the
paper's; the losses reported are in bits (per key token, = bits per character for bytes), with per-document
totals for the document bootstrap. The inputs are the records of `relpos_jax.study.documents.scored_targets`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from relpos_jax import validation

# The paper's thresholds (nats): LSD > ALPHA and LCL > BETA.
ALPHA = 2.0
BETA = -2.0
WHO = 'key tokens'


def key_token_mask(long_nats, short_nats, *, alpha: float = ALPHA, beta: float = BETA) -> np.ndarray:
  """Bool, one per target: the reference's losses at long and short context make it a key token
  (short - long > alpha, and -long > beta)."""
  long_nats, short_nats = np.asarray(long_nats, np.float64), np.asarray(short_nats, np.float64)
  validation.require(
      long_nats.shape == short_nats.shape,
      WHO,
      'short_nats',
      short_nats.shape,
      f'the shape of long_nats {long_nats.shape}',
  )
  return ((short_nats - long_nats) > alpha) & (-long_nats > beta)


def _check_same_targets(targets: Mapping, positions: np.ndarray, what: str) -> None:
  """Windows of every length that end at common anchors and score one tail list the same targets in the same
  order; anything else (another scored tail, other anchors) is refused, since its losses are of other tokens."""
  validation.require(
      np.array_equal(np.asarray(targets['positions']), positions),
      WHO,
      what,
      f'{len(targets["positions"])} targets',
      f'the {len(positions)} targets of the long context, in its order (windows of every length ending at common '
      'anchors with one scored tail: eval.scored_tail)',
  )


def key_token_totals(targets: Mapping, key: np.ndarray) -> dict:
  """The evaluated run's loss on the key tokens: 'key_tokens', 'key_bits' (sums), 'bits_per_key_token' and
  'long_ppl' (None without key tokens), 'tokens' and 'bits_per_token' (every scored target, for comparison), and
  per-document totals: 'documents' (those holding a key token), their 'key_bits' and 'key_tokens' lists."""
  nats = np.asarray(targets['nats'], np.float64)
  key = np.asarray(key, bool)
  validation.require(key.shape == nats.shape, WHO, 'key', key.shape, f'one per scored target {nats.shape}')
  count = int(key.sum())
  bits = nats / np.log(2.0)
  documents = np.asarray(targets['documents'], np.int64)[key]
  per_doc_bits = np.bincount(documents, bits[key], minlength=targets['num_documents'])
  per_doc_count = np.bincount(documents, minlength=targets['num_documents'])
  kept = np.flatnonzero(per_doc_count > 0)
  return {
      'key_tokens': count,
      'key_bits': float(bits[key].sum()),
      'bits_per_key_token': float(bits[key].mean()) if count else None,
      'long_ppl': float(np.exp(nats[key].mean())) if count else None,
      'tokens': int(nats.size),
      'bits_per_token': float(bits.mean()) if nats.size else None,
      'num_documents': int(targets['num_documents']),
      'documents': [int(k) for k in kept],
      'document_key_bits': [float(x) for x in per_doc_bits[kept]],
      'document_key_tokens': [int(x) for x in per_doc_count[kept]],
  }


def key_token_report(
    runs: Mapping[str, Mapping[int, Mapping]],
    reference: str,
    short_length: int,
    *,
    alpha: float = ALPHA,
    beta: float = BETA,
) -> dict:
  """The key-token loss of every run at every length above `short_length`, on the key tokens of `reference`.

  runs: {label: {length: scored targets}} (`relpos_jax.study.documents.scored_targets` of each run and length);
  `reference` must be one of the labels and hold `short_length` and every longer length of the runs. Returns
  {'reference', 'short_length', 'alpha', 'beta', 'key_tokens': {length: count}, 'runs': {label: {length:
  key_token_totals}}}. A reference that is not among the runs is refused, naming it and the runs there are."""
  validation.require(
      reference in runs, WHO, 'reference', reference, f'the label of a run evaluated here: one of {sorted(runs)}'
  )
  ref = runs[reference]
  validation.require(
      short_length in ref,
      WHO,
      'short_length',
      short_length,
      f'a length the reference run {reference!r} was evaluated at: one of {sorted(ref)}',
  )
  lengths = sorted({int(n) for by_length in runs.values() for n in by_length if int(n) > int(short_length)})
  missing = [n for n in lengths if n not in ref]
  validation.require(
      not missing, WHO, 'reference', reference, f'a run evaluated at every length the runs reach; it lacks {missing}'
  )
  report = {'reference': reference, 'short_length': int(short_length), 'alpha': alpha, 'beta': beta}
  report['key_tokens'], report['runs'] = {}, {label: {} for label in runs}
  for n in lengths:
    positions = np.asarray(ref[n]['positions'])
    _check_same_targets(ref[short_length], positions, 'short_length')
    key = key_token_mask(ref[n]['nats'], ref[short_length]['nats'], alpha=alpha, beta=beta)
    report['key_tokens'][n] = int(key.sum())
    for label, by_length in runs.items():
      if n in by_length:
        _check_same_targets(by_length[n], positions, f'{label} at {n}')
        report['runs'][label][n] = key_token_totals(by_length[n], key)
  return report
