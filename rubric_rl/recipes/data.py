"""The data a recipe names: the files exist, carry the columns the recipe's keys name, and their prompts fit.

Why the length check matters in verl 0.9.1: the dataset no longer tokenizes (``data.truncation`` is not applied
there); the agent loop left-truncates a prompt longer than ``rollout.prompt_length`` with only a log line, cutting
off the system prompt and the start of the reference program. ``data.filter_overlong_prompts`` drops such rows
instead. Either way the run trains on something other than the dataset, so a prompt that does not fit is an
error here unless filtering is on (then a warning with the count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_rl.recipes.report import Finding
from rubric_rl.recipes.tree import dig

MAKE_RL_DATA = "rubric-rl skills build --tasks SOURCE --skill generate|refine --out DIR"
MAKE_SFT_DATA = "rubric-rl skills sft (the rejection fine-tuning export of a reward ledger)"


def _err(key: str, message: str, check: str = "data") -> Finding:
    return Finding(level="error", check=check, key=key, message=message)  # type: ignore[arg-type]


def data_files(value: Any) -> list[str]:
    """verl's ``train_files``/``val_files``: one path or a list of them."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _schema(path: Path) -> Any:
    import pyarrow.parquet as pq

    return pq.read_schema(path)


def _column_findings(path: Path, file_key: str, required: Mapping[str, str]) -> list[Finding]:
    """``required``: column name -> the key that names it (or what needs it)."""
    schema = _schema(path)
    names = set(schema.names)
    out: list[Finding] = []
    for column, key in required.items():
        top, _, field = column.partition(".")
        if top not in names:
            out.append(_err(key, f"column {top!r} is missing from {path} ({file_key}); it has {sorted(names)}"))
        elif field:
            kind = schema.field(top).type
            fields = {kind.field(i).name for i in range(kind.num_fields)} if hasattr(kind, "num_fields") else set()
            if field not in fields:
                out.append(_err(key, f"column {top!r} of {path} has no field {field!r} (it has {sorted(fields)})"))
    return out


def _files_findings(cfg: Mapping[str, Any], keys: Sequence[str], how: str) -> tuple[list[Path], list[Finding]]:
    found: list[Path] = []
    out: list[Finding] = []
    for key in keys:
        files = data_files(dig(cfg, key))
        if not files and key.endswith("train_files"):
            out.append(_err(key, f"no training file (make one with: {how})"))
        for f in files:
            path = Path(f).expanduser()
            if not path.is_file():
                out.append(_err(key, f"{path.absolute()} does not exist (make it with: {how})"))
            else:
                found.append(path)
    return found, out


