"""Test-wide settings: several fake CPU devices (for sharding tests) and a fast hypothesis profile."""

import ctypes
import gc
import itertools
import os
import sys

# Must happen before JAX initialises its backend: four CPU devices let the sharding tests build a mesh.
os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=4')

import jax  # noqa: E402
import hypothesis  # noqa: E402
import pytest  # noqa: E402

jax.config.update('jax_default_matmul_precision', 'highest')
# The tests compile thousands of tiny programs, where XLA's optimisation passes cost more than running them (the
# README's test command takes about a third less time without them). RELPOS_TESTS_OPTIMIZED=1 compiles as a
# training run does; .ci/run runs the `slow` set that way, so both compilers are exercised.
jax.config.update('jax_disable_most_optimizations', os.environ.get('RELPOS_TESTS_OPTIMIZED') != '1')

# JIT compilation makes the first example slow, so no per-example deadline; few examples keep tests fast (each new
# shape compiles again); HYPOTHESIS_PROFILE=thorough for 500.
hypothesis.settings.register_profile('default', deadline=None, max_examples=12, derandomize=True)
hypothesis.settings.register_profile('thorough', deadline=None, max_examples=500)
hypothesis.settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'default'))


# The registry-wide sweeps: one test x every registered encoder (and composition). Encoders of one attention
# kind take the same path through the layer, so the default run keeps one representative per kind; the
# encoder-level property sweeps (Toeplitz structure, any-rank inputs, far distances) keep the lecture's
# variants. The rest of each sweep is marked `slow`, which the README's test command deselects and `.ci/run`
# runs after it (`pytest -m slow`). Each encoder's own formulas (tests/encoders/test_<encoder>.py) always run.
REGISTRY_SWEEPS = frozenset(
    {
        'test_blockwise_equals_explicit_causal_with_padding',
        'test_blockwise_equals_explicit_bidirectional_and_explicit_positions',
        'test_jit_with_static_encoder',
        'test_reads_positions_is_what_the_layer_computes',
        'test_layer_is_causal_and_masks_padding',
        'test_gradients_reach_every_learnable_leaf',
        'test_dot_product_attention_path_equals_einsum_path',
        'test_attention_with_the_wrapper_equals_attention_with_the_base',
        'test_bfloat16_follows_float32',
        'test_jit_with_the_encoder_static',
        'test_gradients_are_finite_with_padding',
        'test_structure_flags',
        'test_far_distances_stay_finite',
        'test_finite_values_and_gradients_at_long_lengths',
        'test_vmap_over_the_batch_equals_the_batched_call',
    }
)
PROPERTY_SWEEPS = frozenset(
    {
        'test_bias_matrix_is_toeplitz_and_offset_rows_are_the_full_matrix_rows',
        'test_bias_of_any_rank_is_elementwise_and_finite',
        'test_is_toeplitz_is_honest_pair_bias_agrees_with_bias_matrix',
        'test_far_distances_give_finite_values',
    }
)
KIND_REPRESENTATIVES = frozenset(
    {
        'alibi',  # scalar bias in closed form
        't5',  # scalar bias from a table (the lecture's tables: shaw, piecewise, multiscale take this path)
        'rope',  # rotary
        'shaw_vector',  # vector relative embeddings (keys and values)
        'absolute_score',  # absolute score term
        'rope+alibi',  # a sum of kinds
        'self_extend(rope)',  # a position remap
        'self_extend',
        'fox',  # a content-dependent bias
        'stick_breaking',  # a content-dependent score transform (no softmax)
    }
)
LECTURE_BIASES = frozenset({'distance', 'shaw', 'piecewise', 't5', 'multiscale', 'alibi'})

# Model-level sweeps (cached decoding, causality, translation invariance) also keep every kind whose cache or
# mask has code of its own: the vector and content kinds, each remap, the temperatures.
MODEL_SWEEPS = frozenset(
    {
        'test_cached_decoding_equals_full_forward',
        'test_decoder_is_causal',
        'test_translation_invariance_of_relative_encoders',
    }
)
MODEL_REPRESENTATIVES = KIND_REPRESENTATIVES | {
    'transformer_xl',
    'xpos',
    'pope',
    'randomized(rope)',
    'cope',
    'path',
    'dape(kerple_log)',
    'dape(alibi,version=2)',
    'rerope(rope)',
    'dual_chunk(rope)',
    'rope+ssmax',
    'nope+logn',
    'absolute_score+shaw_vector',
    'rope(scaling="yarn",factor=8.0,truncate=False)',
}

