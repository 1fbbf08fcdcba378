"""Config validation: the shipped configs pass; bad keys, values and combinations fail naming the key."""

from __future__ import annotations

import os

import pytest

from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import data_sources, inputs, token_inputs
from relpos_jax.train.config import ConfigError, validate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_FILES = ('lm.py', 'algorithmic.py', 'algorithmic.py:published')


@pytest.mark.parametrize('name', CONFIG_FILES)
@pytest.mark.parametrize('num_devices', [1, 4])
def test_shipped_configs_validate(name, num_devices):
  config = config_files.load_config(os.path.join(REPO, 'configs', name), validate_config=False)
  assert validate(config, num_devices=num_devices) == []


def test_published_protocol_numbers():
  config = config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py:published'))
  assert (config.model.num_layers, config.model.model_dim, config.model.num_heads) == (5, 64, 8)
  assert config.train.batch_size == 128
  assert (config.data.min_length, config.data.max_length) == (1, 40)
  assert tuple(config.eval.lengths) == tuple(range(41, 501))
  assert config_lib.longest_sequence(config_lib.parse(config)) >= 501


def _set(config, key, value):
  parent, _, leaf = key.rpartition('.')
  node = config
  for part in parent.split('.') if parent else ():
    node = node[part]
  node[leaf] = value


# (which config, key, bad value, text the message must contain)
BAD_VALUES = [
    ('lm', 'model.num_heads', 3, 'config.model.num_heads=3'),
    ('lm', 'model.num_layers', 0, 'config.model.num_layers=0'),
    ('lm', 'model.dropout_rate', 1.0, 'config.model.dropout_rate=1.0'),
    ('lm', 'model.dtype', 'float16', 'dtype'),
    ('lm', 'model.encoder', 'rope(', 'config.model.encoder'),
    ('lm', 'model.encoder', 'no_such_encoder', 'config.model.encoder'),
    # A learned absolute table of 32 positions cannot embed the 64-byte evaluation windows.
    ('lm', 'model.encoder', 'learned(max_length=32)', 'config.model.encoder'),
    ('lm', 'optim.learning_rate', -1.0, 'config.optim.learning_rate=-1.0'),
    ('lm', 'optim.schedule', 'linear', 'config.optim.schedule'),
    ('lm', 'optim.warmup_steps', 10_000, 'config.optim.warmup_steps=10000'),
    ('lm', 'train.batch_size', 6, 'config.train.batch_size=6'),  # 4 devices cannot split 6 rows
    ('lm', 'eval.batch_size', 30, 'config.eval.batch_size=30'),
    ('lm', 'eval.pad_multiple', 8, 'config.eval.pad_multiple=8'),
    ('lm', 'data.source', 'web', 'config.data.source'),
    ('lm', 'seed', -1, 'config.seed=-1'),
    ('algorithmic', 'data.task', 'no_such_task', 'config.data.task'),
    ('algorithmic', 'data.min_length', 30, 'config.data.min_length=30'),
    ('algorithmic', 'data.loss_reduction', 'mean', 'config.data.loss_reduction'),
    # Training batches hold up to 21 tokens; 10 random positions cannot be spread over them.
    ('algorithmic', 'model.encoder', 'randomized(rope, max_position=10)', 'config.model.encoder'),
]


@pytest.mark.parametrize('which,key,value,expected', BAD_VALUES)
def test_bad_value_names_the_key(which, key, value, expected):
  config = config_files.load_config(os.path.join(REPO, 'configs', f'{which}.py'), validate_config=False)
  config.unlock()
  _set(config, key, value)
  with pytest.raises(ConfigError) as info:
    validate(config, num_devices=4)
  assert expected in str(info.value)


def test_unknown_and_missing_keys_are_named():
  config = config_files.load_config(os.path.join(REPO, 'configs', 'lm.py'), validate_config=False)
  config.unlock()
  config.model.num_head = 4
  with pytest.raises(ConfigError, match=r'config\.model\.num_head\b'):
    validate(config, num_devices=1)
  del config.model['num_head']
  config.data.max_length = 20  # a task key in a corpus config
  with pytest.raises(ConfigError, match=r'config\.data\.max_length'):
    validate(config, num_devices=1)
  del config.data['max_length']
  del config.optim['b1']
  with pytest.raises(ConfigError, match=r'missing key.*config\.optim\.b1'):
    validate(config, num_devices=1)


