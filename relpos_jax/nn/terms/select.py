"""Which Term each attention part gets: the one module of relpos_jax.nn that compares an encoder's kind.

Everything else asks the Term it is given (`base.Term`: its `stage` and declared traits and methods), so a
new kind is a new Term here plus the family module that defines it, and no path, kernel or layer changes.
tests/test_code_health.py checks from the source that no other module of relpos_jax/nn compares a kind.

  kind              Term (family module)                      when
  ABSOLUTE          inputs.Absolute                           (added by the model at its input)
  ROTARY            inputs.Rotation                           (q and k rotated before attention)
  SCALAR_BIAS       scalar.ToeplitzBias                       contiguous positions and a Toeplitz encoder
                    scalar.PairBias                           otherwise (FIRE, explicit positions)
                    grid.GridCoordinateBias                   a grid encoder: its pair_bias per tile, from the
                                                              tokens' coordinates (explicit ones)
  VECTOR_RELATIVE   vector.VectorRows                         contiguous positions, unclipped table
                    vector.VectorTable                        otherwise (Shaw's clipped tables, explicit positions)
                    grid.GridScores(scale)                    a grid encoder (iRPE's contextual mode): buckets of
                                                              the tokens' coordinates, per tile
                    grid.GridFeatureScores                    a grid encoder that reads the layer input (PaPE):
                                                              per tile, from per-token features of x
  POSITION_REMAP    remap.Remap(rotary=base rotates)
  CONTEXTUAL        rows.RowColumnBias                        separable (FoX)
                    content.CountedPositions                  counts along the keys (CoPE)
                    content.ReplacedContent(one_tile)         replaces the content logit (PaTH): whole on one tile,
                                                              else a carry across key tiles (`carries`)
  TEMPERATURE       rows.RowTemperature
  NORMALIZER        content.Normalizer                        `tiles` (stick-breaking)
  SCORE_TRANSFORM   content.ScoreTransform(base's Term, halo)

A part with no per-tile form gets one whose `tiles` is False (`content.NoTileForm`); `terms_for` refuses it as
a ValueError naming the encoder and its kind.
"""

from __future__ import annotations

import dataclasses

from relpos_jax.encoders import contract
from relpos_jax.nn.terms import base, content, grid, inputs, remap, rows, scalar, vector

Kind = contract.Kind


def term_for(part, contiguous: bool = True, scale: float = 1.0, one_tile: bool = False) -> base.Term:
  """The Term of one part (a leaf encoder): `contiguous` positions or explicit ones, the softmax `scale` (CoPE's
  gates read the scaled logits), `one_tile` (the explicit path: PaTH's replaced logit is built whole)."""
  kind = part.kind
  if kind is Kind.ABSOLUTE:
    return inputs.Absolute()
  if kind is Kind.ROTARY:
    return inputs.Rotation()
  if kind is Kind.SCALAR_BIAS:
    if getattr(part, 'is_grid', False):
      return grid.GridCoordinateBias()
    return scalar.ToeplitzBias() if contiguous and part.is_toeplitz else scalar.PairBias()
  if kind is Kind.VECTOR_RELATIVE:
    if getattr(part, 'is_grid', False):
      return grid.GridFeatureScores() if getattr(part, 'reads_inputs', False) else grid.GridScores(scale)
    if contiguous and part.clip_distance is None:
      return vector.VectorRows()
    return vector.VectorTable(contiguous)
  if kind is Kind.POSITION_REMAP:
    return remap.Remap(part.base.kind is Kind.ROTARY)
  if kind is Kind.CONTEXTUAL:
    if part.separable:
      return rows.RowColumnBias()
    if part.counts_along_keys:
      return content.CountedPositions(scale)
    if part.replaces_content:
      return content.ReplacedContent(one_tile)
    return content.ContextualWithoutTiles()
  if kind is Kind.TEMPERATURE:
    return rows.RowTemperature()
  if kind is Kind.NORMALIZER:
    return content.Normalizer() if part.tiles else content.NoTileForm(base.Stage.NORMALIZER, reads_content=True)
  if kind is Kind.SCORE_TRANSFORM:
    return content.ScoreTransform(term_for(part.base, contiguous), int(part.key_halo))
  return content.NoTileForm()


def terms_for(parts, contiguous: bool, scale: float, *, one_tile: bool, query_bias: bool) -> tuple[base.Term, ...]:
  """Every part's Term, as the parts beside it need it; a part with no per-tile form, or a composition no tiled
  form covers, is a ValueError.

  Beside PaTH's replaced logit, FoX's sums join that logit before the 1/sqrt(d) scaling. CoPE's gates read
  the plain q . k: beside a query bias u (`query_bias`) or a remap (which replaces q . k) it computes its own.
  """
  chosen = tuple(term_for(part, contiguous, scale, one_tile) for part in parts)
  for part, t in zip(parts, chosen):
    if not t.tiles:
      raise ValueError(
          f'tiled attention (implementation "blockwise" or "pallas"): encoder {part.name or type(part).__name__!r} '
          f'is of kind {part.kind.value!r}, which has no per-tile form; use implementation "einsum".'
      )
  if any(isinstance(t, content.ReplacedContent) for t in chosen):
    chosen = tuple(dataclasses.replace(t, factor=scale) if isinstance(t, rows.RowColumnBias) else t for t in chosen)
  if query_bias or any(isinstance(t, remap.Remap) for t in chosen):
    chosen = tuple(
        dataclasses.replace(t, shares_scores=False) if isinstance(t, content.CountedPositions) else t for t in chosen
    )
  halos = [(part, t.halo) for part, t in zip(parts, chosen) if isinstance(t, content.ScoreTransform) and t.halo]
  # Beside a normalizer a halo tiles too (stick-breaking's backward adds the strips' key gradients like the
  # softmax's); it used to be refused here on every path, the explicit one included, while the error pointed
  # the user to the explicit one. Two such transforms share one halo width: refused on every path.
  if len(halos) > 1:
    raise ValueError(
        f'attention: {halos[0][0].name!r} and {halos[1][0].name!r} each read neighbouring keys on each side of a '
        f'logit ({halos[0][1]} and {halos[1][1]}); allowed: one such score transform (DAPE version 2) per layer.'
    )
  carried = [part for part, t in zip(parts, chosen) if t.carries]
  if carried and halos:  # a halo strip's logits would need the carry of the neighbouring key tile
    raise ValueError(
        f'tiled attention: {carried[0].name!r} carries each query through the key tiles nearest first; it does not '
        f'tile beside {halos[0][0].name!r}, a score transform that reads neighbouring keys (DAPE version 2); use '
        'implementation "einsum".'
    )
  counted = [part for part, t in zip(parts, chosen) if isinstance(t, content.CountedPositions)]
  if counted and halos and not one_tile:
    raise ValueError(
        f'tiled attention: {counted[0].name!r} counts gates along the keys; it does not tile beside a score '
        'transform that reads neighbouring keys (DAPE version 2); use implementation "einsum".'
    )
  return chosen


def key_halo(parts, chosen) -> tuple[int, object]:
  """(The keys a tile reads beyond each side, the part that reads them or None): a score transform's halo."""
  for part, t in zip(parts, chosen):
    if isinstance(t, content.ScoreTransform) and t.halo:
      return int(t.halo), part
  return 0, None
