"""Hugging Face rope configs in and out: `from_hf(config)` gives the encoders a model needs, `to_hf(encoder)` the
`rope_parameters` a transformers config takes.

    from relpos_jax.interop import from_hf
    imported = from_hf({'rope_theta': 500000.0, 'head_dim': 128, 'max_position_embeddings': 131072, 'rope_scaling':
        {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
         'original_max_position_embeddings': 8192}})
    imported.encoder()          # rope(base=500000.0, scaling='llama3', factor=8.0, original_max_position=8192, ...)

The reference is Hugging Face transformers 5.x, modeling_rope_utils.py (`ROPE_INIT_FUNCTIONS`, the
`_compute_*_parameters` functions, `PreTrainedConfig.standardize_rope_params`); the encoders' numbers equal its
(tests/reference/test_hf_reference.py and test_attention_reference.py, run where transformers is installed). A
config is a transformers config object or its dict, in the current form (`rope_parameters`, possibly one dict per
layer type) or the published config.json form (`rope_theta` beside `rope_scaling`, whose `type` is the old name
of `rope_type`; Gemma 3's `rope_local_base_freq` for its sliding layers; Phi-3's `original_max_position_embeddings`
outside the rope dict).
A vision-language config reads its `text_config`.

Rope types, and the quirks a faithful import keeps (field names as in the config):
  default      rope(base=rope_theta)
  linear       scaling='linear', factor
  dynamic      scaling='dynamic': the original length is `max_position_embeddings` (transformers'
               `_compute_dynamic_ntk_parameters`), not `original_max_position_embeddings`
  yarn         factor (None: max_position_embeddings / original_max_position_embeddings), beta_fast / beta_slow
               (None or 0: 32 / 1, transformers' `or`), truncate, attention_factor; mscale and mscale_all_dim
               count only when both are set and non-zero (transformers' `if mscale and mscale_all_dim`)
  llama3       factor, low_freq_factor, high_freq_factor, original_max_position_embeddings
  longrope     short_factor, long_factor (one per rotated pair: refused otherwise), factor (None: the ratio of
               max_position_embeddings to original_max_position_embeddings), attention_factor; the factors switch
               with the sequence length at original_max_position_embeddings, as `longrope_frequency_update`
  proportional Gemma 4's p-RoPE: `partial_rotary_factor` p here keeps the floor(p D / 2) highest frequencies and
               zeroes the rest (frequency_fraction=p), and `factor` divides them (scaling='linear')
  partial_rotary_factor (any other type): only the first int(D p) dimensions rotate (partial_rotary_factor=p)
  rope_interleave (DeepSeek-V3): pairs (2k, 2k + 1), layout='interleaved'
  mrope_section (Qwen2-VL chunked; Qwen3-VL with mrope_interleaved): the grid encoder `mrope`
               (relpos_jax.grid), sections as given

Beside the rope, any type may carry:
  llama_4_scaling_beta  (Ministral 3, Mistral 4) the query scale 1 + beta ln(1 + floor(p / L_orig)) at query
               position p, transformers' `get_llama_4_attn_scale`, L_orig the dict's
               original_max_position_embeddings: the encoder is `rope(...) + llama4_scale(beta, original_max_position)`
               (relpos_jax.encoders.temperature), and to_hf writes such a sum back.

Not imported: every rope type not listed (refused by name). DeepSeek's extra softmax scale
mscale(s, mscale_all_dim)^2 (`yarn_apply_mscale`) multiplies every dimension of the logits, so it belongs to the
attention's scale, not to the encoder: `HFRope.softmax_scale_factor` reports it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from relpos_jax.encoders import contract
from relpos_jax.encoders.combine import Combined, combine
from relpos_jax.encoders import rope as rope_1d
from relpos_jax.encoders.temperature import Llama4Scale
from relpos_jax.grid.encoders.rope import MRope

WHO = 'from_hf'
ROPE_TYPES = ('default', 'linear', 'dynamic', 'yarn', 'llama3', 'longrope', 'proportional')
# The layer types a nested `rope_parameters` is keyed by (transformers' `nested_rope_parameter_keys`).
LAYER_TYPES = ('full_attention', 'sliding_attention', 'chunked_attention', 'linear_attention')
# Keys a rope dict may carry that are not the encoder's: transformers copies these in, or uses them elsewhere.
_IGNORED = frozenset({'type', 'rope_type', 'rope_theta', 'max_position_embeddings', 'mrope_interleaved'})
# Keys any rope type may carry that add a part beside the rope (see the module docstring).
_BESIDE = frozenset({'llama_4_scaling_beta'})
# The rope dict keys each type reads (beyond rope_type and rope_theta).
_KEYS = {
    'default': {'partial_rotary_factor', 'mrope_section'},
    'linear': {'factor', 'partial_rotary_factor'},
    'dynamic': {'factor', 'partial_rotary_factor', 'original_max_position_embeddings'},
    'yarn': {
        'factor',
        'original_max_position_embeddings',
        'beta_fast',
        'beta_slow',
        'attention_factor',
        'truncate',
        'mscale',
        'mscale_all_dim',
        'partial_rotary_factor',
    },
    'llama3': {
        'factor',
        'low_freq_factor',
        'high_freq_factor',
        'original_max_position_embeddings',
        'partial_rotary_factor',
    },
    'longrope': {
        'factor',
        'short_factor',
        'long_factor',
        'attention_factor',
        'original_max_position_embeddings',
        'partial_rotary_factor',
    },
    'proportional': {'factor', 'partial_rotary_factor'},
}


def _error(field: str, value, allowed: str) -> ValueError:
  return ValueError(f'{WHO}: {field} = {value!r} is not allowed; allowed: {allowed}.')


@dataclasses.dataclass(frozen=True)
class HFRope:
  """What a model's config says about its positions.

  encoders: one encoder per layer type ('full_attention' when the config has one rope for every layer).
  head_dims: the head dimension each layer type rotates (Gemma 4's full layers have `global_head_dim`).
  layer_types: the config's per-layer types (None: every layer is 'full_attention').
  sliding_window: the sliding layers' window, as the config gives it (None when it has none).
  softmax_scale_factor: DeepSeek's mscale(s, mscale_all_dim)^2 on the logits' scale (1 otherwise).
  """

  encoders: Mapping[str, contract.Encoder]
  head_dims: Mapping[str, int]
  layer_types: tuple[str, ...] | None = None
  sliding_window: int | None = None
  softmax_scale_factor: float = 1.0

  def encoder(self, layer_type: str = 'full_attention') -> contract.Encoder:
    if layer_type not in self.encoders:
      raise _error('layer_type', layer_type, f'one of {sorted(self.encoders)}')
    return self.encoders[layer_type]

  def per_layer(self) -> tuple[contract.Encoder, ...]:
    """One encoder per layer, from `layer_types` (the form of `ModelConfig.encoder`'s per-layer tuple)."""
    if self.layer_types is None:
      raise _error('layer_types', None, 'a config with layer_types for a per-layer tuple; use encoder()')
    return tuple(self.encoder(t) for t in self.layer_types)


def _as_dict(config) -> dict:
  if isinstance(config, Mapping):
    return dict(config)
  if hasattr(config, 'to_dict'):
    return config.to_dict()  # A transformers PreTrainedConfig.
  raise _error('config', type(config).__name__, 'a transformers config object or its dict')


def _number(field: str, value, *, minimum: float | None = None, above: float | None = None) -> float:
  ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
  ok = ok and (minimum is None or value >= minimum) and (above is None or value > above)
  if not ok:
    bound = f' >= {minimum}' if minimum is not None else f' > {above}' if above is not None else ''
    raise _error(field, value, f'a finite number{bound}')
  return float(value)


def _int(field: str, value) -> int:
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    raise _error(field, value, 'an int >= 1')
  return value


def _rope_dicts(cfg: dict) -> dict[str, dict]:
  """{layer type: rope dict with rope_type and rope_theta}, from either config form (standardize_rope_params)."""
  params = cfg.get('rope_parameters') or cfg.get('rope_scaling')
  theta = cfg.get('rope_theta')
  if params is None and theta is None:
    raise _error('rope_parameters', None, 'a dict with rope_type and rope_theta (or rope_theta beside rope_scaling)')
  if params is not None and not isinstance(params, Mapping):
    raise _error('rope_parameters', params, 'a dict')
  params = dict(params or {})
  nested = [k for k in params if k in LAYER_TYPES]
  if nested:
    out = {k: dict(params[k]) for k in nested if params[k] is not None}
  else:
    out = {'full_attention': params}
    if 'rope_local_base_freq' in cfg:  # Gemma 3's config.json: the sliding layers' own plain rope.
      out['sliding_attention'] = {'rope_type': 'default', 'rope_theta': cfg['rope_local_base_freq']}
    for layer_type in cfg.get('layer_types') or ():
      out.setdefault(layer_type, params)  # One rope for every layer type (gpt-oss): transformers duplicates it.
  for layer_type, p in out.items():
    if not isinstance(p, Mapping):
      raise _error(f'rope_parameters[{layer_type!r}]', p, 'a dict')
    p.setdefault('rope_type', p.get('type', 'default'))
    if p['rope_type'] == 'mrope':
      p['rope_type'] = 'default'  # Qwen2-VL's config.json: M-RoPE is the plain rule read per section.
    p.setdefault('rope_theta', theta)
    if cfg.get('partial_rotary_factor') is not None:
      p.setdefault('partial_rotary_factor', cfg['partial_rotary_factor'])
    if p['rope_type'] in ('llama3', 'yarn', 'longrope'):
      # Phi-3 keeps the pretraining length outside the rope dict, and it takes priority (as transformers).
      if cfg.get('original_max_position_embeddings') is not None and not nested:
        p['original_max_position_embeddings'] = cfg['original_max_position_embeddings']
      p.setdefault('original_max_position_embeddings', cfg.get('max_position_embeddings'))
  return out


def _head_dim(cfg: dict, layer_type: str) -> int:
  """The dimension a layer type rotates: DeepSeek's qk_rope_head_dim, Gemma 4's per-layer head_dim (global_head_dim
  in its config.json), head_dim, or hidden_size / num_attention_heads (transformers' order)."""
  if cfg.get('qk_rope_head_dim') is not None:
    return _int('qk_rope_head_dim', cfg['qk_rope_head_dim'])
  overrides = cfg.get('per_layer_config') or {}  # A Gemma 4 config object's dict: {layer index: {'head_dim': ..}}.
  for i, t in enumerate(cfg.get('layer_types') or ()):
    if t == layer_type and isinstance(overrides.get(str(i)), Mapping) and 'head_dim' in overrides[str(i)]:
      return _int(f"per_layer_config[{str(i)!r}]['head_dim']", overrides[str(i)]['head_dim'])
  if layer_type == 'full_attention' and cfg.get('global_head_dim') is not None:
    return _int('global_head_dim', cfg['global_head_dim'])
  if cfg.get('head_dim') is not None:
    return _int('head_dim', cfg['head_dim'])
  if cfg.get('hidden_size') is None or cfg.get('num_attention_heads') is None:
    raise _error('head_dim', None, 'an int, or hidden_size and num_attention_heads to derive it')
  return _int('hidden_size', cfg['hidden_size']) // _int('num_attention_heads', cfg['num_attention_heads'])


def rope_from_parameters(
    params: Mapping[str, Any], head_dim: int, max_position_embeddings: int | None, interleave: bool = False
) -> contract.Encoder:
  """The encoder of one rope dict (rope_type, rope_theta and the type's fields) at a head dimension."""
  rope_type = params.get('rope_type', 'default')
  if rope_type not in ROPE_TYPES:
    raise _error("rope_parameters['rope_type']", rope_type, f'one of {ROPE_TYPES}')
  known = _KEYS[rope_type] | _BESIDE
  if params.get('llama_4_scaling_beta') is not None:
    known = known | {'original_max_position_embeddings'}  # the query scale's L_orig, whatever the type
  unknown = sorted(set(params) - _IGNORED - known)
  if unknown:
    raise _error(
        f'rope_parameters[{unknown[0]!r}]',
        params[unknown[0]],
        f'a key of rope_type {rope_type!r}: {sorted(_KEYS[rope_type])}',
    )
  base = _number("rope_parameters['rope_theta']", params.get('rope_theta'), above=1)
  f = lambda key: params.get(key)  # noqa: E731
  fields: dict[str, Any] = {'base': base, 'layout': 'interleaved' if interleave else 'half'}
  p = f('partial_rotary_factor')
  if p is not None and p != 1.0:
    p = _number("rope_parameters['partial_rotary_factor']", p, above=0)
    fields['frequency_fraction' if rope_type == 'proportional' else 'partial_rotary_factor'] = p

  def required(key: str) -> Any:
    if f(key) is None:
      raise _error(f'rope_parameters[{key!r}]', None, f'a value: rope_type {rope_type!r} needs it')
    return f(key)

  def factor_or_ratio() -> float:
    if f('factor') is not None:
      return _number("rope_parameters['factor']", f('factor'), minimum=1)
    original = _int("rope_parameters['original_max_position_embeddings']", required('original_max_position_embeddings'))
    if max_position_embeddings is None:
      raise _error(
          'max_position_embeddings', None, 'an int when rope_parameters has no factor (the factor is their ratio)'
      )
    return _number(
        'max_position_embeddings / original_max_position_embeddings', max_position_embeddings / original, minimum=1
    )

  if f('mrope_section') is not None:
    if f('llama_4_scaling_beta') is not None:
      raise _error(
          "rope_parameters['llama_4_scaling_beta']",
          f('llama_4_scaling_beta'),
          'None beside mrope_section (no ' 'published model has both; the query scale is imported beside a 1-D rope)',
      )
    sections = f('mrope_section')
    ok = isinstance(sections, (list, tuple)) and len(sections) == 3 and sum(sections) == head_dim // 2
    if not ok:
      raise _error(
          "rope_parameters['mrope_section']", sections, f'3 ints (t, h, w) summing to head_dim / 2 = {head_dim // 2}'
      )
    return MRope(base=base, sections=tuple(int(s) for s in sections), interleaved=bool(f('mrope_interleaved')))
  if rope_type == 'proportional':
    s = _number("rope_parameters['factor']", f('factor') if f('factor') is not None else 1.0, minimum=1)
    if s != 1.0:
      fields.update(scaling='linear', factor=s)
  elif rope_type in ('linear', 'dynamic', 'llama3'):
    fields['scaling'] = rope_type
    fields['factor'] = _number("rope_parameters['factor']", required('factor'), minimum=1)
    if rope_type == 'dynamic':
      fields['original_max_position'] = _int('max_position_embeddings', max_position_embeddings)
    if rope_type == 'llama3':
      fields['low_freq_factor'] = _number("rope_parameters['low_freq_factor']", required('low_freq_factor'), above=0)
      fields['high_freq_factor'] = _number("rope_parameters['high_freq_factor']", required('high_freq_factor'), above=0)
      fields['original_max_position'] = _int(
          "rope_parameters['original_max_position_embeddings']", required('original_max_position_embeddings')
      )
  elif rope_type == 'yarn':
    fields.update(
        scaling='yarn',
        factor=factor_or_ratio(),
        original_max_position=_int(
            "rope_parameters['original_max_position_embeddings']", required('original_max_position_embeddings')
        ),
        beta_fast=_number("rope_parameters['beta_fast']", f('beta_fast') or 32.0, above=0),
        beta_slow=_number("rope_parameters['beta_slow']", f('beta_slow') or 1.0, above=0),
    )
    if f('truncate') is not None:
      fields['truncate'] = f('truncate')
    if f('mscale') and f('mscale_all_dim'):
      fields['mscale'] = _number("rope_parameters['mscale']", f('mscale'), above=0)
      fields['mscale_all_dim'] = _number("rope_parameters['mscale_all_dim']", f('mscale_all_dim'), above=0)
    if f('attention_factor') is not None:
      fields['attention_factor'] = _number("rope_parameters['attention_factor']", f('attention_factor'), above=0)
  elif rope_type == 'longrope':
    rotated = int(head_dim * fields.get('partial_rotary_factor', 1.0))
    for key in ('short_factor', 'long_factor'):
      value = required(key)
      if not isinstance(value, (list, tuple)) or len(value) != rotated // 2:
        n = len(value) if isinstance(value, (list, tuple)) else value
        raise _error(
            f'rope_parameters[{key!r}]',
            f'<{n} factors>',
            f'{rotated // 2} factors, one per rotated pair (head_dim {head_dim})',
        )
      fields[key] = tuple(_number(f'rope_parameters[{key!r}][{i}]', v, above=0) for i, v in enumerate(value))
    fields.update(
        scaling='longrope',
        factor=factor_or_ratio(),
        original_max_position=_int(
            "rope_parameters['original_max_position_embeddings']", required('original_max_position_embeddings')
        ),
    )
    if f('attention_factor') is not None:
      fields['attention_factor'] = _number("rope_parameters['attention_factor']", f('attention_factor'), above=0)
  try:
    encoder = rope_1d.Rope(**fields)
    encoder.check_dims(_Dims(head_dim))
  except ValueError as e:
    raise ValueError(f'{WHO}: {e}') from None
  beta = f('llama_4_scaling_beta')
  if beta is None:
    return encoder
  beta = _number("rope_parameters['llama_4_scaling_beta']", beta, minimum=0)
  original = _int("rope_parameters['original_max_position_embeddings']", required('original_max_position_embeddings'))
  return combine(encoder, Llama4Scale(beta=beta, original_max_position=original))


@dataclasses.dataclass(frozen=True)
class _Dims:
  head_dim: int


def from_hf(config) -> HFRope:
  """The encoders of a Hugging Face config (a transformers config object or its dict); see the module docstring."""
  cfg = _as_dict(config)
  if not any(k in cfg for k in ('rope_parameters', 'rope_scaling', 'rope_theta')) and isinstance(
      cfg.get('text_config'), Mapping
  ):
    cfg = dict(cfg['text_config'])  # Qwen2-VL / Qwen3-VL: the language model's config.
  dicts = _rope_dicts(cfg)
  interleave = bool(cfg.get('rope_interleave'))
  max_pos = cfg.get('max_position_embeddings')
  encoders, head_dims = {}, {}
  for layer_type, params in dicts.items():
    head_dims[layer_type] = _head_dim(cfg, layer_type)
    encoders[layer_type] = rope_from_parameters(params, head_dims[layer_type], max_pos, interleave)
  layer_types = cfg.get('layer_types')
  if layer_types is not None:
    missing = sorted(set(layer_types) - set(encoders))
    if missing:
      raise _error('layer_types', missing[0], f'a layer type with rope parameters: {sorted(encoders)}')
    layer_types = tuple(layer_types)
  scale = 1.0
  full = dicts.get('full_attention', {})
  if full.get('rope_type', 'default') != 'default' and full.get('mscale_all_dim'):
    m = 0.1 * full['mscale_all_dim'] * math.log(full['factor']) + 1.0 if full.get('factor', 1) > 1 else 1.0
    scale = m * m  # transformers' yarn_apply_mscale (DeepSeek-V2/V3's softmax_scale).
  return HFRope(encoders, head_dims, layer_types, cfg.get('sliding_window'), scale)


# ----------------------------------------------------------------------------------------------------------
# Out.

_HF_RULES = {
    'none': 'default',
    'linear': 'linear',
    'dynamic': 'dynamic',
    'yarn': 'yarn',
    'llama3': 'llama3',
    'longrope': 'longrope',
}


def to_hf(encoder: contract.Encoder) -> dict:
  """The config fields (`rope_parameters`, and `max_position_embeddings` / `rope_interleave` where the rule reads
  them) of an encoder Hugging Face knows: `rope` with the rules above, and `mrope`. Others are refused by name."""
  who = 'to_hf'
  if isinstance(encoder, Combined):
    return _rope_with_query_scale(encoder)
  if isinstance(encoder, MRope):
    if encoder.sections is None:
      raise ValueError(
          f'{who}: mrope sections = None is not allowed; allowed: explicit sections (mrope_section is per head_dim).'
      )
    params = {'rope_type': 'default', 'rope_theta': float(encoder.base), 'mrope_section': list(encoder.sections)}
    if encoder.interleaved:
      params['mrope_interleaved'] = True
    return {'rope_parameters': params}
  if type(encoder) is not rope_1d.Rope:
    raise ValueError(
        f'{who}: encoder {encoder!r} is not allowed; allowed: rope (rules {sorted(_HF_RULES)}) or mrope, the '
        'rotary rules Hugging Face configs know (biases, randomized, xPos, PoPE and the others have no '
        'rope_parameters).'
    )
  e = encoder
  if e.scaling not in _HF_RULES or e.resonance or e.dynamic:
    what = 'resonance=True' if e.resonance else 'dynamic=True' if e.dynamic else f'scaling={e.scaling!r}'
    raise ValueError(
        f'{who}: rope {what} is not allowed; allowed: scalings {sorted(_HF_RULES)} without resonance or dynamic YaRN.'
    )
  out: dict[str, Any] = {}
  params: dict[str, Any] = {'rope_type': _HF_RULES[e.scaling], 'rope_theta': float(e.base)}
  if e.frequency_fraction < 1:
    if e.scaling not in ('none', 'linear') or e.partial_rotary_factor < 1:
      raise ValueError(
          f'{who}: frequency_fraction = {e.frequency_fraction} is not allowed with scaling={e.scaling!r} or '
          'partial rotary; allowed: p-RoPE (proportional) with scaling none or linear.'
      )
    params.update(rope_type='proportional', partial_rotary_factor=e.frequency_fraction)
  elif e.partial_rotary_factor < 1:
    params['partial_rotary_factor'] = e.partial_rotary_factor
  if e.factor is not None:
    params['factor'] = e.factor
  if e.scaling == 'dynamic':
    out['max_position_embeddings'] = e.original_max_position  # Dynamic NTK's original length (transformers).
  if e.scaling in ('yarn', 'llama3', 'longrope'):
    params['original_max_position_embeddings'] = e.original_max_position
  if e.scaling == 'llama3':
    params.update(low_freq_factor=e.low_freq_factor, high_freq_factor=e.high_freq_factor)
  if e.scaling == 'yarn':
    params.update(
        beta_fast=e.beta_fast, beta_slow=e.beta_slow, truncate=e.truncate, attention_factor=e.attention_factor
    )
    if e.mscale is not None:
      params.update(mscale=e.mscale, mscale_all_dim=e.mscale_all_dim)
  if e.scaling == 'longrope':
    if e.short_factor is None or e.long_factor is None:
      raise ValueError(
          f'{who}: longrope short_factor / long_factor = None is not allowed; allowed: explicit tuples '
          '(Hugging Face needs both).'
      )
    params.update(
        short_factor=list(e.short_factor), long_factor=list(e.long_factor), attention_factor=e.attention_factor
    )
  if e.layout == 'interleaved':
    out['rope_interleave'] = True
  out['rope_parameters'] = params
  return out


def _rope_with_query_scale(encoder: Combined) -> dict:
  """`rope(...) + llama4_scale(...)` (in either order) as one rope dict with llama_4_scaling_beta."""
  scales = [p for p in encoder.parts if isinstance(p, Llama4Scale)]
  ropes = [p for p in encoder.parts if type(p) is rope_1d.Rope]
  if len(encoder.parts) != 2 or len(scales) != 1 or len(ropes) != 1:
    raise ValueError(
        f'to_hf: encoder {encoder!r} is not allowed; allowed: a rope alone, or a rope plus llama4_scale (the one sum '
        'a Hugging Face rope config describes).'
    )
  (scale,), out = scales, to_hf(ropes[0])
  params = out['rope_parameters']
  original = params.setdefault('original_max_position_embeddings', scale.original_max_position)
  if original != scale.original_max_position:
    raise ValueError(
        f'to_hf: llama4_scale original_max_position = {scale.original_max_position} is not allowed beside a rope '
        f'whose original_max_position is {original}; allowed: the same length (one config key holds both).'
    )
  params['llama_4_scaling_beta'] = scale.beta
  return out