def test_load_config_override_of_unknown_key_is_named():
  with pytest.raises(ConfigError, match=r'config\.model\.num_head\b'):
    config_files.load_config(os.path.join(REPO, 'configs', 'lm.py'), {'model.num_head': 2})
  config = config_files.load_config(os.path.join(REPO, 'configs', 'lm.py'), {'model.num_layers': 4})
  assert config.model.num_layers == 4


def test_position_free_encoder_only_model_warns_naming_the_key():
  config = config_files.load_config(
      os.path.join(REPO, 'configs', 'algorithmic.py'), {'model.encoder': 'nope'}, validate_config=False
  )
  with pytest.warns(UserWarning, match=r"config\.model\.encoder='nope'"):
    found = validate(config, num_devices=1)
  assert len(found) == 1 and 'order' in found[0]
  # The same encoder in a causal decoder is a legitimate model (NoPE, Kazemnejad et al. 2023): no warning.
  lm = config_files.load_config(
      os.path.join(REPO, 'configs', 'lm.py'), {'model.encoder': 'nope'}, validate_config=False
  )
  assert validate(lm, num_devices=1) == []


def test_randomized_range_shorter_than_evaluation_warns():
  config = config_files.load_config(
      os.path.join(REPO, 'configs', 'algorithmic.py'),
      {'model.encoder': 'randomized(rope, max_position=64)'},
      validate_config=False,
  )
  with pytest.warns(UserWarning, match='max_position=64'):
    assert len(validate(config, num_devices=1)) == 1


@pytest.mark.parametrize('name', CONFIG_FILES)
def test_shipped_configs_build_their_model_and_data(name):
  """Each shipped config builds its data and model, and the model scores a training batch."""
  import numpy as np
  from relpos_jax.train import data_sources, loop

  overrides = {'data.max_train_bytes': 1_000_000} if name == 'lm.py' else {}
  config = config_files.load_config(os.path.join(REPO, 'configs', name), overrides, validate_config=False)
  data = data_sources.build_data(config_lib.parse(config))
  model = loop.build_model(config)
  batch = {k: v[:4] for k, v in data.train_batch(0).items()}
  logits = model(batch['inputs'], padding_mask=batch['padding_mask'] if data.uses_padding else None)
  assert logits.shape == batch['inputs'].shape + (data.num_classes,)
  assert np.isfinite(np.asarray(logits)).all()


# ------------------------------------------------------------------------------ variants and the command line
def test_variants_select_the_protocol_and_unknown_variants_are_named():
  cpu = config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py'))
  published = config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py:published'))
  assert (cpu.data.max_length, published.data.max_length) == (20, 40)
  assert 'study' not in cpu and 'study' not in published
  with pytest.raises(
      ConfigError,
      match=r"unknown config variant\(s\) \['publishd'\]; allowed: \['abacus', 'contextual', 'published', 'ruoss', 'study', 'suite'\]",
  ):
    config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py:publishd'))
  with pytest.raises(ConfigError, match=r"config file '.*no_such\.py' not found"):
    config_files.load_config(os.path.join(REPO, 'configs', 'no_such.py:study'))


def test_documented_optional_eval_keys_can_be_set_on_every_shipped_config():
  for name in ('lm.py', 'algorithmic.py', 'lm.py:study'):
    config = config_files.load_config(
        os.path.join(REPO, 'configs', name),
        {'eval.num_tokens': 640, 'eval.max_tokens_per_batch': 1024},
        validate_config=False,
    )
    assert (config.eval.num_tokens, config.eval.max_tokens_per_batch) == (640, 1024)
  lm = config_files.load_config(os.path.join(REPO, 'configs', 'lm.py'))
  assert config_lib.parse(lm).eval.num_tokens is None  # unset: the documented default


