"""A resolution run records the data it trained on; resuming it with other data is refused by name (issue 53).

A study resumed with another `data_dir` reused the runs trained on the first directory's images, and its report
mixed two data sets. Tiny Fashion-MNIST IDX files (tests/study/conftest.py) and a one-step ViT."""

from __future__ import annotations

import json

import pytest

from relpos_jax import resources
from relpos_jax.study import resolution
from relpos_jax.train import config as config_lib

resolution_config = resources.config_module('studies/resolution')


def _config(data_dir):
  config = resolution_config.get_config()
  config.encoders, config.tasks, config.comparisons = ('nope',), ('fashion_mnist_canvas',), ()
  config.data_dir, config.task_kwargs = data_dir, {'fashion_mnist_canvas': {'num_validation': 4}}
  config.train_side, config.eval_sides = 7, (7,)
  config.steps, config.warmup_steps, config.batch_size = 1, 0, 2
  config.seeds, config.lr_grid = (0,), None
  config.eval_examples, config.eval_batch_size, config.entropy_examples = 2, 2, 2
  config.model.model_dim, config.model.num_heads, config.model.num_layers, config.model.mlp_ratio = 8, 2, 1, 1
  return config


def test_a_run_is_not_reused_on_other_data(tmp_path, fashion_mnist_files):
  first = fashion_mnist_files(tmp_path / 'a', seed=0)
  other = fashion_mnist_files(tmp_path / 'b', seed=1)  # the same sizes and labels, other images
  workdir = tmp_path / 'w'
  resolution.run_resolution_study(_config(first), workdir)
  (record,) = workdir.glob('runs/**/result.json')
  saved = json.loads(record.read_text())
  assert len(saved['data_fingerprint']) == 16
  for finished_only in (False, True):  # neither trains nor reports on the other images
    with pytest.raises(
        config_lib.ConfigError,
        match=rf"^{record.parent} holds a run trained on other data \(data_fingerprint {saved['data_fingerprint']}\) "
        rf"than config.data_dir='{other}' holds \([0-9a-f]{{16}}\); allowed: the data it trained on, or a new workdir",
    ):
      resolution.run_resolution_study(_config(other), workdir, finished_only=finished_only)
  # The same images copied elsewhere are the same data: the fingerprint is of the contents, not the path.
  copy = fashion_mnist_files(tmp_path / 'c', seed=0)
  again = resolution.run_resolution_study(_config(copy), workdir, finished_only=True)
  assert again['meta']['reused'] == 1 and again['unfinished'] == []


def test_a_run_recorded_before_fingerprints_still_reports(tmp_path, fashion_mnist_files):
  """The committed study's records have no fingerprint: where one side has none, nothing is compared."""
  data = fashion_mnist_files(tmp_path / 'a')
  workdir = tmp_path / 'w'
  resolution.run_resolution_study(_config(data), workdir)
  (record,) = workdir.glob('runs/**/result.json')
  saved = json.loads(record.read_text())
  del saved['data_fingerprint']
  record.write_text(json.dumps(saved))
  other = fashion_mnist_files(tmp_path / 'b', seed=1)
  again = resolution.run_resolution_study(_config(other), workdir, finished_only=True)
  assert again['meta']['reused'] == 1
