"""The execution worker: one candidate against its reference, in a fresh process the evaluator started.

Run as ``python -m rubric_rl.sandbox.run.worker READ_FD WRITE_FD`` by ``rubric_rl.sandbox.run.process``; it talks
to the evaluator over those two pipes (``rubric_rl.sandbox.run.messages``) and nothing else.

What it protects against: the candidate seeing the reference's results (they are computed, sent to the
evaluator and poisoned before the candidate is imported; each model gets its own copy of the inputs);
the candidate judging itself (outputs are compared by the evaluator, in another process; outputs too large
to ship are compared here against fingerprinted kept references, and the evaluator spot-checks positions it
draws after the output exists); the candidate building its own way (``load_inline`` is replaced: builds are
requested from the evaluator, which owns the flags and the cache); in-process tampering (integrity snapshots,
the audit hook, the dispatch-level op recorder). What it does not protect against: native code acting directly
on the process or the machine. The native source checks refuse the obvious routes; the process boundary, the
temporary directory and the resource limits bound the rest; run the evaluator in a container for hostile code.

Three modes, one module each: ``evaluation`` (reference, load, correctness, then, only if the evaluator asks,
timing and a kernel profile), ``baseline`` (a task's eager and torch.compile timings) and ``capture`` (the
candidate's load_inline calls, to build ahead). ``base`` holds what they share; ``reference``, ``correctness``,
``timing`` and ``profile`` the phases. Any exception from candidate code ends the worker with an ``error``
message naming the phase; the evaluator turns it, or the worker's death, into a Verdict.

This package imports nothing heavy itself: the worker's interpreter imports torch before its setup arrives.
"""
