"""The worker's entry point: ``python -m rubric_rl.sandbox.run.worker READ_FD WRITE_FD [--ahead] [--compiles]
[--launched]``."""

from __future__ import annotations

import os
import sys
import time

from rubric_rl.sandbox.run.messages import TO_WORKER, Error, Setup, parse_body, send
from rubric_rl.sandbox.run.protocol import Channel
from rubric_rl.sandbox.run.worker.base import CandidateError, Session, digest_exception


def run(session: Session) -> None:
    """The setup's mode, to its last message."""
    from rubric_rl.sandbox.run.worker import baseline, capture, evaluation

    modes = {"evaluate": evaluation.evaluate, "baseline": baseline.measure, "capture": capture.capture}
    modes[session.setup.mode](session)


def main(argv: list[str]) -> int:
    import faulthandler
    import signal

    if "--launched" in argv[3:]:
        # Started by a launcher (ncu), not by the evaluator: the evaluator's death signal reached the launcher
        # only, so the worker asks for its own, and a killed evaluator takes the launcher and then the worker.
        from rubric_rl.sandbox.run.spawn import die_with_parent

        die_with_parent(signal.SIGKILL, os.getppid())
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the evaluator asks "where are you?" on a timeout
    chan = Channel(int(argv[1]), int(argv[2]))
    import torch  # noqa: F401 - imported before the setup arrives, so a pre-started worker is warm

    if "--ahead" in argv[3:]:  # a spare, started before it is needed: what its first phases import lazily too
        import torch._dynamo  # noqa: F401 - the op guard's and the profiler's
    if "--compiles" in argv[3:]:  # a spare for a baseline: torch.compile's too (0.9 s on 2 cores; no CUDA context)
        import torch._inductor.compile_fx  # noqa: F401

    ready_at = time.monotonic()
    message = chan.recv()
    session: Session | None = None
    try:
        setup = parse_body(message, TO_WORKER)
        if not isinstance(setup, Setup):
            raise RuntimeError(f"protocol: expected 'setup' first, got {setup.kind!r}")
        session = Session(chan, setup)
        # How long the evaluation waited for this interpreter to import torch (a spare not yet ready).
        if setup.sent_at is not None:
            session.phases["start_wait_s"] = round(max(0.0, ready_at - setup.sent_at), 4)
        run(session)
    except CandidateError as e:
        error = Error(stage=e.stage, message=e.message, task_error=e.stage == "reference", audit=_violations(session))
        send(chan, error)
    except BaseException as e:  # candidate code can raise anything, SystemExit and KeyboardInterrupt included
        stage = session.stage if session is not None else "setup"
        message_text = digest_exception(e, "candidate.py")
        send(chan, Error(stage=stage, message=message_text, infra=stage == "setup", audit=_violations(session)))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: candidate atexit handlers and CUDA teardown must not run


def _violations(session: Session | None) -> list[str]:
    return list(session.audit.violations) if session is not None else []


if __name__ == "__main__":
    main(sys.argv)
