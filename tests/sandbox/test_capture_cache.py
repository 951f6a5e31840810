"""Captured load_inline calls, kept beside the build cache so a warm prebuild spawns no capture worker."""

import logging
from pathlib import Path

import pytest

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.build.capture_cache import CaptureCache
from rubric_rl.sandbox.build.extension import ExtensionSpec


def _spec(name: str = "fused") -> ExtensionSpec:
    return ExtensionSpec(name=name, cpp_sources=["int f() { return 1; }"], functions=["f"], extra_cflags=["-O2"])


def test_a_kept_capture_comes_back_for_the_same_text_and_backend_only(tmp_path):
    cache = CaptureCache(tmp_path / "captures")
    assert cache.get("program", "cpu") is None
    cache.put("program", "cpu", [_spec(), _spec("other")])
    again = CaptureCache(tmp_path / "captures")  # another evaluator, another process: the same files
    assert again.get("program", "cpu") == [_spec(), _spec("other")]
    assert again.get("program", "cuda") is None and again.get("program ", "cpu") is None
    cache.put("nothing", "cpu", [])  # a candidate that builds nothing is a capture too
    assert again.get("nothing", "cpu") == []
    assert again.stats() == {"hits": 2, "misses": 2}


def test_an_unreadable_record_is_captured_again(tmp_path, caplog):
    cache = CaptureCache(tmp_path)
    cache.put("program", "cpu", [_spec()])
    (record,) = tmp_path.glob("*.json")
    record.write_text('[{"name": 3')
    with caplog.at_level(logging.WARNING):
        assert cache.get("program", "cpu") is None
    assert "unreadable capture record" in caplog.text
    record.write_text('[{"cpp_sources": "not a list"}]')
    assert cache.get("program", "cpu") is None


@pytest.mark.slow
def test_a_warm_prebuild_does_not_capture_again(build_cache: Path, tmp_path, examples_dir, monkeypatch):
    candidate = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    config = SandboxConfig(backend="cpu", build={"cache_dir": build_cache})
    first = Evaluator(config)
    first.captures = CaptureCache(tmp_path / "captures")
    (built,) = first.prebuild(candidate, None)
    assert first.captures.stats() == {"hits": 0, "misses": 1}

    second = Evaluator(config)
    second.captures = CaptureCache(tmp_path / "captures")

    def no_capture(candidate: str):
        raise AssertionError("captured again")

    monkeypatch.setattr(second, "capture", no_capture)
    (again,) = second.prebuild(candidate, None)
    assert again.cached and again.key == built.key and second.captures.stats()["hits"] == 1


@pytest.mark.slow
def test_a_failed_capture_is_not_kept(build_cache: Path, tmp_path):
    ev = Evaluator(SandboxConfig(backend="cpu", build={"cache_dir": build_cache}))
    ev.captures = CaptureCache(tmp_path / "captures")
    candidate = "raise RuntimeError('not today')\n"
    assert ev.prebuild(candidate, None) == []
    assert not list((tmp_path / "captures").glob("*.json"))


def test_a_failed_write_leaves_no_file_behind(tmp_path, monkeypatch):
    import json

    cache = CaptureCache(tmp_path)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", full_disk)
    with pytest.raises(OSError):
        cache.put("program", "cpu", [_spec()])
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert cache.get("program", "cpu") is None
