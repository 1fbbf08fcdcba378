"""config.eval.lengths must increase: the reports and tables read the last length as the longest
(relpos_jax.study.report's 'longest' statistic, cross_corpus's column), so (256, 64, 128) once passed and the
report called 128 the longest."""

from __future__ import annotations

import os

import pytest

from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize('name', ['lm.py', 'algorithmic.py'])
@pytest.mark.parametrize('lengths', [(256, 64, 128), (64, 64, 128)])
def test_lengths_that_do_not_increase_are_refused_by_name(name, lengths):
  config = config_files.load_config(os.path.join(REPO, 'configs', name), validate_config=False)
  config.eval.lengths = lengths
  with pytest.raises(
      config_lib.ConfigError,
      match=rf'config.eval.lengths=\({lengths[0]}, 64, 128\) is invalid: allowed: increasing lengths, each once',
  ):
    config_lib.parse(config)
  config.eval.lengths = tuple(sorted(set(lengths)))
  assert config_lib.parse(config).eval.lengths == tuple(sorted(set(lengths)))
