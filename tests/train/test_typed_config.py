"""The typed Config end to end: `to_dict` is the ConfigDict layout (`parse(c.to_dict()) == c`), `derive` changes
exactly the keys it names and checks them as a config file's, and `with_defaults` makes a record written from a
ConfigDict that left optional keys out compare equal to the same run's `to_dict`."""

from __future__ import annotations

import json
import os

import pytest

from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files, loop
from relpos_jax.train.config import ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = ('lm.py', 'lm.py:bpe', 'algorithmic.py', 'algorithmic.py:published')


def _shipped(name: str):
  if 'bpe' in name:
    pytest.importorskip('tokenizers')
  return config_files.load_config(os.path.join(REPO, 'configs', name), validate_config=False)


def _flat(node, prefix=''):
  if isinstance(node, dict):
    return {k: v for key, child in node.items() for k, v in _flat(child, f'{prefix}{key}.').items()}
  return {prefix[:-1]: node}


@pytest.mark.parametrize('name', SHIPPED)
def test_to_dict_round_trips_the_shipped_configs(name):
  config = _shipped(name)
  run = config_lib.parse(config)
  as_dict = run.to_dict()
  assert config_lib.parse(as_dict) == run
  assert as_dict['model']['encoder'] == config.model.encoder  # the spec, not the parsed Encoder
  # Every key the ConfigDict holds is in to_dict with the same value (JSON: tuples as lists).
  old = _flat(json.loads(config.to_json_best_effort()))
  new = _flat(json.loads(json.dumps(as_dict)))
  assert {k: new.get(k) for k in old} == old
  # What the file leaves out is there at its default.
  assert set(new) >= set(old)
  assert config_lib.with_defaults(json.loads(config.to_json_best_effort())) == json.loads(json.dumps(as_dict))


def test_to_dict_is_a_copy():
  run = config_lib.parse(_shipped('algorithmic.py'))
  as_dict = run.to_dict()
  as_dict['data']['task_kwargs']['x'] = 1
  as_dict['eval']['lengths'] = ()
  assert 'x' not in run.data.task_kwargs and run.eval.lengths


@pytest.mark.parametrize(
    'changes, keys',
    [
        ({'encoder': 'rope'}, {'model.encoder'}),
        ({'seed': 7}, {'seed'}),
        ({'learning_rate': 0.125}, {'optim.learning_rate'}),
        ({'eval': {'every': 0, 'lengths': ()}}, {'eval.every', 'eval.lengths'}),
        ({'data': {'max_train_bytes': 4000000}}, {'data.max_train_bytes'}),
        ({'train': {'steps': 170}}, {'train.steps'}),
        (
            {'implementation': 'blockwise', 'block_size': 32},
            {'model.attention_implementation', 'model.attention_block_size'},
        ),
    ],
)
def test_derive_changes_exactly_the_named_keys(changes, keys):
  run = config_lib.parse(_shipped('lm.py'))
  derived = run.derive(**changes)
  before, after = _flat(run.to_dict()), _flat(derived.to_dict())
  assert {k for k in before if before[k] != after[k]} == keys
  assert derived != run and isinstance(derived, config_lib.Config)


def test_derive_parses_the_encoder_from_its_spec():
  run = config_lib.parse(_shipped('lm.py'))
  derived = run.derive(encoder='rope')
  assert derived.encoder_spec == 'rope'
  assert (
      derived.encoder == config_lib.parse(config_files.load_config('configs/lm.py', {'model.encoder': 'rope'})).encoder
  )
  assert derived.derive(encoder=run.encoder_spec) == run


def test_derive_takes_a_whole_eval_section():
  run = config_lib.parse(_shipped('lm.py'))
  whole = run.derive(eval=config_lib.parse(config_files.load_config('configs/lm.py', {'eval.lengths': (64,)})).eval)
  assert whole.eval.lengths == (64,) and whole.train == run.train


@pytest.mark.parametrize(
    'changes, message',
    [
        ({'seed': -1}, r'config\.seed=-1 is invalid'),
        ({'encoder': 'no_such_encoder'}, r"config\.model\.encoder='no_such_encoder' is invalid"),
        ({'learning_rate': 0.0}, r'config\.optim\.learning_rate=0\.0 is invalid'),
        ({'eval': {'batch_size': 0}}, r'config\.eval\.batch_size=0 is invalid'),
        ({'eval': {'no_such_key': 1}}, r'unknown key\(s\) config\.eval\.no_such_key'),
        ({'implementation': 'bogus'}, r"config\.model\.attention_implementation='bogus' is invalid"),
        ({'train': {'steps': 0}}, r'config\.train\.steps=0 is invalid'),
        ({'data': {'no_such_key': 1}}, r'unknown key\(s\) config\.data\.no_such_key'),
    ],
)
def test_a_bad_derive_value_names_its_key(changes, message):
  run = config_lib.parse(_shipped('lm.py'))
  with pytest.raises(ConfigError, match=message):
    run.derive(**changes)


def test_with_defaults_fills_only_what_is_left_out():
  old = json.loads(_shipped('lm.py').to_json_best_effort())
  for section, key in (('eval', 'position_draws'), ('train', 'max_nonfinite_steps'), ('data', 'packing')):
    old[section].pop(key, None)
  old['train']['log_every'] = 3  # a value the record holds stays
  filled = config_lib.with_defaults(old)
  assert filled['eval']['position_draws'] == 4 and filled['train']['max_nonfinite_steps'] == 1
  assert filled['data']['packing'] == 'none' and filled['train']['log_every'] == 3
  assert 'position_draws' not in old['eval']  # the record itself is not changed
  assert config_lib.with_defaults({'model': {'encoder': 'alibi', 'attention_window': '(None, 16)'}})['model'][
      'attention_window'
  ] == [None, 16]


def test_a_run_whose_config_json_came_from_a_config_dict_resumes(tmp_path, task_config):
  """config.json written as the code before the typed Config wrote it (the ConfigDict's JSON, its optional keys
  absent) resumes: the resume check compares both with their defaults filled in. A real difference is refused."""
  config = task_config()  # leaves out train.max_nonfinite_steps, eval.position_draws, ... (they have defaults)
  workdir = tmp_path / 'run'
  loop.train(config, str(workdir), stop_after=config.train.checkpoint_every)
  written = json.loads((workdir / loop.CONFIG_FILE).read_text())
  assert written == json.loads(json.dumps(config_lib.parse(config).to_dict()))  # every key, defaults included
  old_style = json.loads(config.to_json_best_effort())
  assert 'max_nonfinite_steps' not in old_style['train'] and 'position_draws' not in old_style['eval']
  (workdir / loop.CONFIG_FILE).write_text(json.dumps(old_style, indent=2, sort_keys=True))
  result = loop.train(config, str(workdir))
  assert result.step == config.train.steps
  assert json.loads((workdir / loop.CONFIG_FILE).read_text()) == old_style  # the record is not rewritten
  # A key that changes the trajectory, absent there and set here to another value than its default: refused.
  changed = config_lib.parse(config).to_dict()
  changed['model']['norm'] = 'layernorm'
  with pytest.raises(ConfigError, match=r"different config.*config\.model\.norm: 'rmsnorm' there, 'layernorm' here"):
    loop.train(changed, str(workdir))
