"""Builds the sandbox owns: extension rules, source split, precompiled header, cache, job server."""
