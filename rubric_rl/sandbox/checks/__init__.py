"""Anti-hacking checks: static (AST), native (C++/CUDA source), runtime guard and the findings of its records, audit
hook, integrity."""
