"""Losses and metrics of each model family, on one batch format.

Every batch (training or evaluation, corpus or task) is a dict of (B, T) arrays:

  inputs         int32   token ids fed to the model
  targets        int32   the class / next token expected at each position
  loss_mask      float32 1 where the loss is taken (corpus: everywhere; tasks: the output positions)
  accuracy_mask  float32 1 where accuracy is scored (the task's own mask; binary_addition scores fewer)
  padding_mask   bool    True at real tokens, False at bucket padding (masked as attention keys)
  positions      int32   optional: the task's own position ids (position coupling, Abacus), used in place of
                         0..T-1 (and of randomized positions) by every encoder
  segment_ids    int32   optional (corpus, data.packing != 'none'): each token's document in the window; the model
                         attends within a document only ('positions' then come per document unless 'continue')
  characters     float32 optional (subword tokens, relpos_jax.data.bpe): the characters of each target, so
                         bits_per_char is total bits over total characters rather than bits per token

Families (`Objective.kind`):
  language_model  next-token cross-entropy in nats per token on the corpus, and bits per character
                  = nats / ln 2 for bytes (a character is a byte here: see relpos_jax.data.corpus), or
                  the scored targets' total bits over their total `characters` when the batch has them
  task            cross-entropy on the `loss_mask` positions; per-token accuracy (pooled over the batch,
                  on `accuracy_mask`) and sequence exact match (an example counts only if every scored
                  position is right): the metrics of Delétang et al. 2023 / Ruoss et al. 2023, and the
                  teacher-forced exact match of count_copy (Kazemnejad et al. 2023)

Evaluation accumulates sums (`eval_sums`) over batches and divides once (`finalize`), so the result does
not depend on how a set is cut into batches, and padded rows (all masks 0) count for nothing.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import optax

KINDS = ('language_model', 'task')
REDUCTIONS = ('token_mean', 'sequence_sum')
BATCH_KEYS = (
    'inputs',
    'targets',
    'loss_mask',
    'accuracy_mask',
    'padding_mask',
    'positions',
    'input_positions',
    'segment_ids',
)


def token_cross_entropy(logits: jax.Array, targets: jax.Array) -> jax.Array:
  """(B, T, V) logits, (B, T) int targets -> (B, T) cross-entropy in nats, computed in float32."""
  return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)


def _correct(logits, targets):
  return (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class Objective:
  """What a family minimises and reports. Hashable: a static argument of the jitted steps."""

  kind: str
  reduction: str = 'token_mean'

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f'Objective kind={self.kind!r} is invalid; allowed: {KINDS}.')
    if self.reduction not in REDUCTIONS:
      raise ValueError(f'Objective reduction={self.reduction!r} is invalid; allowed: {REDUCTIONS}.')

  def loss(self, logits: jax.Array, batch) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The training loss and the batch's metrics (means over this batch)."""
    ce = token_cross_entropy(logits, batch['targets'])
    mask = batch['loss_mask'].astype(jnp.float32)
    token_mean = jnp.sum(ce * mask) / jnp.maximum(jnp.sum(mask), 1.0)
    if self.reduction == 'token_mean':
      loss = token_mean
    else:  # Ruoss et al.'s reference: sum over an example's outputs, mean over the batch.
      loss = jnp.mean(jnp.sum(ce * mask, axis=-1))
    return loss, self.finalize(self.eval_sums(logits, batch, ce=ce))

  def eval_sums(self, logits: jax.Array, batch, *, ce: jax.Array | None = None) -> dict[str, jax.Array]:
    """Additive statistics of a batch; `finalize(sum over batches)` gives the set's metrics."""
    if ce is None:
      ce = token_cross_entropy(logits, batch['targets'])
    loss_mask = batch['loss_mask'].astype(jnp.float32)
    sums = {'nll_sum': jnp.sum(ce * loss_mask), 'tokens': jnp.sum(loss_mask)}
    if 'characters' in batch:  # subword targets: bits per character counts characters, not tokens
      sums['characters'] = jnp.sum(batch['characters'].astype(jnp.float32) * loss_mask)
    if self.kind == 'task':
      acc_mask = batch['accuracy_mask'].astype(jnp.float32)
      correct = _correct(logits, batch['targets'])
      scored = acc_mask > 0
      row_scored = jnp.any(scored, axis=-1)
      row_ok = jnp.all((correct > 0) | ~scored, axis=-1) & row_scored
      sums.update(
          correct=jnp.sum(correct * acc_mask),
          scored=jnp.sum(acc_mask),
          sequences_correct=jnp.sum(row_ok.astype(jnp.float32)),
          sequences=jnp.sum(row_scored.astype(jnp.float32)),
      )
    return sums

  def finalize(self, sums) -> dict:
    """Metrics from summed statistics: loss (nats per scored token), then the family's own metrics."""
    loss = sums['nll_sum'] / _at_least_one(sums['tokens'])
    out = {'loss': loss}
    if self.kind == 'language_model' and 'characters' in sums:
      out['bits_per_char'] = sums['nll_sum'] / math.log(2.0) / _at_least_one(sums['characters'])
    elif self.kind == 'language_model':
      out['bits_per_char'] = loss / math.log(2.0)
    else:
      out['accuracy'] = sums['correct'] / _at_least_one(sums['scored'])
      out['exact_match'] = sums['sequences_correct'] / _at_least_one(sums['sequences'])
    return out


def _at_least_one(x):
  return jnp.maximum(x, 1.0) if isinstance(x, jax.Array) else max(float(x), 1.0)
