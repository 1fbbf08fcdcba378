"""The length-generalization study: train every encoder on the same work, evaluate at longer lengths,
report a table and a plot. `run_study(config, workdir)`; `report` writes and reads the results."""

from relpos_jax.study import report
from relpos_jax.study.runner import Entry, Study, load_study_config, parse_entries, run_study, validate_study, write_outputs
