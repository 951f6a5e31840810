"""Measurement: correctness comparison, inputs, timing, profiling, the reference cache."""
