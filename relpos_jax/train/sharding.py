"""Data parallelism with JAX's own machinery: one mesh axis 'data' over every device.

Parameters and optimizer state are replicated (`NamedSharding(mesh, P())`); each batch is split along its
first axis (`NamedSharding(mesh, P('data'))`). Under `jax.jit` the compiler inserts the all-reduce of the
gradients, so the step is the single-device step, computed by every device on its slice of the batch.

The mesh uses `AxisType.Auto` (compiler-propagated shardings, the classic GSPMD data parallelism): the
model needs no sharding annotations, which `jax.make_mesh`'s default explicit axes would ask of some ops.

Multi-process (multi-host TPU slices, multi-node GPU, or several local CPU processes after
`jax.distributed.initialize()`): the mesh spans the devices of every process, and each process feeds
only its own rows of every batch, `local_rows(mesh, batch_size)` (a contiguous block: the rows its devices
hold), handed to `jax.make_array_from_process_local_data`. The data stream is a pure function of
(seed, step), so process p's rows are exactly rows `local_rows` of the batch a single process would
build: the same code runs on one CPU, one host of 8 GPUs, or a pod slice, with the same results.
"""

from __future__ import annotations

import os
from typing import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

from relpos_jax import validation

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
  """Places every array of `tree` on every device of the mesh (of every process: each holds the same values).

  Typed PRNG key arrays go as their key data: `jax.device_put` refuses them a sharding that spans processes.
  """
  sharding = replicated(mesh)

  def put(x):
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      return jax.random.wrap_key_data(jax.device_put(jax.random.key_data(x), sharding), impl=jax.random.key_impl(x))
    return jax.device_put(x, sharding)

  return jax.tree.map(put, tree)


def local_rows(mesh: Mesh, num_rows: int) -> slice:
  """The rows of a global batch of `num_rows` that this process's devices hold along the 'data' axis.

  One process: every row. Several: a contiguous block (the devices of a process are neighbours in the
  mesh); the rows a process feeds to `shard_local_batch`.
  """
  shards = num_data_shards(mesh)
  if num_rows % shards:
    raise ValueError(
        f'a batch of {num_rows} rows cannot be split evenly over the {shards} devices of the '
        f"'data' axis; use a batch size that is a multiple of {shards}."
    )
  indices = batch_sharded(mesh).addressable_devices_indices_map((num_rows,)).values()
  blocks = sorted({(index[0].start or 0, num_rows if index[0].stop is None else index[0].stop) for index in indices})
  if any(a[1] != b[0] for a, b in zip(blocks, blocks[1:])):
    raise ValueError(
        f'the devices of process {jax.process_index()} hold rows {blocks} of the batch, not one '
        "contiguous block; build the mesh with each process's devices next to each other."
    )
  return slice(blocks[0][0], blocks[-1][1])


def shard_local_batch(batch: dict[str, np.ndarray], mesh: Mesh, num_rows: int) -> dict[str, jax.Array]:
  """This process's rows of a batch (`batch[k][i]` is global row `local_rows(mesh, num_rows).start + i`)
  as global arrays of `num_rows` rows split along axis 0 over the mesh of every process."""
  sharding = batch_sharded(mesh)
  rows = local_rows(mesh, num_rows)
  out = {}
  for key, value in batch.items():
    value = np.asarray(value)
    if value.shape[0] != rows.stop - rows.start:
      raise ValueError(
          f'batch[{key!r}] has {value.shape[0]} rows, but this process feeds rows '
          f'{rows.start}..{rows.stop - 1} of a batch of {num_rows}.'
      )
    out[key] = jax.make_array_from_process_local_data(sharding, value, (num_rows,) + value.shape[1:])
  return out


