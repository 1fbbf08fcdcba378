"""Byte-level ("character-level") language model on the built-in corpus (the Python standard library).

A small causal transformer, trained at length 64 and evaluated at 64, 128 and 256 bytes: how the loss per
character holds beyond the training length is the length-generalization question in its LM form. Sized
to finish in about a minute on a laptop CPU:

    python -m experiments.train --config=configs/lm.py --workdir=/tmp/lm
    python -m experiments.train --config=configs/lm.py --config.model.encoder='rope' --workdir=/tmp/lm_rope
"""

import ml_collections

from relpos_jax.train import tensorboard


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0

  config.model = ml_collections.ConfigDict()
  config.model.encoder = 'alibi'          # any encoder spec: 'rope', 't5(bidirectional=False)', ...
  config.model.num_layers = 2
  config.model.model_dim = 64
  config.model.num_heads = 4
  config.model.mlp_ratio = 4
  config.model.dropout_rate = 0.0
  config.model.dtype = 'float32'

  config.data = ml_collections.ConfigDict()
  config.data.source = 'corpus'
  config.data.corpus = 'stdlib'
  config.data.max_train_bytes = 8_000_000
  config.data.train_length = 64

  config.optim = ml_collections.ConfigDict()
  config.optim.learning_rate = 3e-3
  config.optim.schedule = 'warmup_cosine'
  config.optim.warmup_steps = 30
  config.optim.end_lr_fraction = 0.1
  config.optim.weight_decay = 0.01
  config.optim.b1 = 0.9
  config.optim.b2 = 0.98
  config.optim.eps = 1e-9
  config.optim.grad_clip_norm = 1.0

  config.train = ml_collections.ConfigDict()
  config.train.steps = 300
  config.train.batch_size = 32
  config.train.log_every = 50
  config.train.checkpoint_every = 100
  config.train.keep_checkpoints = 2
  config.train.tensorboard = tensorboard.available()  # events beside metrics.jsonl if tensorboardX is installed

  config.eval = ml_collections.ConfigDict()
  config.eval.every = 150
  config.eval.lengths = (64, 128, 256)
  config.eval.batch_size = 32
  config.eval.num_examples = 64           # validation windows per length
  config.eval.pad_multiple = 1
  config.eval.seed = 0
  return config
