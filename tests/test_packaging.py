"""The wheel carries the content folders: an installed package finds its bundled rubrics and skill cards."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_content_and_loads_a_bundled_rubric(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("rubric_rl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for folder in ("judges", "skills", "rollouts", "recipes", "examples"):
        assert any(n.startswith(f"rubric_rl/_content/{folder}/") for n in names), folder
    assert not any(n.endswith("stub_server.py") for n in names)  # test infrastructure stays in tests/
    for recipe_file in ("models.yaml", "common.sh", "stitchcuda-grpo-32b/judge/hosted.yaml", "one-gpu-try/run.sh"):
        assert f"rubric_rl/_content/recipes/{recipe_file}" in names, recipe_file
    for data in ("seed_ops.yaml", "compose_prompt.md"):  # task synthesis's package data
        assert f"rubric_rl/tasks/synth/{data}" in names, data
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = (
        "import rubric_rl, rubric_rl.resources as r\n"
        "from rubric_rl.judge import load_rubric\n"
        "from rubric_rl.skills import load_skill\n"
        f"assert rubric_rl.__file__.startswith({str(target)!r}), rubric_rl.__file__\n"
        "assert '_content' in str(r.content_dir('judges'))\n"
        "rubric = load_rubric('stitchcuda')\n"
        "from rubric_rl.recipes import load_recipe\n"
        "assert '_content' in str(load_recipe('cuda-agent-staged/stage3_critic').path)\n"
        "from rubric_rl.tasks.synth import load_seed_table\n"
        "assert len(load_seed_table().ops) > 50\n"
        "print(rubric.name, len(rubric.dimensions), load_skill('refine').name)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert out.stdout.split() == ["stitchcuda", "4", "refine"]
