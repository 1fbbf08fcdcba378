"""What position encodings cost, measured side by side: `python -m benchmarks.run` (see run.py).

One module per measurement (bias_construction, attention_kinds, train_step); measure.py holds the shared
timing and memory helpers, report.py the markdown.
"""