def shard_batch(batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """A whole global batch (every process holds it) as global arrays split along axis 0; each process
  hands over only its own rows."""
  num_rows = {np.shape(value)[0] for value in batch.values()}
  if len(num_rows) != 1:
    raise ValueError(f'every array of a batch needs the same number of rows, got {sorted(num_rows)}.')
  (num_rows,) = num_rows
  rows = local_rows(mesh, num_rows)
  return shard_local_batch({k: np.asarray(v)[rows] for k, v in batch.items()}, mesh, num_rows)


def check_coordinator_address(address) -> None:
  """'host:port' (an IPv6 host in brackets, a port in 1..65535), or ValueError naming the flag: JAX itself
  fails on 'foo' with a bare IndexError."""
  host, _, port = str(address).rpartition(':')
  if not (isinstance(address, str) and host and port.isdigit() and 1 <= int(port) <= 65535):
    allowed = 'host:port of process 0 with a free port, e.g. 10.0.0.1:1234 or [::1]:1234'
    raise validation.InvalidValue(
        'initialize_distributed',
        'coordinator_address',
        address,
        allowed,
        message=f'coordinator_address={address!r} (the flag --coordinator_address, or JAX_COORDINATOR_ADDRESS in '
        f'the environment) is invalid; allowed: {allowed}.',
    )


MULTIHOST_ALLOWED = (
    'on Cloud TPU, Slurm, Open MPI or Kubernetes no more flags (JAX finds the cluster); elsewhere '
    '--coordinator_address=host0:port --num_processes=N --process_id=i on every process (the same address and N)'
)


def initialize_distributed(
    coordinator_address: str | None = None, num_processes: int | None = None, process_id: int | None = None, **kwargs
) -> None:
  """`jax.distributed.initialize`, with cross-process collectives on CPU (gloo); call before any other JAX call.

  With no arguments JAX finds the cluster itself on Cloud TPU, Slurm, Open MPI and Kubernetes (and reads
  `JAX_COORDINATOR_ADDRESS`); elsewhere (a multi-node GPU cluster without those, or several local CPU
  processes) give all three: `coordinator_address='host0:1234'` (process 0's address and a free port, the
  same on every process, or `JAX_COORDINATOR_ADDRESS` in the environment), `num_processes` and this
  process's `process_id` in 0..num_processes-1.
  `kwargs` go to `jax.distributed.initialize` (e.g. `initialization_timeout`, `local_device_ids`).
  """
  address = coordinator_address or os.environ.get('JAX_COORDINATOR_ADDRESS')  # as JAX reads it
  if address is not None:
    check_coordinator_address(address)
  who = 'initialize_distributed'
  if num_processes is not None and (
      isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1
  ):
    raise validation.InvalidValue(
        who,
        'num_processes',
        num_processes,
        'an int >= 1',
        message=f'num_processes must be an int >= 1, got ' f'{num_processes!r} (the flag --num_processes).',
    )
  if process_id is not None and (
      isinstance(process_id, bool)
      or not isinstance(process_id, int)
      or not 0 <= process_id < (num_processes or process_id + 1)
  ):
    raise validation.InvalidValue(
        who,
        'process_id',
        process_id,
        f'an int in [0, num_processes={num_processes})',
        message=f'process_id must be an int in [0, num_processes={num_processes}), got {process_id!r} (the flag '
        '--process_id).',
    )
  given = {'coordinator_address': address, 'num_processes': num_processes, 'process_id': process_id}
  if (num_processes is not None or process_id is not None) and None in given.values():
    missing = ', '.join(f'{k} (--{k})' for k, v in given.items() if v is None)
    raise validation.InvalidValue(
        who,
        'num_processes',
        num_processes,
        MULTIHOST_ALLOWED,
        message=f'give --coordinator_address, --num_processes and --process_id together (or none of them, for a '
        f'cluster JAX detects by itself); missing: {missing}.',
    )
  # CPU processes exchange gradients through gloo (JAX's default now; set for versions that had none).
  if jax.config.jax_cpu_collectives_implementation in (None, 'none'):
    jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  try:
    jax.distributed.initialize(coordinator_address, num_processes, process_id, **kwargs)
  except (ValueError, RuntimeError) as e:  # JAX's 'coordinator_address should be defined.' and its traceback
    cause = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise validation.InvalidValue(
        who,
        'coordinator_address',
        address,
        MULTIHOST_ALLOWED,
        message=f'--multihost: jax.distributed.initialize() could not join a cluster ({cause}); allowed: '
        f'{MULTIHOST_ALLOWED}.',
    ) from None
