"""Anti-hacking checks: static (AST), native (C++/CUDA source), runtime guard, audit hook, integrity."""
