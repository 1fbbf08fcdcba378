"""A run on BPE tokens (`configs/lm.py:bpe`): trains, scores the same characters at every length, reports bits per
character as total bits over total characters, records the tokenizer, and refuses bad input before writing."""

from __future__ import annotations

import math
import os

import jax
import numpy as np
import pytest

pytest.importorskip('tokenizers')

from relpos_jax import resources
from relpos_jax.train import config_files
from relpos_jax.train import loop
from relpos_jax.train.config import ConfigError

LM = str(resources.configs_dir() / 'lm.py')


@pytest.fixture
def texts(tmp_path):
  rng = np.random.default_rng(0)
  words = 'the cat sat on a mat and the dog ran to the old tree where a bird sang its song'.split()
  root = tmp_path / 'texts'
  root.mkdir()
  for i in range(40):
    (root / f'doc{i:02d}.txt').write_text(' '.join(rng.choice(words, 200)) + '\n')
  return root


def _overrides(texts, tmp_path, **more):
  return {
      'data.corpus': str(texts),
      'data.vocab_size': 300,
      'data.tokenizer_cache': str(tmp_path / 'bpe'),
      'data.train_length': 16,
      'train.steps': 3,
      'train.batch_size': 4,
      'train.log_every': 3,
      'train.checkpoint_every': 3,
      'optim.warmup_steps': 1,
      'model.num_layers': 1,
      'model.model_dim': 16,
      'model.num_heads': 2,
      'eval.every': 0,
      'eval.lengths': (16, 32),
      'eval.batch_size': 4,
      'eval.num_examples': 6,
      **more,
  }


def test_a_bpe_run_reports_bits_per_character_on_the_same_characters(texts, tmp_path):
  config = config_files.load_config(f'{LM}:bpe', _overrides(texts, tmp_path))
  result = loop.train(config, tmp_path / 'run', devices=jax.devices()[:1])
  data = result.data
  described = data.describe()
  assert described['vocab_size'] == 300 and described['tokenizer']['vocab_size'] == 300
  assert described['fingerprint'] == f'{described["corpus_fingerprint"]}-bpe-{data.tokenizer.fingerprint}'
  assert described['tokenizer']['train_fingerprint'] == described['split_fingerprints']['train']
  assert os.listdir(tmp_path / 'bpe') == [f'bpe-{described["split_fingerprints"]["train"]}-300.json']
  # The same characters at every length: one fingerprint, one character count.
  sets = [data.scored_set(n, 'validation') for n in (16, 32)]
  assert sets[0]['fingerprint'] == sets[1]['fingerprint'] and sets[0]['num_characters'] == sets[1]['num_characters']
  # bits_per_char is the scored targets' total bits over their total characters, not loss / ln 2 per token.
  for n in (16, 32):
    batches = data.eval_set(n, 'validation')
    tokens = sum(float(np.sum(b['loss_mask'])) for b in batches)
    characters = sum(float(np.sum(b['characters'] * b['loss_mask'])) for b in batches)
    assert characters == sets[0]['num_characters'] and characters > tokens  # merges: > 1 character a token
    metrics = result.final_metrics
    expected = metrics[f'eval/{n}/loss'] * tokens / characters / math.log(2.0)
    assert metrics[f'eval/{n}/bits_per_char'] == pytest.approx(expected, rel=1e-5)
  assert np.isfinite(result.final_metrics['eval/32/bits_per_char'])


def test_bad_tokenizer_settings_are_refused_naming_the_key_and_nothing_is_written(texts, tmp_path):
  with pytest.raises(ConfigError, match=r"config\.data\.vocab_size=300 is invalid: set with data.tokenizer='bpe'"):
    config_files.load_config(f'{LM}:bpe', _overrides(texts, tmp_path, **{'data.tokenizer': 'byte'}))
  workdir = tmp_path / 'run'
  config = config_files.load_config(f'{LM}:bpe', _overrides(texts, tmp_path, **{'data.vocab_size': 60_000}))
  with pytest.raises(ConfigError, match=r'config\.data\.vocab_size=60000 is invalid: .* larger than the training text'):
    loop.train(config, workdir, devices=jax.devices()[:1])
  # Only the writer's lock (relpos_jax.train.workdir_lock), taken before anything is read: no record, no cache.
  assert os.listdir(workdir) == ['.writer.lock'] and not (tmp_path / 'bpe').exists()
  # A cache file of other text, named explicitly, is refused naming data.tokenizer_cache.
  other = tmp_path / 'other'
  other.mkdir()
  other_words = 'zyzzyva quux lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod'.split()
  for i in range(40):
    (other / f'o{i}.txt').write_text(' '.join(np.random.default_rng(i).choice(other_words, 200)))
  first = config_files.load_config(f'{LM}:bpe', _overrides(other, tmp_path))
  loop.train(first, devices=jax.devices()[:1])
  [cached] = os.listdir(tmp_path / 'bpe')
  config = config_files.load_config(
      f'{LM}:bpe', _overrides(texts, tmp_path, **{'data.tokenizer_cache': str(tmp_path / 'bpe' / cached)})
  )
  with pytest.raises(ConfigError, match=r'config\.data\.tokenizer_cache=.* is invalid: .*train_fingerprint='):
    loop.train(config, workdir, devices=jax.devices()[:1])
  assert os.listdir(workdir) == ['.writer.lock'] and os.listdir(tmp_path / 'bpe') == [cached]