def test_wrong_type_of_an_optional_key_names_the_key():
  import ml_collections

  config = ml_collections.ConfigDict(config_files.load_config(LM, validate_config=False).to_dict())
  config.eval.num_tokens = 'many'  # (the shipped file's placeholder(int) refuses a str by itself)
  with pytest.raises(ConfigError, match=r"config\.eval\.num_tokens='many' is invalid: allowed: None or an int >= 1"):
    validate(config, num_devices=1)


LM = os.path.join(REPO, 'configs', 'lm.py')


@pytest.mark.parametrize(
    'argv,expected',
    [
        # A config file that does not exist is named (config_flags reported it only on first use, unnamed).
        (['train', '--config=configs/no_such.py'], r"config file 'configs/no_such\.py' not found"),
        (['train', '--config', 'configs/no_such.py:study'], r"config file 'configs/no_such\.py' not found"),
        # An unknown key: one message naming the key and the allowed keys (config_flags: a bare AttributeError).
        (
            ['train', f'--config={LM}', '--config.foo=1'],
            r'config\.foo: unknown key; allowed in config: data, eval, model, optim, seed, train\.',
        ),
        (
            ['train', f'--config={LM}', '--config.model.foo.bar=1'],
            r'config\.model\.foo\.bar: unknown key config\.model\.foo; allowed in config\.model: dropout_rate',
        ),
        (['train', f'--config={LM}', '--noconfig.model.nonexistent'], r'config\.model\.nonexistent: unknown key'),
        # A repeated override (config_flags concatenates a tuple given twice) is refused, naming the key.
        (
            ['train', f'--config={LM}', '--config.eval.lengths=(128,)', '--config.eval.lengths=(64,)'],
            r'--config\.eval\.lengths is given 2 times',
        ),
        (
            ['train', f'--config={LM}', '--config.train.steps=5', '--config.train.steps=6'],
            r'--config\.train\.steps is given 2 times',
        ),
    ],
)
def test_command_line_errors_name_the_file_or_key(argv, expected):
  from relpos_jax.train import cli

  with pytest.raises(ConfigError, match=expected):
    cli.check_command_line(argv)


def test_command_line_checks_the_default_config_when_none_is_given():
  from relpos_jax.train import cli

  cli.check_command_line(['study', '--config.train.steps=5'], default=f'{LM}:study')
  with pytest.raises(ConfigError, match=r'config\.study\.foo: unknown key; allowed in config\.study'):
    cli.check_command_line(['study', '--config.study.foo=5'], default=f'{LM}:study')


