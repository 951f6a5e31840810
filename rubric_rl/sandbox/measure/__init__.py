"""Measurement: correctness comparison (in the evaluator, and spot checks of the worker's), inputs, timing, task
baselines, profiling, the reference cache."""
