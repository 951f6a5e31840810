"""The reward on verl 0.9.1 (CPU): verl's reward loop built from a composed config, fed real DataProto rows
through ``run_single``: a correct CPU-backend candidate, an incorrect one, a hack, an unparsable response and
one whose judge calls fail (the judge is a real OpenAI-protocol server on 127.0.0.1). The sandbox runs for
real (cpu backend, in this process)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stub_server import Reply, answer_from_schema

from rubric_rl.reward import read_ledger
from rubric_rl.reward.verl import MANAGER_NAME, MANAGER_PATH, MODULE_PATH, VerlConfigError, check_verl_config

verl = pytest.importorskip("verl")
pytestmark = pytest.mark.slow

GROUP = 5
JUDGE_DOWN = "# judge-down"


def compose(overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides)


def reward_overrides(tokenizer_dir: Path, reward_yaml: Path, workers: int = 1) -> list[str]:
    return [
        f"actor_rollout_ref.model.path={tokenizer_dir}",
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.n={GROUP}",
        f"reward.num_workers={workers}",
        f"reward.custom_reward_function.path={MODULE_PATH}",
        "reward.reward_manager.source=importlib",
        f"reward.reward_manager.name={MANAGER_NAME}",
        f"reward.reward_manager.module.path={MANAGER_PATH}",
        f"+reward.custom_reward_function.reward_kwargs.config={reward_yaml}",
    ]


def make_rows(tokenizer: Any, reference: str, texts: list[str], uids: list[str], skill: str = "generate") -> Any:
    """A DataProto as verl's trainer hands it to the reward: left-padded prompts, right-padded responses."""
    import torch
    from verl import DataProto

    prompt = [{"role": "user", "content": "Write ModelNew for the reference."}]
    pids = tokenizer.encode(prompt[0]["content"], add_special_tokens=False)
    rids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    width = max(len(r) for r in rids) + 3
    pad = tokenizer.pad_token_id
    responses = torch.tensor([r + [pad] * (width - len(r)) for r in rids])
    mask = torch.tensor([[1] * len(pids) + [1] * len(r) + [0] * (width - len(r)) for r in rids])
    n = len(texts)

    def objects(values: list[Any]) -> np.ndarray:
        out = np.empty(n, dtype=object)
        out[:] = values
        return out

    return DataProto.from_dict(
        tensors={"prompts": torch.tensor([pids] * n), "responses": responses, "attention_mask": mask},
        non_tensors={
            "data_source": objects(["cpu_demo"] * n),
            "reward_model": objects([{"style": "rule", "ground_truth": reference}] * n),
            "extra_info": objects([{"task_id": "fused_add_relu", "skill": skill, "index": i} for i in range(n)]),
            "uid": objects(uids),
            "raw_prompt": objects([prompt] * n),
        },
    )


def judge_responder(request: dict[str, Any]) -> Reply:
    text = "\n".join(str(m.get("content")) for m in request.get("messages", []))
    return Reply(status=503) if JUDGE_DOWN in text else Reply(content=answer_from_schema(request))


@pytest.fixture
def reward_yaml(tmp_path: Path, stub_server, write_yaml) -> Path:
    stub_server.responder = judge_responder
    return write_yaml(
        tmp_path / "reward.yaml",
        {
            "judge": {
                "base_url": stub_server.url,
                "model": "stub-judge",
                "timeout_s": 5.0,
                "max_retries": 1,
                "backoff_initial_s": 0.01,
                "backoff_max_s": 0.05,
                "cache": False,
            },
            "service": {"mode": "inprocess"},
            "ledger": {"dir": str(tmp_path / "run")},
        },
    )


def test_check_verl_config(tokenizer_dir: Path, reward_yaml: Path) -> None:
    good = compose(reward_overrides(tokenizer_dir, reward_yaml))
    assert check_verl_config(good) == []
    legacy = compose([*reward_overrides(tokenizer_dir, reward_yaml), f"custom_reward_function.path={MODULE_PATH}"])
    with pytest.raises(VerlConfigError, match=r"^custom_reward_function\.path: .*never reads the legacy"):
        check_verl_config(legacy)
    naive = compose([f"reward.custom_reward_function.path={MODULE_PATH}", "actor_rollout_ref.rollout.name=vllm"])
    assert "masked samples get the fallback score" in check_verl_config(naive)[0]
    bad = compose(
        [*reward_overrides(tokenizer_dir, reward_yaml), "+reward.custom_reward_function.reward_kwargs.hack_penalty=3"]
    )
    with pytest.raises(VerlConfigError, match=r"reward_kwargs: .*hack_penalty"):
        check_verl_config(bad)


def test_run_single_scores_and_extra_info(
    tokenizer_dir: Path, reward_yaml: Path, reference, responses, stub_server
) -> None:
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker(compose(reward_overrides(tokenizer_dir, reward_yaml)))
    names = ["correct", "incorrect", "hack", "unparsable", "judge_down"]
    texts = [responses[n] for n in names[:-1]] + [
        responses["correct"].replace("import torch\n", f"{JUDGE_DOWN}\nimport torch\n", 1)
    ]
    rows = make_rows(worker.input_tokenizer, reference, texts, ["g"] * GROUP)

    async def score_all():
        return await asyncio.gather(*(worker.compute_score(rows[i : i + 1]) for i in range(len(rows))))

    outputs = dict(zip(names, worker.loop.run_until_complete(score_all()), strict=True))
    keys = [list(o["reward_extra_info"]) for o in outputs.values()]
    assert all(k == keys[0] for k in keys), "verl takes the key set from the first sample"
    info = {n: o["reward_extra_info"] for n, o in outputs.items()}
    for n, o in outputs.items():
        assert o["reward_score"] == info[n]["score"]
    for key in (
        "compiled",
        "correct",
        "hack",
        "speedup_eager",
        "speedup_compile",
        "judge_failed",
        "infra_error",
        "rubric_anti_hacking",
        "rubric_cuda_engineering",
        "evaluate_s",
        "judge_s",
        "total_s",
    ):
        assert key in keys[0]

    c = info["correct"]
    assert (c["correct"], c["compiled"], c["judged"], c["masked"], c["judge_failed"]) == (1, 1, 1, 0, 0)
    assert c["speedup_eager"] > 0 and c["evaluate_s"] > 0
    r = c["rubric_total"]  # the stub answers the middle level of every dimension
    assert c["score"] == pytest.approx((min(c["speedup_eager"], 3.0) + 0.3) * (1 + 1.0 * (r - 0.5)))
    assert (info["incorrect"]["score"], info["incorrect"]["correct"], info["incorrect"]["judged"]) == (0.0, 0, 0)
    assert (info["hack"]["score"], info["hack"]["hack"]) == (-1.0, 1)
    assert (info["unparsable"]["score"], info["unparsable"]["compiled"]) == (0.0, 0)
    down = info["judge_down"]
    assert (down["masked"], down["judge_failed"], down["correct"]) == (1, 1, 1)
    others = [info[n]["score"] for n in names[:-1]]
    assert down["score"] == pytest.approx(sum(others) / len(others))  # the group's mean: advantage 0

    records = {r.response: r for r in read_ledger(reward_yaml.parent / "run")}
    assert len(records) == GROUP
    assert all(r.group_id == "g" and r.group_size == GROUP and r.prompt for r in records.values())
    unparsable = records[responses["unparsable"]]
    assert unparsable.program is None and "no ```python code block" in (unparsable.extraction_error or "")
