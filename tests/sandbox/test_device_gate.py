"""The device gate: correctness phases share a device, timings hold it alone, and timings never starve."""

import threading
import time

import pytest

from rubric_rl.sandbox.run.device_gate import DeviceGate, GateHold


def _in_thread(fn) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_shared_holders_overlap_and_exclusive_waits_for_them():
    gate = DeviceGate()
    gate.acquire("shared")
    gate.acquire("shared")  # a second correctness phase starts at once
    got = threading.Event()
    t = _in_thread(lambda: (gate.acquire("exclusive"), got.set()))
    assert not got.wait(0.2)
    gate.release("shared")
    assert not got.wait(0.2)  # one reader is still in
    gate.release("shared")
    assert got.wait(2)
    t.join(2)
    assert gate.stats()["exclusive_acquired"] == 1 and gate.stats()["exclusive_waited_s"] >= 0.3
    gate.release("exclusive")


def test_a_waiting_timing_stops_new_correctness_phases():
    gate = DeviceGate()
    gate.acquire("shared")
    order: list[str] = []
    writer = _in_thread(lambda: (gate.acquire("exclusive"), order.append("timing"), gate.release("exclusive")))
    time.sleep(0.1)  # the writer is waiting now
    reader = _in_thread(lambda: (gate.acquire("shared"), order.append("correctness"), gate.release("shared")))
    time.sleep(0.2)
    assert order == []  # the new reader queues behind the waiting writer
    gate.release("shared")
    writer.join(2)
    reader.join(2)
    assert order == ["timing", "correctness"]


def test_a_running_phase_gives_way_between_trials_only_to_a_waiting_timing():
    gate = DeviceGate()
    phase = GateHold(gate)
    phase.to("shared")
    assert phase.yield_to_writers() == 0.0 and gate.stats()["shared_acquired"] == 1  # nobody waits: no release
    order: list[str] = []
    writer = _in_thread(lambda: (gate.acquire("exclusive"), order.append("timing"), gate.release("exclusive")))
    while not gate.writers_waiting():
        time.sleep(0.01)
    phase.yield_to_writers()  # the timing goes first, then the phase has the device shared again
    order.append("next trial")
    writer.join(2)
    assert order == ["timing", "next trial"] and phase.mode == "shared"
    phase.release()
    alone = GateHold(gate, alone=True)
    alone.to("shared")
    assert alone.mode == "exclusive" and alone.yield_to_writers() == 0.0  # alone: never gives way
    alone.release()
    assert GateHold(None).yield_to_writers() == 0.0


def test_exclusive_excludes_everyone():
    gate = DeviceGate()
    gate.acquire("exclusive")
    entered = threading.Event()
    t = _in_thread(lambda: (gate.acquire("shared"), entered.set()))
    assert not entered.wait(0.2)
    gate.release("exclusive")
    assert entered.wait(2)
    t.join(2)
    gate.release("shared")


def test_hold_moves_between_modes_and_releases_on_exit():
    gate = DeviceGate()
    with GateHold(gate) as hold:
        hold.to("shared")
        assert hold.to("shared") == 0.0  # already there
        hold.to("exclusive")
        assert hold.mode == "exclusive"
        hold.to(None)
        hold.to("exclusive")
    gate.acquire("exclusive")  # everything was released
    gate.release("exclusive")
    assert gate.stats()["exclusive_acquired"] == 3


def test_hold_without_a_gate_is_free():
    with GateHold(None) as hold:
        assert hold.to("exclusive") == 0.0 and hold.mode == "exclusive"


def test_release_without_a_holder_is_a_bug():
    gate = DeviceGate()
    with pytest.raises(RuntimeError, match="without a holder"):
        gate.release("shared")
    with pytest.raises(RuntimeError, match="without a holder"):
        gate.release("exclusive")


def test_an_evaluation_alone_holds_exclusively_throughout():
    gate = DeviceGate()
    with GateHold(gate, alone=True) as hold:
        hold.to("shared")
        assert hold.mode == "exclusive"
    assert gate.stats()["shared_acquired"] == 0


def test_out_of_device_memory_is_recognised():
    from rubric_rl.sandbox.executors.local import out_of_device_memory
    from rubric_rl.sandbox.verdict import Verdict

    def verdict(status, error):
        return Verdict(status=status, task_id="t", candidate_sha256="0", errors=[error])

    assert out_of_device_memory(verdict("runtime_error", "correctness trial 0: OutOfMemoryError: CUDA out of memory."))
    assert not out_of_device_memory(verdict("runtime_error", "correctness trial 0: segmentation fault"))
    assert not out_of_device_memory(verdict("incorrect", "CUDA out of memory"))