def test_build_model_needs_no_data(monkeypatch):
  """The vocabulary sizes come from the config: building the model never loads the corpus."""
  from relpos_jax import data as data_lib
  from relpos_jax.train import loop

  def no_corpus(*args, **kwargs):
    raise AssertionError('build_model loaded the corpus')

  monkeypatch.setattr(data_lib.Corpus, 'stdlib', no_corpus)
  model = loop.build_model(config_files.load_config(LM))
  assert model.config.vocab_size == data_lib.VOCAB_SIZE
  task_model = loop.build_model(config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py')))
  task = config_lib.parse(config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py'))).task
  assert (task_model.config.vocab_size, task_model.config.output_vocab) == (task.vocab_size, task.num_classes)


def test_training_does_not_depend_on_the_study():
  """The study imports training; training (its config included) never imports the study."""
  import glob
  import re

  for path in glob.glob(os.path.join(REPO, 'relpos_jax', 'train', '*.py')):
    assert not re.search(r'^\s*(from|import) relpos_jax(\.study| import study)', open(path).read(), re.M), path


def test_tensorboard_key_defaults_to_what_is_installed(monkeypatch, lm_config):
  from relpos_jax.train import tensorboard

  shipped = config_files.load_config(os.path.join(REPO, 'configs', 'lm.py'))
  # The same on every machine: None, decided where the events are written.
  assert (
      shipped.train.tensorboard is None
      and tensorboard.enabled(config_lib.parse(shipped).train) is tensorboard.available()
  )
  config = lm_config()  # no train.tensorboard key: on iff installed
  assert 'tensorboard' not in config.train
  assert tensorboard.enabled(config_lib.parse(config).train) is tensorboard.available()
  config.train.tensorboard = False
  assert not tensorboard.enabled(config_lib.parse(config).train)
  monkeypatch.setattr(tensorboard, 'available', lambda: False)
  assert not tensorboard.enabled(config_lib.parse(shipped).train)  # absent tensorboardX: no events, no error
  overridden = config_files.load_config(os.path.join(REPO, 'configs', 'lm.py'), {'train.tensorboard': False})
  assert overridden.train.tensorboard is False  # the placeholder takes a bool, as --config.train.tensorboard does
  config.train.tensorboard = True
  with pytest.raises(
      ConfigError, match=r'config\.train\.tensorboard=True is invalid: .*tensorboardX.*relpos_jax\[tensorboard\]'
  ):
    validate(config, num_devices=4)
  config = lm_config()
  config.train.tensorboard = 'yes'
  with pytest.raises(ConfigError, match=r"config\.train\.tensorboard='yes' is invalid: allowed: None or True"):
    validate(config, num_devices=4)


def test_the_data_section_answers_for_its_source():
  lm = config_files.load_config(os.path.join(REPO, 'configs', 'lm.py'))
  task = config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py'))
  lm_run, run = config_lib.parse(lm), config_lib.parse(task)
  corpus_source, task_source = lm_run.data, run.data
  assert isinstance(corpus_source, config_lib.CorpusSource) and isinstance(task_source, config_lib.TaskSource)
  # The data class answers what evaluation reads of the source, from the config, before any data is loaded.
  corpus_class, task_class = data_sources.data_class(lm_run), data_sources.data_class(run)
  assert corpus_class is inputs.CorpusData and task_class is inputs.TaskData
  assert (corpus_class.metric, corpus_class.lower_is_better) == ('bits_per_char', True)
  assert (task_class.metric, task_class.lower_is_better) == ('accuracy', False)
  assert corpus_class.diverged_at_every_length and not task_class.diverged_at_every_length
  assert corpus_class.has_documents and not task_class.has_documents
  bpe = config_files.load_config(os.path.join(REPO, 'configs', 'lm.py:bpe'), validate_config=False)
  assert data_sources.data_class(config_lib.parse(bpe)) is token_inputs.BPECorpusData
  assert corpus_source.train_length == lm.data.train_length and task_source.train_length == task.data.max_length
  assert config_lib.architecture(lm_run) == 'causal' and config_lib.vocab_sizes(lm_run) == (256, None)
  assert config_lib.architecture(run) == run.task.kind
  assert config_lib.longest_training_sequence(run) == run.task.total_length(task.data.max_length)
  assert config_lib.parse(lm).task is None


def test_abacus_input_positions_are_held_to_the_encoders_table_before_any_run():
  """addition_abacus with as_input hands input positions up to max_offset + n + 1 in training and n + 1 at
  evaluation: the encoder needs an absolute part whose table covers them (not the sequence length)."""
  import ml_collections

  config = config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py'), validate_config=False)
  config.unlock()
  config.data.task = 'addition_abacus'
  config.data.task_kwargs = ml_collections.ConfigDict({'max_offset': 40, 'as_input': True})
  config.data.max_length = 8
  config.eval.lengths = (8, 48)
  config.model.encoder = 'fire'
  with pytest.raises(ConfigError, match=r"encoder='fire' is invalid.*no absolute part"):
    validate(config, num_devices=1)
  config.model.encoder = 'learned(max_length=40) + fire'
  with pytest.raises(ConfigError, match=r'input positions, up to 49 .*max_length=40'):
    validate(config, num_devices=1)
  assert config_lib.input_position_bound(config_lib.parse(config)) == 50  # 40 + 8 + 1 in training, 48 + 1 at evaluation
  config.model.encoder = 'learned(max_length=50) + fire'  # 3 * 48 + 2 tokens: the table need not cover them
  assert validate(config, num_devices=1) == []
