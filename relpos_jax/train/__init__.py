"""Training: config validation, a jitted data-parallel train step, orbax checkpoints, metrics, the loop.

schema       the engine of every config section: `key(...)`, `parse_section`, `ConfigError`
config       the keys of a run config (its typed sections, `Config`: `to_dict`, `derive`), `parse`, `validate`
config_files config files and overrides (ConfigDicts): `load_config`, `config_from_file`, `parse_variants`
inputs       `build_data(config)`: training batch per step, evaluation set per length
objectives   loss and metrics per family (language model: nats, bits/char; tasks: accuracy, exact match)
optim        AdamW + global-norm clipping on a warmup + cosine / constant schedule
state        TrainState (step, params, opt_state) and the static model parts
step         the jitted train and eval steps (randomness from (seed, step) only)
sharding     the 'data' mesh: batches split (each process feeds its rows), parameters replicated;
             initialize_distributed for runs over several processes
checkpoint   orbax CheckpointManager: periodic, keep-last-N, atomic, resumable
metrics      metrics.jsonl, progress line, throughput
tensorboard  the same records as TensorBoard scalars (optional: tensorboardX); a study's per-length charts
loop         `train(config, workdir)` -> TrainResult; `build_model`, `evaluate`, `evaluate_lengths`
"""

from relpos_jax.train.checkpoint import Checkpoints
from relpos_jax.train.config import ConfigError, model_config, validate
from relpos_jax.train.config_files import load_config
from relpos_jax.train.data_sources import build_data
from relpos_jax.train.loop import TrainResult, build_model, evaluate, evaluate_lengths, load_model, train
from relpos_jax.train.metrics import read_metrics
from relpos_jax.train.objectives import Objective
from relpos_jax.train.state import ModelParts, TrainState, model_from, split_model

__all__ = [
    'Checkpoints',
    'ConfigError',
    'ModelParts',
    'Objective',
    'TrainResult',
    'TrainState',
    'build_data',
    'build_model',
    'evaluate',
    'evaluate_lengths',
    'load_config',
    'load_model',
    'model_config',
    'model_from',
    'read_metrics',
    'split_model',
    'train',
    'validate',
]
