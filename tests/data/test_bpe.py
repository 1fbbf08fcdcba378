"""Byte-level BPE: trained on the training split only, lossless, cached with fingerprints, bits per character on
one scale with bytes, and the scored set defined in characters."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

pytest.importorskip('tokenizers')

from relpos_jax.data import bpe
from relpos_jax.data.corpus import Corpus

WORDS = 'the cat sat on a mat and the dog ran to the old tree where a bird sang its song café'.split()


def _corpus(extra_test=b'', extra_train=b''):
  rng = np.random.default_rng(0)
  docs = [(f'train/{i:02d}', ' '.join(rng.choice(WORDS, 200)).encode()) for i in range(8)]
  docs += [(f'validation/{i:02d}', ' '.join(rng.choice(WORDS, 100)).encode()) for i in range(2)]
  docs += [(f'test/{i:02d}', ' '.join(rng.choice(WORDS, 100)).encode() + extra_test) for i in range(3)]
  if extra_train:
    docs.append(('train/extra', extra_train))
  return Corpus.from_documents(docs, split_of=lambda name: name.split('/')[0], source='test documents')


@pytest.fixture(scope='module')
def corpus():
  return _corpus()


@pytest.fixture(scope='module')
def tok(corpus):
  return bpe.train(corpus, 300)


def _vocab_holds(tok, piece: bytes) -> bool:
  return any(piece in t for t in tok.token_bytes)


def test_no_test_document_reaches_the_training_text():
  rare = b' zyzzyva' * 300  # a word only the test documents hold, more often than any training word
  held_out = _corpus(extra_test=rare)
  assert all(b'zyzzyva' not in d for d in bpe.training_documents(held_out))
  assert len(bpe.training_documents(held_out)) == 8
  assert not _vocab_holds(bpe.train(held_out, 300), b'zy')  # never merged: the trainer never saw it
  # The control: the same word in a training document is merged, so the check above can fail.
  assert _vocab_holds(bpe.train(_corpus(extra_train=rare), 300), b'zyzzyva')


def test_encoding_is_lossless_and_counts_characters(tok, corpus):
  text = 'the café sat\nwhere 🐦 sang'.encode()
  ids = tok.encode(text)
  assert b''.join(tok.token_bytes[i] for i in ids) == text
  assert tok.token_chars[ids].sum() == len(text.decode()) == bpe.count_characters(text)
  assert len(ids) < len(text)  # merges were learned
  ids, starts = tok.encode_split(corpus, 'test')
  split = bytes(corpus.tokens('test'))
  assert b''.join(tok.token_bytes[i] for i in ids) == split
  assert all(split[s : s + tok.token_lengths[i]] == tok.token_bytes[i] for s, i in zip(starts, ids))
  assert np.count_nonzero(ids == tok.separator_id) == split.count(0) == 2


def test_training_is_deterministic_and_described(corpus, tok):
  again = bpe.train(corpus, 300)
  assert again.fingerprint == tok.fingerprint and tok.vocab_size == 300
  described = tok.describe()
  assert described['train_fingerprint'] == corpus.describe()['split_fingerprints']['train']
  assert described['vocab_size'] == 300 and described['fingerprint'] == tok.fingerprint


def test_bits_per_character_by_hand():
  # 'aab' with p(a) = 1/2, p(b) = 1/4: 1 + 1 + 2 = 4 bits over 3 characters.
  targets = np.frombuffer(b'aab', np.uint8)
  logprobs = np.log([0.5, 0.5, 0.25])
  out = bpe.bits_per_character(logprobs, targets, bpe.BYTE_CHARS)
  assert (
      out['bits'] == pytest.approx(4.0) and out['characters'] == 3 and out['bits_per_character'] == pytest.approx(4 / 3)
  )
  masked = bpe.bits_per_character(logprobs, targets, bpe.BYTE_CHARS, mask=[0, 1, 1])
  assert masked['bits_per_character'] == pytest.approx(3 / 2)


def test_bits_per_character_are_equal_for_bytes_and_bpe_under_one_model(tok):
  """A character model with known probabilities p(c), written as a byte model (a multi-byte character's first
  byte carries p(c), its continuation bytes probability 1) and as a BPE model (a token's probability is the
  product of its characters'): one text's total bits and characters agree, so bits per character do, while
  bits per token differ."""
  text = 'the café sat on a mat, the dog ran to the tree'
  chars = sorted(set(text))
  p = {c: (k + 1) / sum(range(1, len(chars) + 1)) for k, c in enumerate(chars)}  # a normalised distribution
  data = text.encode()

  byte_logprobs = []
  for c in text:
    encoded = c.encode()
    byte_logprobs += [math.log(p[c])] + [0.0] * (len(encoded) - 1)
  by_bytes = bpe.bits_per_character(byte_logprobs, np.frombuffer(data, np.uint8), bpe.BYTE_CHARS)

  ids = tok.encode(data)
  token_logprobs = [sum(math.log(p[c]) for c in tok.token_bytes[i].decode('utf-8', 'ignore')) for i in ids]
  # (every token here holds whole characters: the text's only multi-byte character is 'é', kept whole)
  assert b''.join(tok.token_bytes[i] for i in ids) == data and all(tok.token_bytes[i].decode() for i in ids)
  by_bpe = bpe.bits_per_character(token_logprobs, ids, tok.token_chars)

  expected_bits = -sum(math.log2(p[c]) for c in text)
  assert by_bytes['bits'] == pytest.approx(expected_bits) and by_bpe['bits'] == pytest.approx(expected_bits)
  assert by_bytes['characters'] == by_bpe['characters'] == len(text) < len(data)
  assert by_bytes['bits_per_character'] == pytest.approx(by_bpe['bits_per_character'])
  assert by_bpe['tokens'] < by_bytes['tokens'] and by_bpe['bits_per_token'] > by_bytes['bits_per_token']


def test_a_target_id_outside_the_vocabulary_is_refused_by_name():
  """numpy reads id -1 as the last token (its characters counted silently) and a float id is no id: refused, in
  the bits per character and the per-document totals alike. An unscored target (mask 0, document -1) is not read."""
  logprobs = np.log([0.5, 0.5, 0.25])
  with pytest.raises(ValueError, match=r'target id -1 at index \(1,\) is invalid: allowed: 0..255'):
    bpe.bits_per_character(logprobs, [97, -1, 98], bpe.BYTE_CHARS)
  with pytest.raises(ValueError, match=r'target id 256 at index \(2,\) is invalid'):
    bpe.bits_per_character(logprobs, [97, 98, 256], bpe.BYTE_CHARS)
  with pytest.raises(ValueError, match=r'targets of dtype float64 are invalid: allowed: integer token ids'):
    bpe.bits_per_character(logprobs, [97.0, 98.5, 99.0], bpe.BYTE_CHARS)
  assert bpe.bits_per_character(logprobs, [97, -1, 98], bpe.BYTE_CHARS, mask=[1, 0, 1])['characters'] == 2
  with pytest.raises(ValueError, match=r'target id -1 at index \(0,\) is invalid'):
    bpe.document_totals([1.0, 2.0], [-1, 97], bpe.BYTE_CHARS, [0, 0], 1)
  bits, chars = bpe.document_totals([1.0, 2.0], [-1, 97], bpe.BYTE_CHARS, [-1, 0], 1)
  assert bits.tolist() == [2.0] and chars.tolist() == [1.0]


def test_document_ids_by_hand():
  split = np.frombuffer(b'ab\x00cd\x00\x00e', np.uint8)  # documents 'ab', 'cd', '', 'e'
  assert bpe.document_ids(split, range(8)).tolist() == [0, 0, 0, 1, 1, 1, 2, 3]


def test_document_totals_by_hand():
  bits, chars = bpe.document_totals(
      bits=[1.0, 2.0, 3.0, 4.0],
      targets=[97, 98, 0xA9, 99],
      chars_per_token=bpe.BYTE_CHARS,
      document_ids=[0, 1, 1, -1],
      num_documents=3,
  )
  assert bits.tolist() == [1.0, 5.0, 0.0] and chars.tolist() == [1.0, 1.0, 0.0]  # 0xA9 continues a character


def test_a_vocabulary_the_text_cannot_support_is_refused_and_nothing_is_written(corpus, tmp_path):
  with pytest.raises(ValueError, match=r'vocab_size=100000 is larger than the training text supports.*<= \d+'):
    bpe.load_or_train(corpus, 100_000, tmp_path / 'cache')
  with pytest.raises(ValueError, match=r'vocab_size=100 is invalid: .* >= 256'):
    bpe.load_or_train(corpus, 100, tmp_path / 'cache')
  assert not (tmp_path / 'cache').exists()


def test_the_cache_round_trips_and_refuses_a_tokenizer_of_other_text(corpus, tmp_path):
  cache = tmp_path / 'cache'
  first = bpe.load_or_train(corpus, 280, cache)
  [name] = os.listdir(cache)
  assert name == f'bpe-{corpus.describe()["split_fingerprints"]["train"]}-280.json'
  again = bpe.load_or_train(corpus, 280, cache)
  assert again.fingerprint == first.fingerprint and again.vocab_size == 280
  # A cache file named explicitly but trained on other text is refused, naming the key; nothing is written.
  other = _corpus(extra_train=b' zyzzyva' * 40)
  with pytest.raises(ValueError, match=r'built with train_fingerprint=.* this run needs train_fingerprint='):
    bpe.load_or_train(other, 280, cache / name)
  with pytest.raises(ValueError, match=r'built with vocab_size=280, this run needs vocab_size=290'):
    bpe.load_or_train(corpus, 290, cache / name)
  assert os.listdir(cache) == [name]
  # An edited file no longer matches its own fingerprint.
  text = (cache / name).read_text().replace('"fingerprint": "', '"fingerprint": "0')
  (cache / name).write_text(text)
  with pytest.raises(ValueError, match=r'edited or corrupt'):
    bpe.load_or_train(corpus, 280, cache)


def test_the_scored_set_is_the_same_characters_at_every_length(corpus, tok):
  ids, starts = tok.encode_split(corpus, 'test')
  anchors = bpe.anchors(starts, corpus.num_test_tokens, reach=150, tail=40, count=5)
  assert np.all(np.diff(anchors) % 40 == 0) and anchors[-1] < corpus.num_test_tokens
  ranges = bpe.scored_ranges(starts, anchors, tail=40)
  assert ranges[:, 0].min() >= 150  # every window of up to reach = 150 tokens fits after the split's start
  described = {}
  split = bytes(corpus.tokens('test'))
  for length in (20, 50, 150):
    windows, mask = bpe.scored_windows(ids, ranges, length)
    assert windows.shape == (5, length + 1) and mask.shape == (5, length)
    scored = [b''.join(tok.token_bytes[t] for t in w[1:][m > 0]) for w, m in zip(windows, mask)]
    # Each window scores the tokens starting in (a - 40, a], ending with its last target.
    for text, (first, last), a in zip(scored, ranges, anchors):
      assert text == split[starts[first] : starts[last] + tok.token_lengths[ids[last]]]
      assert a - 40 < starts[first] and starts[last] <= a
    assert np.all(mask[:, -1] == 1)
    described[length] = bpe.scored_set(tok, ids, starts, ranges, 'test')
  assert len({d['fingerprint'] for d in described.values()}) == 1
  assert described[20]['num_characters'] == int(
      tok.token_chars[np.concatenate([ids[a : b + 1] for a, b in ranges])].sum()
  )
  with pytest.raises(ValueError, match=r'length=3 tokens cannot score a range of \d+ tokens'):
    bpe.scored_windows(ids, ranges, 3)