def load_tokenizer(path: str, trust_remote_code: bool = False) -> tuple[Any | None, str]:
    """A tokenizer from a local directory or the local Hugging Face cache (never a download), or why not."""
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code), ""
    except (ImportError, OSError, ValueError) as e:
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def token_count(tokenizer: Any, messages: list[dict[str, Any]], generation_prompt: bool, **kwargs: Any) -> int:
    """Tokens of chat ``messages`` under the tokenizer's chat template (transformers 4 and 5 return types)."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=True, **kwargs)
    if isinstance(out, Mapping) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], list):
        out = out[0]
    return len(out)


def _lengths(path: Path, column: str, max_rows: int | None, tokenizer: Any, gen: bool, kw: dict) -> list[int]:
    import pyarrow.parquet as pq

    rows = pq.read_table(path, columns=[column]).column(column).to_pylist()
    return [token_count(tokenizer, list(r), gen, **kw) for r in rows[:max_rows]]


def _length_findings(
    paths: list[Path], column: str, limit: int, limit_key: str, tokenizer: Any, gen: bool, cfg_data: Mapping, rows: int
) -> list[Finding]:
    kw = dict(cfg_data.get("apply_chat_template_kwargs") or {})
    out: list[Finding] = []
    for path in paths:
        lengths = _lengths(path, column, rows, tokenizer, gen, kw)
        over = [n for n in lengths if n > limit]
        summary = f"{path.name}: {len(lengths)} rows, longest {max(lengths, default=0)} tokens"
        if not over:
            out.append(Finding(level="info", check="data", key=None, message=f"{summary}, all within {limit}"))
        elif cfg_data.get("filter_overlong_prompts"):
            out.append(
                Finding(
                    level="warning",
                    check="data",
                    key=limit_key,
                    message=(f"{summary}: {len(over)} over {limit} will be dropped by data.filter_overlong_prompts"),
                )
            )
        else:
            out.append(
                _err(
                    limit_key,
                    f"{summary}: {len(over)} row(s) over {limit} tokens would be cut (raise it, "
                    "or rebuild the data with this limit so they are dropped and counted)",
                )
            )
    return out


def _tokenizer_for(cfg: Mapping[str, Any], model_section: str, override: str | None) -> tuple[Any | None, str, str]:
    model = dig(cfg, model_section, {}) or {}
    path = override or model.get("tokenizer_path") or model.get("path") or ""
    tokenizer, why = load_tokenizer(str(path), bool(model.get("trust_remote_code", False))) if path else (None, "")
    return tokenizer, str(path), why


def check_rl_data(cfg: Mapping[str, Any], tokenizer_path: str | None, max_rows: int | None) -> list[Finding]:
    """Files, columns (``data.prompt_key``, ``data.reward_fn_key``, ``reward_model.ground_truth``) and prompt
    lengths (``data.max_prompt_length``) of a PPO recipe's data."""
    data = dig(cfg, "data", {})
    prompt_key = str(data.get("prompt_key", "prompt"))
    required = {
        prompt_key: "data.prompt_key",
        str(data.get("reward_fn_key", "data_source")): "data.reward_fn_key",
        "reward_model.ground_truth": "reward.custom_reward_function (reads reward_model.ground_truth)",
    }
    paths, tokenizer, out = _files_and_tokenizer(
        cfg, MAKE_RL_DATA, required, "actor_rollout_ref.model", tokenizer_path, "prompt", "data.max_prompt_length"
    )
    if tokenizer is None:
        return out
    limit = int(data.get("max_prompt_length", 512))
    return _length_findings(paths, prompt_key, limit, "data.max_prompt_length", tokenizer, True, data, max_rows)


def check_sft_data(cfg: Mapping[str, Any], tokenizer_path: str | None, max_rows: int | None) -> list[Finding]:
    """Files, the ``data.messages_key`` column and whole-conversation lengths (``data.max_length``) of an SFT
    recipe's data."""
    data = dig(cfg, "data", {})
    key = str(data.get("messages_key", "messages"))
    paths, tokenizer, out = _files_and_tokenizer(
        cfg, MAKE_SFT_DATA, {key: "data.messages_key"}, "model", tokenizer_path, "conversation", "data.max_length"
    )
    if tokenizer is None:
        return out
    limit = int(data.get("max_length", 1024))
    sft = {**data, "filter_overlong_prompts": False}
    return _length_findings(paths, key, limit, "data.max_length", tokenizer, False, sft, max_rows)


def _files_and_tokenizer(
    cfg: Mapping[str, Any],
    how: str,
    required: Mapping[str, str],
    model_section: str,
    tokenizer_path: str | None,
    lengths_of: str,
    limit_key: str,
) -> tuple[list[Path], Any | None, list[Finding]]:
    """The data files and their ``required`` columns checked, then the tokenizer that counts ``lengths_of``
    (prompt, conversation) tokens: ``(paths, tokenizer, findings)``; without a tokenizer, the findings are all."""
    paths, out = _files_findings(cfg, ["data.train_files", "data.val_files"], how)
    for path in paths:
        out += _column_findings(path, "data", required)
    if out or not paths:
        return paths, None, out
    tokenizer, where, why = _tokenizer_for(cfg, model_section, tokenizer_path)
    if tokenizer is None:
        message = (
            f"{lengths_of} lengths not checked: no tokenizer reachable at {where!r} ({why}); pass --tokenizer PATH"
        )
        return paths, None, [Finding(level="warning", check="data", key=limit_key, message=message)]
    return paths, tokenizer, []
