"""Data parallelism with JAX's own machinery: one mesh axis 'data' over every device.

Parameters and optimizer state are replicated (`NamedSharding(mesh, P())`); each batch is split along its
first axis (`NamedSharding(mesh, P('data'))`). Under `jax.jit` the compiler inserts the all-reduce of the
gradients, so the step is the single-device step, computed by every device on its slice of the batch.

The mesh uses `AxisType.Auto` (compiler-propagated shardings, the classic GSPMD data parallelism): the
model needs no sharding annotations, which `jax.make_mesh`'s default explicit axes would ask of some ops.

Multi-host: every process builds the same global batch (the data stream is a pure function of
(seed, step) and cheap) and `jax.make_array_from_callback` hands each local device its slice, so the
same code runs on one CPU, one host of 8 GPUs, or a TPU pod slice after `jax.distributed.initialize()`.
"""

from __future__ import annotations

from typing import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = 'data'


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A 1-D mesh named 'data' over `devices` (default: every device of every process)."""
  devices = list(jax.devices() if devices is None else devices)
  if not devices:
    raise ValueError('make_mesh needs at least one device, got none.')
  return jax.make_mesh((len(devices),), (DATA_AXIS,), axis_types=(AxisType.Auto,), devices=devices)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharded(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P(DATA_AXIS))


def num_data_shards(mesh: Mesh) -> int:
  return mesh.shape[DATA_AXIS]


def replicate(tree, mesh: Mesh):
  """Places every array of `tree` on every device of the mesh."""
  return jax.device_put(tree, replicated(mesh))


def shard_batch(batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """A host batch (every process holds the same global arrays) as global arrays split along axis 0."""
  sharding = batch_sharded(mesh)
  shards = num_data_shards(mesh)
  out = {}
  for key, value in batch.items():
    value = np.asarray(value)
    if value.shape[0] % shards:
      raise ValueError(f'batch[{key!r}] has {value.shape[0]} rows, which the {shards} devices of the '
                       "'data' axis cannot split evenly; use a batch size that is a multiple of "
                       f'{shards}.')
    out[key] = jax.make_array_from_callback(value.shape, sharding, lambda index, v=value: v[index])
  return out