# Path-equality tests whose cases share code paths: the ids kept by default (compact, spaces removed); the
# others are `slow`.
FAST_CASES = {
    # the cache-index type is one code path; t5 (a table) and fox (a content kind) carry it
    'test_decoding_under_x64_equals_full_forward': {'t5', 'fox'},
    'test_decoder_decode_equals_full_forward': {'t5-True', 'cope+alibi-True', 'path+fox-False'},
    'test_linen_twin_matches_the_nnx_layer_given_the_same_weights': {
        't5',
        'rope',
        'shaw_vector',
        'fox+rope',
        'cope+alibi',
        'stick_breaking',
    },
    'test_long_sequence_values_and_gradients_are_finite': {
        't5-True-float32',
        'rope-False-bfloat16',
        'transformer_xl-False-float32',
    },
    'test_blockwise_cached_decoding_equals_explicit_forward': {'rope', 'shaw_vector', 'fox', 'rope+stick_breaking'},
    'test_blockwise_merges_each_tile_like_the_explicit_path': {
        'self_extend(rope,group_size=2,window=4)-4x3',
        'rerope(rope,window=3,leak=2)-4x3',
        'dual_chunk(rope,chunk=6,local_window=4)-4x3',
        'dual_chunk(rope,chunk=6,local_window=4)-one_tile',
        'self_extend(alibi,group_size=3,window=2)+transformer_xl-4x3',
    },
    'test_vector_paths_match_naive_values_and_gradients': {
        'shaw_clipped_causal',
        'shaw_distinct',
        'shaw_k0',
        'shaw_no_values',
        'xl_clipped',
        'shaw_cache_distinct',
        'xl_cache_clipped',
        'shaw_explicit',
        'xl_explicit_pairwise',
    },
    'test_linen_model_init_apply_grad': {'alibi', 'rope', 'transformer_xl'},
    'test_pallas_equals_explicit': {'rope-False', 'kerple_log+rope-True', 'shaw-False'},
    'test_cached_decoding_with_explicit_positions': {'alibi', 'rope', 'shaw_vector', 'transformer_xl'},
    'test_content_kinds_tile_like_the_explicit_path': {
        'fox-3x2',
        'fox-one_tile',
        'alibi+logn(train_length=4)-3x2',
        'rope+stick_breaking-3x2',
        'stick_breaking(attend_current=True,remainder_to_self=False)-3x2',
        'fox+stick_breaking+ssmax-3x2',
        'transformer_xl+stick_breaking-3x2',
        'dape(kerple_log,version=2)-3x2',
        'cope-3x2',
        'transformer_xl+cope-3x2',
    },
}


def _represents(param_id: str, names: frozenset) -> bool:
  compact = param_id.replace(' ', '')
  return any(part in names for part in (compact, compact.split(',')[0], compact.split('-')[0]))


# The measured slowest single cases (tests/measured_slow.txt, from `pytest --durations`): each is still run by
# `.ci/run`'s slow set, and moving them there keeps the README's test command within its ten minutes.
MEASURED_SLOW = frozenset(
    line.strip()
    for line in open(os.path.join(os.path.dirname(__file__), 'measured_slow.txt'), encoding='utf-8')
    if line.strip() and not line.startswith('#')
)


def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    if item.nodeid in MEASURED_SLOW:
      item.add_marker(pytest.mark.slow)
      continue
    callspec = getattr(item, 'callspec', None)
    if callspec is None:
      continue
    name = item.originalname
    if (
        (name in REGISTRY_SWEEPS and not _represents(callspec.id, KIND_REPRESENTATIVES))
        or (name in PROPERTY_SWEEPS and not _represents(callspec.id, LECTURE_BIASES))
        or (name in MODEL_SWEEPS and not _represents(callspec.id, MODEL_REPRESENTATIVES))
        or (name in FAST_CASES and callspec.id.replace(' ', '') not in FAST_CASES[name])
    ):
      item.add_marker(pytest.mark.slow)


def _memory_mapping_limit() -> int | None:
  """The kernel's per-process cap on memory mappings (vm.max_map_count), or None where /proc has none."""
  try:
    with open('/proc/sys/vm/max_map_count', encoding='ascii') as f:
      return int(f.read())
  except (OSError, ValueError):
    return None


def _memory_mappings() -> int:
  with open('/proc/self/maps', 'rb') as f:
    return f.read().count(b'\n')


MEMORY_MAPPING_LIMIT = _memory_mapping_limit()
# Reading /proc/self/maps costs about 1.3 ms per thousand mappings (40 ms at 30,000), so it is counted after every
# eighth test: the optimized slow set's tests add about 330 each on average, and eight of them stay far below the
# half of the cap left as margin.
_TESTS_BETWEEN_COUNTS = 8
_tests_run = itertools.count(1)


