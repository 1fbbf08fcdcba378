"""The protocol of Ruoss et al. 2023 at CPU scale: a bidirectional transformer on an algorithmic task.

Training lengths n ~ U{1..20} (one length per batch, padded to 4 length buckets, so 4 compilations),
evaluation at the training length and beyond. Same model family as the published protocol
(configs/algorithmic_published.py), smaller and shorter so it runs in a few minutes on a CPU:

    python -m experiments.train --config=configs/algorithmic.py --workdir=/tmp/even_pairs
    python -m experiments.train --config=configs/algorithmic.py --config.data.task=parity_check \
        --config.model.encoder='randomized(rope)' --workdir=/tmp/parity
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0

  config.model = ml_collections.ConfigDict()
  config.model.encoder = 'rope'
  config.model.num_layers = 3
  config.model.model_dim = 64
  config.model.num_heads = 4
  config.model.mlp_ratio = 4
  config.model.dropout_rate = 0.1         # as the reference code (dropout_prob = 0.1)
  config.model.dtype = 'float32'

  config.data = ml_collections.ConfigDict()
  config.data.source = 'task'
  config.data.task = 'even_pairs'
  config.data.task_kwargs = ml_collections.ConfigDict()
  config.data.min_length = 1
  config.data.max_length = 20
  config.data.num_buckets = 4
  config.data.loss_reduction = 'sequence_sum'   # the reference code's loss (one output: = token mean)

  config.optim = ml_collections.ConfigDict()
  config.optim.learning_rate = 1e-3
  config.optim.schedule = 'warmup_cosine'
  config.optim.warmup_steps = 100
  config.optim.end_lr_fraction = 0.0
  config.optim.weight_decay = 0.0         # Adam, as the reference (l2_weight = 0)
  config.optim.b1 = 0.9
  config.optim.b2 = 0.999
  config.optim.eps = 1e-8
  config.optim.grad_clip_norm = 1.0       # the reference's max_grad_norm

  config.train = ml_collections.ConfigDict()
  config.train.steps = 2_000
  config.train.batch_size = 32
  config.train.log_every = 100
  config.train.checkpoint_every = 500
  config.train.keep_checkpoints = 2

  config.eval = ml_collections.ConfigDict()
  config.eval.every = 500
  config.eval.lengths = (20, 40, 100)     # input lengths n: the longest trained, 2x, 5x
  config.eval.batch_size = 64
  config.eval.num_examples = 256          # per length
  config.eval.pad_multiple = 1
  config.eval.seed = 0
  return config
