"""Which Term each attention part gets: the one module of relpos_jax.nn that compares an encoder's kind, and
whether it reads 1-D positions or coordinates against where the call's tokens sit (`where`: 1-D `Positions`, a
`Grid` or `Coordinates`).

Everything else asks the Term it is given (`base.Term`: its `stage` and declared traits and methods), so a
new kind is a new Term here plus the family module that defines it, and no path, kernel or layer changes; a grid
kind the same (its Terms in `grid`). tests/test_code_health.py checks from the source that no other module of
relpos_jax/nn compares a kind, asks whether a part is a grid's or compares the positions' type (but `call`, which
builds the position values).

  kind              Term (family module)                      when
  ABSOLUTE          inputs.Absolute                           (added by the model at its input)
  ROTARY            inputs.Rotation                           (q and k rotated before attention)
                    grid.GridRotation(shape)                  a grid encoder: at the tokens' coordinates
  SCALAR_BIAS       scalar.ToeplitzBias                       contiguous positions and a Toeplitz encoder
                    scalar.PairBias                           otherwise (FIRE, explicit positions)
                    grid.GridTableBias(shape, class_token)    a grid encoder on a Grid: its table of distinct
                                                              offsets (`prepare`), gathered per tile
                    grid.GridPairBias(shape, class_token)     the same, query-dependent (fire2d): per tile pairs
                    grid.GridCoordinateBias                   a grid encoder at Coordinates: its pair_bias per
                                                              tile, from the tokens' coordinates
  VECTOR_RELATIVE   vector.VectorRows                         contiguous positions, unclipped table
                    vector.VectorTable                        otherwise (Shaw's clipped tables, explicit positions)
                    grid.GridScores(scale, shape)             a grid encoder (iRPE's contextual mode): buckets of
                                                              the tokens' coordinates, per tile
                    grid.GridFeatureScores(shape)             a grid encoder that reads the layer input (PaPE):
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
a ValueError naming the encoder and its kind. `check_positions` refuses, by name, a layer's positions its parts do
not read (coordinates for a 1-D part, 1-D positions for a grid part).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.nn.terms import base, content, grid, inputs, remap, rows, scalar, vector
from relpos_jax.nn.terms.where import Coordinates, Grid, Positions

Kind = contract.Kind


def reads_coordinates(part) -> bool:
  """Whether the part is a grid encoder's (relpos_jax.grid): it reads coordinates, not 1-D positions."""
  return bool(getattr(part, 'is_grid', False))


def term_for(part, contiguous: bool = True, scale: float = 1.0, one_tile: bool = False, where=None) -> base.Term:
  """The Term of one part (a leaf encoder): `contiguous` positions or explicit ones, the softmax `scale` (CoPE's
  gates read the scaled logits), `one_tile` (the explicit path: PaTH's replaced logit is built whole), `where` the
  call's positions (a grid part on a `Grid` reads its table of offsets; elsewhere its coordinates, packed in its
  params: `Term.bind`)."""
  kind = part.kind
  shape = where.shape if isinstance(where, Grid) else None
  if kind is Kind.ABSOLUTE:
    return inputs.Absolute()
  if kind is Kind.ROTARY:
    return grid.GridRotation(shape) if reads_coordinates(part) else inputs.Rotation()
  if kind is Kind.SCALAR_BIAS:
    if reads_coordinates(part) and shape is not None:
      table = grid.GridTableBias if part.is_toeplitz else grid.GridPairBias
      return table(shape, where.class_token)
    if reads_coordinates(part):
      return grid.GridCoordinateBias()
    return scalar.ToeplitzBias() if contiguous and part.is_toeplitz else scalar.PairBias()
  if kind is Kind.VECTOR_RELATIVE:
    if reads_coordinates(part):
      return grid.GridFeatureScores(shape) if getattr(part, 'reads_inputs', False) else grid.GridScores(scale, shape)
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


