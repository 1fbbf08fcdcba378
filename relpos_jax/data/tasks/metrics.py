"""Scoring helpers that work on numpy arrays and (inside or outside jit) on jax arrays.

``preds`` may be integer predictions with the shape of ``targets`` or logits with one extra trailing
axis (argmax is taken). ``mask`` is ``accuracy_mask`` (or ``loss_mask``); padding must have mask 0.
"""

from __future__ import annotations

import numpy as np


def _xp(*arrays):
  if all(isinstance(a, (np.ndarray, np.generic, list, tuple, int, float)) for a in arrays):
    return np
  import jax.numpy as jnp  # only when a jax array (or tracer) is passed

  return jnp


def _predictions(xp, logits_or_preds, targets):
  p = xp.asarray(logits_or_preds)
  t = xp.asarray(targets)
  if p.ndim == t.ndim + 1:
    p = xp.argmax(p, axis=-1)
  elif p.shape != t.shape:
    raise ValueError(f'predictions of shape {p.shape} match neither targets {t.shape} nor targets + classes')
  return p, t


def per_token_accuracy(logits_or_preds, targets, mask):
  """Fraction of masked positions predicted correctly, pooled over the batch (the papers' accuracy:
  ``sum(mask * correct) / sum(mask)``). Returns 0 when the mask is empty."""
  xp = _xp(logits_or_preds, targets, mask)
  p, t = _predictions(xp, logits_or_preds, targets)
  m = xp.asarray(mask).astype(xp.float32)
  correct = (p == t).astype(xp.float32)
  return xp.sum(correct * m) / xp.maximum(xp.sum(m), 1.0)


def sequence_exact_match(logits_or_preds, targets, mask):
  """Fraction of examples (rows) whose masked positions are ALL correct. Rows with an empty mask are left
  out of the average; returns 0 when every row is empty."""
  xp = _xp(logits_or_preds, targets, mask)
  p, t = _predictions(xp, logits_or_preds, targets)
  m = xp.asarray(mask) > 0
  axes = tuple(range(1, t.ndim))
  row_ok = xp.all((p == t) | ~m, axis=axes)
  valid = xp.any(m, axis=axes)
  return xp.sum((row_ok & valid).astype(xp.float32)) / xp.maximum(xp.sum(valid.astype(xp.float32)), 1.0)
