"""The timing protocol's rounds, on a fake backend: what each model is handed and what is timed; the paired-round
estimator of a speedup."""

import random
import statistics

import pytest

from rubric_rl.sandbox.measure.timing import choose_checked_rounds, host_probe, paired_ratio, run_rounds


class _Clock:
    """A backend whose clock advances one millisecond per read."""

    def __init__(self) -> None:
        self.ns = 0

    def flush_cache(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def now_ns(self) -> int:
        self.ns += 1_000_000
        return self.ns


def test_every_model_of_a_round_has_its_own_inputs_and_only_the_last_takes_the_draw():
    draws: list[list[object]] = []
    clones: list[list[object]] = []
    handed: list[tuple[str, int, object]] = []  # model, draws so far, the input it was handed

    def make_inputs(r: int) -> list[object]:
        draws.append([object()])
        return draws[-1]

    def clone(inputs: list[object]) -> list[object]:
        clones.append([("copy", x) for x in inputs])
        return clones[-1]

    def model(name: str):
        def call(*x: object) -> str:
            handed.append((name, len(draws), x[0]))
            return name

        return call

    names = ["eager", "compile", "candidate"]
    times = run_rounds(
        {n: model(n) for n in names},
        make_inputs=make_inputs,
        clone=clone,
        backend=_Clock(),
        n_rounds=4,
        n_warmup=1,
        checked_rounds=set(),
        on_checked_round=lambda r, outputs: None,
        after_round=lambda outputs: None,
    )
    assert {n: len(t) for n, t in times.items()} == dict.fromkeys(names, 4)
    timed = handed[len(names) :]  # after one warm-up call each, on clones of their own draw
    assert all(x == ("copy", draws[0][0]) for _, _, x in handed[: len(names)])
    for r in range(4):
        calls = timed[r * 3 : r * 3 + 3]
        assert [name for name, _, _ in calls] == names[r % 3 :] + names[: r % 3]  # the order rotates
        draw = draws[r + 1][0]
        assert [x for _, _, x in calls] == [("copy", draw), ("copy", draw), draw]  # the last takes the draw
        assert len({id(x) for _, _, x in calls}) == 3  # each its own
    assert len(clones) == 3 + 4 * 2  # warm-up calls clone; each round clones for all but its last model


def test_checked_rounds_always_include_the_last():
    picks = choose_checked_rounds(100, 3, seed=1)
    assert 99 in picks and len(picks) in (3, 4)
    assert choose_checked_rounds(100, 0, seed=1) == set()


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [
        ([10.0, 20.0, 30.0], [1.0, 2.0, 3.0], 10.0),  # a slowdown shared by a round cancels in its ratio
        ([10.0, 20.0, 21.0, 40.0], [1.0, 2.2, 2.0, 4.0], 10.0),  # medians alone would give 20.5 / 2.1 = 9.76
        ([4.0, 6.0], [2.0, 0.0], 2.0),  # a round with nothing measured on one side has no ratio
        ([4.0], [0.0], None),
        ([], [], None),
    ],
)
def test_paired_ratio_is_the_median_of_per_round_ratios(numerator, denominator, expected):
    assert paired_ratio(numerator, denominator) == (pytest.approx(expected) if expected is not None else None)


def test_paired_ratio_needs_one_time_per_round_on_each_side():
    with pytest.raises(ValueError, match="one time per round"):
        paired_ratio([1.0, 2.0], [1.0])


def test_paired_rounds_cancel_what_slows_a_whole_round():
    """Rounds slowed alike on both sides (GPU clocks, host load; a launch-bound program's eager and candidate were
    seen moving together on the H200): the speedup's spread over repeated runs, paired against medians."""
    rng = random.Random(0)
    paired, medians = [], []
    for _ in range(300):
        slow = [rng.lognormvariate(0, 0.2) for _ in range(100)]
        eager = [10.0 * s * (1 + 0.01 * rng.gauss(0, 1)) for s in slow]
        candidate = [1.0 * s * (1 + 0.01 * rng.gauss(0, 1)) for s in slow]
        paired.append(paired_ratio(eager, candidate))
        medians.append(statistics.median(eager) / statistics.median(candidate))

    def cv(xs):
        return statistics.pstdev(xs) / statistics.fmean(xs)

    assert statistics.fmean(paired) == pytest.approx(10.0, rel=0.005)
    assert cv(paired) < cv(medians) / 2, (cv(paired), cv(medians))


def test_the_host_probe_times_its_ops_between_two_synchronised_reads_of_the_backend_clock():
    probe = host_probe(_Clock(), "cpu", n_ops=250, n_steps=1000)
    assert probe["launch_us"] == 4.0  # one read before the ops and one after: 1 ms over 250 ops
    assert probe["python_us"] > 0


def _counting_rounds(n_rounds: int, **kwargs) -> tuple[dict[str, list[float]], list[int]]:
    checked: list[int] = []
    times = run_rounds(
        {"eager": lambda: None, "candidate": lambda: None},
        make_inputs=lambda r: [],
        clone=list,
        backend=_Clock(),
        n_rounds=n_rounds,
        n_warmup=0,
        checked_rounds={n_rounds - 1},
        on_checked_round=lambda r, outputs: checked.append(r),
        after_round=lambda outputs: None,
        **kwargs,
    )
    return times, checked


def test_every_model_gets_n_rounds_and_the_chosen_round_is_checked():
    times, checked = _counting_rounds(4)
    assert {k: len(v) for k, v in times.items()} == {"eager": 4, "candidate": 4} and checked == [3]
