"""The timing protocol's rounds, on a fake backend: what each model is handed and what is timed."""

from rubric_rl.sandbox.timing import choose_checked_rounds, run_rounds


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
