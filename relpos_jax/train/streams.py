"""Every random stream of a run, named in one place.

Two key spaces, each numbered on its own (a number means nothing across them):

* numpy data streams, `np.random.default_rng((stream, seed, step_or_length))`: which training windows, which
  evaluation windows, where a packed document starts;
* JAX key streams, `jax.random.fold_in(jax.random.key(seed), stream)` (`train.step.run_key`): the parameters,
  dropout, the random positions of training and of evaluation.

The values are fixed: each is part of every committed run's numbers (changing one changes the data or the
initialisation of every run), so a new stream takes an unused number in its own space.
"""

# numpy data streams.
DATA_TRAIN = 0
DATA_VALIDATION = 1
DATA_TEST = 3  # 2 has never been a data stream (it was skipped when the JAX parameters' stream took 2)
# data.packing='reset_offset': each document's random start position, from its own stream of (seed, step), so
# the windows (the tokens) are those of every other packing mode, bit for bit.
DATA_PACKING = 4

# JAX key streams under run_key(seed).
KEY_DROPOUT = 0  # then per step
KEY_POSITIONS = 1  # randomized positions in training (Ruoss et al. 2023), then per step
KEY_PARAMS = 2  # the parameters' initialisation
KEY_EVAL_POSITIONS = 3  # the evaluation draws of random positions, then per length and draw
# The resolution study's own train step (relpos_jax.study.resolution), which draws no randomized positions:
# coordinate augmentation (DINOv3's augment_coords), then per step.
KEY_AUGMENT = 1