@pytest.fixture(autouse=True)
def _release_compiled_programs():
  """Drops JAX's compiled programs once this process holds half the kernel's memory mappings.

  XLA's CPU backend maps each compiled program's code and data into pages of their own, and JAX keeps every
  program a test compiled. An xdist worker of the optimized slow set compiles thousands and reached the
  default cap of 65,530 mappings near the end of the run; LLVM's next mmap then failed and the worker died in
  a segfault inside the compiler, failing whichever test was compiling (a different one each run).
  """
  yield
  if MEMORY_MAPPING_LIMIT is None or next(_tests_run) % _TESTS_BETWEEN_COUNTS:
    return
  if _memory_mappings() > MEMORY_MAPPING_LIMIT // 2:
    jax.clear_caches()
    gc.collect()


def project_lru_caches() -> list:
  """Every functools.lru_cache of the project's imported modules, module-level functions and methods alike
  (compiled train and eval steps, data sources' evaluation sets: a method's cache holds its instance, and so
  the corpus or task data behind it, for as long as the process lives)."""

  def ours(obj) -> bool:  # defined in the project (a name imported from a library is the library's)
    where = getattr(obj, '__module__', None) or ''
    return where == 'relpos_jax' or where.startswith('relpos_jax.')

  found = {}
  for name, module in list(sys.modules.items()):
    if not (name == 'relpos_jax' or name.startswith('relpos_jax.')) or module is None:
      continue
    for value in list(vars(module).values()):
      owners = [value, *vars(value).values()] if isinstance(value, type) and ours(value) else [value]
      for obj in owners:
        if ours(obj) and callable(getattr(obj, 'cache_clear', None)) and callable(getattr(obj, 'cache_info', None)):
          found[id(obj)] = obj
  return list(found.values())


def release_caches() -> None:
  """Drops what tests leave behind: JAX's compiled programs and traces, the project's lru_caches, then the
  garbage, and hands freed heap back to the kernel (glibc keeps it otherwise; resident memory would not fall)."""
  jax.clear_caches()
  for cache in project_lru_caches():
    cache.cache_clear()
  gc.collect()
  if _LIBC is not None:
    _LIBC.malloc_trim(0)


def _libc():
  try:
    return ctypes.CDLL('libc.so.6')
  except OSError:  # not glibc (macOS, musl): nothing to trim
    return None


_LIBC = _libc()


@pytest.fixture(name='release_caches')
def _release_caches_fixture():
  """`release_caches` itself, for the test that pins what it releases (tests/test_cache_release.py)."""
  return release_caches


def pytest_runtest_teardown(item, nextitem):
  """After the last test of each test file: `release_caches`. A worker kept every program and cache of every file
  it ran (about 4.6 GB resident by the end of the README's test command, on two workers; the kernel's
  out-of-memory killer then ended one). The tests of one file share their programs; files rarely share any, so
  clearing between files costs little compilation."""
  if nextitem is None or nextitem.path != item.path:
    release_caches()


@pytest.fixture
def austen_laid_out_if_absent(monkeypatch, tmp_path):
  """Where the English corpus's optional system package (r-cran-janeaustenr) is not installed, its two data files
  laid out empty, so that a study naming the corpus 'austen' passes its checks (they find the files; reading
  them is a run's, and the refusal without them is tests/data/test_corpora_austen.py's)."""
  from relpos_jax.data.corpora import austen  # pylint: disable=g-import-not-at-top

  try:
    austen.check()
  except ValueError:
    os.makedirs(tmp_path / 'janeaustenr' / 'data')
    for name in ('Rdata.rdx', 'Rdata.rdb'):
      (tmp_path / 'janeaustenr' / 'data' / name).touch()
    monkeypatch.setattr(austen, 'DEFAULT_PATH', str(tmp_path / 'janeaustenr'))


def _interrupt_when(command, when, cwd=None):
  """Runs `command` (one CPU device, as a user gets: no XLA_FLAGS), sends SIGINT at the first line of stderr for
  which `when(line)` is true, and returns (exit status, stderr)."""
  import signal  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top

  env = {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}
  proc = subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
  try:
    seen = []
    for line in proc.stderr:
      seen.append(line)
      if when(line):
        proc.send_signal(signal.SIGINT)
        break
    rest = proc.communicate(timeout=120)[1]
  finally:
    proc.kill()
  return proc.returncode, ''.join(seen) + rest


@pytest.fixture
def interrupt_when():
  """`interrupt_when(command, when, cwd=None)` -> (exit status, stderr): Ctrl-C at the first stderr line `when`
  accepts (the entry points' interrupt tests)."""
  return _interrupt_when
