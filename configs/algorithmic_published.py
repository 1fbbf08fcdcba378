"""The published protocol of Ruoss et al. 2023 ("Randomized Positional Encodings Boost Length
Generalization of Transformers"), for a TPU or GPU.

From the paper and its reference code (google-deepmind/randomized_positional_encodings):
  model     bidirectional transformer, 5 layers, model_dim 64, 8 heads, MLP widening 4, dropout 0.1
            (`TransformerConfig` defaults and `_ARCHITECTURE_PARAMS` of experiments/example.py); the
            encoding their example trains is randomized relative (Transformer-XL) with L = 2048
  data      lengths n ~ U{1..N}, N = 40, one length per batch; batch size 128
  optim     Adam (`l2_weight = 0`), constant learning rate, gradient clipping at global norm 1
            (`max_grad_norm`); the paper sweeps learning rates {1e-4, 3e-4, 5e-4} over 10 seeds and
            trains 2,000,000 steps (the example script's own defaults are 10,000 steps at 1e-3)
  loss      per example, the sum of the cross-entropies of its output positions, averaged over the batch
  eval      every length M in N+1 .. 500, 512 examples each (`range_test_total_batch_size`), scored by
            per-token accuracy; the paper's score is the mean accuracy over those lengths

Deviation: the 460 evaluation lengths are padded to multiples of 32 (`eval.pad_multiple`), so they compile
15 shapes instead of 460; padded keys are masked, so the scores are those of the unpadded sequences.

    python -m experiments.train --config=configs/algorithmic_published.py --workdir=/tmp/rpe \
        --config.data.task=duplicate_string --config.optim.learning_rate=3e-4 --config.seed=3
"""

import ml_collections

from relpos_jax.train import tensorboard


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0

  config.model = ml_collections.ConfigDict()
  config.model.encoder = 'randomized(transformer_xl, max_position=2048)'
  config.model.num_layers = 5
  config.model.model_dim = 64
  config.model.num_heads = 8
  config.model.mlp_ratio = 4
  config.model.dropout_rate = 0.1
  config.model.dtype = 'float32'

  config.data = ml_collections.ConfigDict()
  config.data.source = 'task'
  # The reference example defaults to missing_duplicate, which has a shortcut (the masked bit is the
  # parity of the visible ones) and is no evidence of length generalization; reverse_string is not.
  config.data.task = 'reverse_string'
  config.data.task_kwargs = ml_collections.ConfigDict()
  config.data.min_length = 1
  config.data.max_length = 40
  config.data.num_buckets = 8
  config.data.loss_reduction = 'sequence_sum'

  config.optim = ml_collections.ConfigDict()
  config.optim.learning_rate = 1e-4
  config.optim.schedule = 'warmup_constant'
  config.optim.warmup_steps = 0
  config.optim.end_lr_fraction = 1.0      # unused by a constant schedule
  config.optim.weight_decay = 0.0
  config.optim.b1 = 0.9
  config.optim.b2 = 0.999
  config.optim.eps = 1e-8
  config.optim.grad_clip_norm = 1.0

  config.train = ml_collections.ConfigDict()
  config.train.steps = 2_000_000
  config.train.batch_size = 128
  config.train.log_every = 1_000
  config.train.checkpoint_every = 50_000
  config.train.keep_checkpoints = 3
  config.train.tensorboard = tensorboard.available()  # events beside metrics.jsonl if tensorboardX is installed

  config.eval = ml_collections.ConfigDict()
  config.eval.every = 0                   # the range evaluation runs once, after training
  config.eval.lengths = tuple(range(41, 501))
  config.eval.batch_size = 64             # the reference's range_test_sub_batch_size
  config.eval.num_examples = 512
  config.eval.pad_multiple = 32
  config.eval.seed = 0
  return config
