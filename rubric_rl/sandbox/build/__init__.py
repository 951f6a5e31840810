"""Builds the evaluator owns: extension rules, the candidate's build (split sources, as-written fallback), the
content-addressed cache, precompiled headers, the compile job server, captures of load_inline calls."""
