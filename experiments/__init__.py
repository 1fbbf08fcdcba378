"""Thin absl entry points; the logic they run lives in `relpos_jax` (importable from notebooks)."""
