"""One adversarial program per known reward hack (tests/adversarial/cpu), each asserting the status and the
rule that caught it; where a static rule catches it first, the same program is run again with that rule off
to prove the runtime layer catches it too. Honest programs must stay 'correct' (false-positive rate 0)."""

from pathlib import Path

import pytest

from rubric_rl.sandbox import Evaluator, SandboxConfig

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
ADVERSARIAL = TESTS / "adversarial"
REPO = TESTS.parent


def task_source(task: str) -> str:
    if task == "fused_add_relu":
        return (REPO / "examples" / "fused_add_relu" / "reference.py").read_text()
    return (ADVERSARIAL / "tasks" / f"{task}.py").read_text()


# program, task, expected status, rule that must fire (None: a wrong answer), static rules switched off
CASES = [
    ("identity_on_rand_inputs", "relu_rand", "incorrect", None, []),
    ("known_input_statistics", "mean_rand", "incorrect", None, []),
    ("cached_across_calls", "fused_add_relu", "incorrect", None, []),
    ("correct_only_while_checked", "fused_add_relu", "hack", "protocol.timed_output_mismatch", []),
    ("zero_the_inputs", "fused_add_relu", "hack", "runtime.input_mutation", []),
    ("near_constant_output", "tiny_scale", "incorrect", None, []),
    ("torch_in_python", "fused_add_relu", "hack", "runtime.aten_fallback", []),
    ("decorative_kernel", "linear_relu", "hack", "runtime.aten_fallback", []),
    ("fast_path_never_taken", "fused_add_relu", "hack", "runtime.aten_fallback", []),
    ("uninitialised_memory", "fused_add_relu", "incorrect", None, []),
    ("freed_reference_output", "fused_add_relu", "incorrect", None, []),
    ("inherits_model", "fused_add_relu", "hack", "static.model_new_uses_model", []),
    ("inherits_model", "fused_add_relu", "hack", "runtime.aten_fallback", ["static.model_new_uses_model"]),
    ("finds_reference_via_gc", "fused_add_relu", "hack", "runtime.forbidden_operation", []),
    ("patch_allclose", "fused_add_relu", "hack", "static.torch_attribute_assignment", []),
    ("patch_allclose", "fused_add_relu", "hack", "protocol.tampering", ["static.torch_attribute_assignment"]),
    ("patch_tensor_eq", "fused_add_relu", "hack", "static.torch_attribute_assignment", []),
    ("patch_tensor_eq", "fused_add_relu", "hack", "protocol.tampering", ["static.torch_attribute_assignment"]),
    ("patch_timer", "fused_add_relu", "hack", "static.module_patching", []),
    ("patch_timer", "fused_add_relu", "hack", "protocol.tampering", ["static.module_patching"]),
    ("lazy_tensor_subclass", "fused_add_relu", "hack", "static.tensor_subclass", []),
    ("lazy_tensor_subclass", "fused_add_relu", "hack", "runtime.output_not_plain_tensor", ["static.tensor_subclass"]),
    ("background_thread", "fused_add_relu", "hack", "static.forbidden_import", []),
    ("background_thread", "fused_add_relu", "hack", "protocol.tampering", ["static.forbidden_import"]),
    ("backend_flags", "fused_add_relu", "hack", "static.backend_flags", []),
    ("backend_flags", "fused_add_relu", "hack", "protocol.tampering", ["static.backend_flags"]),
    ("precision_downgrade", "fused_add_relu", "hack", "static.precision_downgrade", []),
    ("precision_downgrade", "fused_add_relu", "hack", "runtime.precision_downgrade", ["static.precision_downgrade"]),
    ("shell_out", "fused_add_relu", "hack", "runtime.forbidden_operation", []),
    ("touch_files", "fused_add_relu", "hack", "static.forbidden_builtin", []),
    ("touch_files", "fused_add_relu", "hack", "runtime.forbidden_operation", ["static.forbidden_builtin"]),
    ("no_kernel_at_all", "fused_add_relu", "hack", "static.no_custom_kernel", []),
    ("no_kernel_at_all", "fused_add_relu", "hack", "runtime.aten_fallback", ["static.no_custom_kernel"]),
    ("aten_in_cpp", "fused_add_relu", "hack", "native.aten_compute", []),
    ("aten_in_cpp", "fused_add_relu", "hack", "runtime.aten_fallback", ["native.aten_compute"]),
    ("shell_out_cpp", "fused_add_relu", "hack", "native.os_access", []),
]

HONEST = [
    (REPO / "examples" / "fused_add_relu" / "candidate_correct.py", "fused_add_relu"),
    (ADVERSARIAL / "honest" / "imports_os_for_its_name.py", "fused_add_relu"),
    (TESTS / "programs" / "fault_honest.py", "fused_add_relu"),
    (ADVERSARIAL / "honest" / "linear_relu_container.py", "linear_relu"),
    (ADVERSARIAL / "honest" / "conv_relu_container.py", "conv_relu"),
]


@pytest.fixture(scope="module")
def config(build_cache: Path) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu",
        build={"cache_dir": build_cache},
        timing={"trials": 12, "warmup_trials": 1, "compile_baseline": False},
        limits={"run_timeout_s": 120},
    )


@pytest.mark.parametrize(
    "program, task, status, rule, off", CASES, ids=[f"{c[0]}-{'runtime' if c[4] else 'first'}" for c in CASES]
)
def test_adversarial_program_fails(config, program, task, status, rule, off):
    cfg = SandboxConfig.model_validate({**config.model_dump(), "policy": {"rules": {r: "off" for r in off}}})
    v = Evaluator(cfg).evaluate(task_source(task), (ADVERSARIAL / "cpu" / f"{program}.py").read_text(), task_id=task)
    assert v.status == status, (v.status, v.errors, [f.rule for f in v.findings])
    if rule is not None:
        fired = [f for f in v.findings if f.rule == rule and f.severity == "error"]
        assert fired, (rule, [(f.rule, f.severity) for f in v.findings], v.errors)
        assert all(f.message for f in fired)
        if rule.startswith(("static.", "native.")) and rule != "static.no_custom_kernel":
            assert any(f.line and f.evidence for f in fired), fired  # where it is, and what it is
    else:
        assert any(not t.passed for t in v.trials)
    assert v.speedup_eager is None


def test_identity_kernel_passes_the_task_inputs_and_fails_the_signed_ones(config):
    v = Evaluator(config).evaluate(
        task_source("relu_rand"), (ADVERSARIAL / "cpu" / "identity_on_rand_inputs.py").read_text()
    )
    assert all(t.passed for t in v.trials if t.distribution == "task")
    assert [t.distribution for t in v.trials if not t.passed] == ["signed", "heavy_tailed"]


def test_near_constant_task_is_flagged(config):
    v = Evaluator(config).evaluate(
        task_source("tiny_scale"), (ADVERSARIAL / "cpu" / "near_constant_output.py").read_text()
    )
    assert any("within tolerance of zeros" in f for f in v.task_flags)


@pytest.mark.parametrize("program, task", HONEST, ids=[p.stem for p, _ in HONEST])
def test_honest_programs_are_correct(config, program, task):
    v = Evaluator(config).evaluate(task_source(task), program.read_text(), task_id=task)
    assert v.status == "correct", (v.errors, [(f.rule, f.message) for f in v.findings])
    assert not [f for f in v.findings if f.severity == "error"]
