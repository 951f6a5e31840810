"""Helpers of the recipe tests: a tiny model (config and tokenizer built here, no download), rows in verl's RL
parquet format, and the overrides that point a bundled recipe at them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiny_model import save_qwen2_config, save_tokenizer

HERE = Path(__file__).resolve().parent
WORDS = [f"w{i}" for i in range(200)]
REFERENCE = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"


def make_tiny_model(path: Path, max_positions: int = 32768) -> Path:
    """A two-layer Qwen2-shaped config and a byte-level BPE tokenizer (trained here on a few hundred words) with a
    ChatML template, saved as a model folder. transformers picks Qwen2Tokenizer for it, as for the real models."""
    vocab = save_tokenizer(path, [" ".join(WORDS)] * 20, vocab_size=600)
    save_qwen2_config(path, vocab, max_position_embeddings=max_positions)
    return path


def rl_rows(n: int, prompt_words: int, skill: str = "generate") -> list[dict[str, Any]]:
    """Rows in the format of `rubric-rl skills build`: one chat prompt of ``prompt_words`` tokenizer words each."""
    text = " ".join(WORDS[i % len(WORDS)] for i in range(prompt_words))
    return [
        {
            "data_source": f"rubric_rl/{skill}",
            "prompt": [{"role": "system", "content": "w1 w2"}, {"role": "user", "content": text}],
            "ability": "cuda",
            "reward_model": {"style": "rule", "ground_truth": REFERENCE},
            "extra_info": {"task_id": f"T-{i}", "skill": skill, "split": "train"},
        }
        for i in range(n)
    ]


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def recipe_overrides(name: str, model: Path, data: Path, judge_url: str) -> list[str]:
    """Overrides that point a bundled recipe at the session's tiny model, data and judge."""

    def files(skills: tuple[str, ...], split: str) -> str:
        return "[" + ",".join(str(data / s / f"{split}.parquet") for s in skills) + "]"

    if name.endswith("stage2_rft"):
        return [f"model.path={model}", f"data.train_files={data / 'rft' / 'train.parquet'}"]
    skills = ("generate", "refine") if name.startswith("stitchcuda") else ("generate",)
    out = [
        f"actor_rollout_ref.model.path={model}",
        f"data.train_files={files(skills, 'train')}",
        f"data.val_files={files(skills, 'val')}",
    ]
    if name.startswith("stitchcuda"):
        kw = "reward.custom_reward_function.reward_kwargs.judge"
        out += [f"{kw}.base_url={judge_url}", f"{kw}.model=stub-judge"]
    return out


BUNDLED = [
    "one-gpu-try",
    "stitchcuda-grpo-32b",
    "cuda-agent-staged/stage1_warmup",
    "cuda-agent-staged/stage2_rft",
    "cuda-agent-staged/stage3_critic",
    "cuda-agent-staged/stage4_ppo",
]