def terms_for(
    parts, contiguous: bool, scale: float, *, one_tile: bool, query_bias: bool, where=None
) -> tuple[base.Term, ...]:
  """Every part's Term, as the parts beside it need it; a part with no per-tile form, or a composition no tiled
  form covers, is a ValueError.

  Beside PaTH's replaced logit, FoX's sums join that logit before the 1/sqrt(d) scaling. CoPE's gates read
  the plain q . k: beside a query bias u (`query_bias`) or a remap (which replaces q . k) it computes its own.
  """
  chosen = tuple(term_for(part, contiguous, scale, one_tile, where) for part in parts)
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


def coordinate_axes(part) -> int | None:
  """The number of coordinates' axes a grid part reads (2 or 3), or None for a part of 1-D positions."""
  return part.axes if reads_coordinates(part) else None


def coordinate_parts(parts) -> list[str]:
  """The names of the parts that read coordinates (the grid encoders')."""
  return [p.name or type(p).__name__ for p in parts if reads_coordinates(p)]


def check_positions(who: str, encoder, parts, where, settings, shape):
  """`where` (a layer's positions as one value, `call.position_value`) checked against the parts that read them
  and the layer's `settings`, for x of (batch, length) = `shape`: the value, its 1-D positions or grid checked.

  Refused by name: a 1-D part that reads positions given coordinates (a grid shape or (B, L, axes)), a grid part
  without coordinates (or given 1-D positions), a grid shape that is not the tokens, coordinates of the wrong rank,
  a sliding window or the Pallas kernel with coordinates (the coordinates' trailing axis and values, and a grid
  beyond a learned table, are refused by the grid parts' Terms, `Term.bind`)."""
  b, length = shape
  names = coordinate_parts(parts)
  if isinstance(where, Positions):
    if names and where.query is None:
      raise ValueError(
          f'{who}: the grid encoder(s) {names} read coordinates: pass positions (batch, length, axes) or '
          f'grid_shape=(H, W) / (T, H, W); got neither.'
      )
    if names:
      raise ValueError(
          f'{who}: the grid encoder(s) {names} read coordinates (batch, length, axes) = ({b}, {length}, axes); got '
          f'positions of shape {tuple(np.shape(where.query))}.'
      )
    if where.query is None:
      return where
    query = validation.positions(who, where.query, shape)
    return Positions(where.offset, query, query, where.query_segments, where.key_segments)
  one_d = [p.name or type(p).__name__ for p in parts if not reads_coordinates(p) and p.reads_positions]
  grid_shape = where.shape if isinstance(where, Grid) else None
  given = (
      f'grid_shape={grid_shape}' if grid_shape is not None else f'positions of shape {tuple(np.shape(where.values))}'
  )
  validation.require(
      not one_d,
      who,
      'encoder',
      encoder,
      f'grid encoders only when the layer is given coordinates ({given}): {one_d} read 1-D positions (batch, '
      'length); give them positions (batch, length), or use a grid encoder (relpos_jax.grid.names())',
  )
  validation.require(
      settings.window is None, who, 'window', settings.window, 'None with grid encoders (a window is 1-D)'
  )
  validation.require(
      settings.implementation != 'pallas',
      who,
      'implementation',
      settings.implementation,
      'not "pallas" with grid encoders (its kernel builds 1-D Toeplitz biases); None, "einsum", "xla", "cudnn" or '
      '"blockwise"',
  )
  if isinstance(where, Coordinates):
    if len(np.shape(where.values)) != 3 or tuple(np.shape(where.values))[:2] != (b, length):
      raise ValueError(
          f'{who}: the grid encoder(s) {names} read coordinates (batch, length, axes) = ({b}, {length}, axes); got '
          f'positions of shape {tuple(np.shape(where.values))}.'
      )
    return where
  where = Grid.checked(who, where.shape, where.class_token, where.segments)
  validation.require(
      where.num_tokens == length,
      who,
      'grid_shape',
      where.shape,
      f'a grid of length - class token = {length - int(where.class_token)} tokens (x has length {length})',
  )
  return where
