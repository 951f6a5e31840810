"""The HTML report in a real headless browser (Chromium): it renders, and every image loads. Also the command,
and wandb in offline mode."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_rl.cli import app

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")

# Loads the report in a frame of the same folder and writes what the browser saw into the page, which
# --dump-dom prints: the frame's load event fires only after its images have loaded or failed.
PROBE = """<!DOCTYPE html><html><body>
<iframe id="f" src="report.html" width="1280" height="900"></iframe>
<script>
document.getElementById('f').onload = () => {
  const d = document.getElementById('f').contentDocument;
  const images = Array.from(d.images).map(i => ({src: i.getAttribute('src'), complete: i.complete,
                                                 width: i.naturalWidth, height: i.naturalHeight}));
  const out = document.createElement('pre');
  out.id = 'result';
  out.textContent = JSON.stringify({title: d.title, tables: d.querySelectorAll('table').length, images: images});
  document.body.appendChild(out);
};
</script></body></html>"""


def _browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def test_html_report_renders_with_its_images_in_a_headless_browser(fixed_runs, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no Chromium (apt-get install chromium-headless-shell; the Makefile's test target does)")
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", *map(str, fixed_runs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "base / own_kernels" in result.output and "60.0%" in result.output
    (out / "probe.html").write_text(PROBE)
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run(
        [*args, "--virtual-time-budget=20000", "--dump-dom", (out / "probe.html").as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.DOTALL)
    assert found, f"the probe did not run: {dom[-2000:]}"
    seen = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert seen["title"] == "Rollout report: base, trained" and seen["tables"] >= 6
    assert [i["src"] for i in seen["images"]] == [
        "plots/speedup_distribution.png", "plots/fast_p.png", "plots/turns_to_first_correct.png"
    ]  # fmt: skip
    for image in seen["images"]:
        assert image["complete"] and image["width"] > 300 and image["height"] > 200, image
    shot = out / "screenshot.png"
    subprocess.run([*args, "--window-size=1280,2000", f"--screenshot={shot}", (out / "report.html").as_uri()],
                   capture_output=True, timeout=120)  # fmt: skip
    assert shot.stat().st_size > 50_000  # a page of tables and three plots, not a blank one


def test_a_missing_image_is_seen_as_broken(fixed_runs, tmp_path):
    """The probe can fail: with a plot removed, the browser reports that image as not loaded."""
    browser = _browser()
    if browser is None:
        pytest.skip("no Chromium")
    out = tmp_path / "report"
    assert CliRunner().invoke(app, ["report", str(fixed_runs[0]), "--out", str(out)]).exit_code == 0
    (out / "plots" / "fast_p.png").unlink()
    (out / "probe.html").write_text(PROBE)
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         "--virtual-time-budget=20000", "--dump-dom", (out / "probe.html").as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    seen = json.loads(re.search(r'<pre id="result">(.*?)</pre>', dom, re.DOTALL).group(1).replace("&quot;", '"'))
    widths = {i["src"]: i["width"] for i in seen["images"]}
    assert widths["plots/fast_p.png"] == 0 and widths["plots/speedup_distribution.png"] > 0


def test_report_command_errors_and_json(fixed_runs, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(app, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "r")])
    assert missing.exit_code == 2 and "no results.jsonl" in missing.output
    result = runner.invoke(app, ["report", str(fixed_runs[0]), "--out", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["runs"][0]["label"] == "base"


def test_wandb_offline(fixed_runs, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app, ["report", *map(str, fixed_runs), "--out", str(out), "--wandb-project", "rubric-rl-test", "--json"]
    )
    assert result.exit_code == 0, result.output
    dirs = json.loads(result.output)["wandb_dirs"]
    assert len(dirs) == 2
    for d in dirs:  # offline, the summary lives in the run's record file (what `wandb sync` uploads)
        (record,) = Path(d).parent.glob("run-*.wandb")
        deadline = time.monotonic() + 60  # wandb's service process may still be writing it after finish()
        while b"correct_rate" not in record.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.5)
        data = record.read_bytes()
        assert b"correct_rate" in data and b"fast_p/eager_noise_aware/1" in data
        assert len(list((Path(d) / "media" / "images").glob("*.png"))) == 3
