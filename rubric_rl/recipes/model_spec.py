"""The shape of the model a recipe trains, read from its ``config.json`` — or, where none is reachable (a laptop
without the weights and without network), from the bundled table ``recipes/models.yaml``, clearly labelled as
an estimate.

Only dense decoder-only transformers (the Llama/Qwen layout) are counted exactly; a mixture-of-experts config is
read but flagged, because its parameter count here would be wrong.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from rubric_rl.resources import content_dir

_LORA_TARGETS_PER_LAYER = 7  # q, k, v, o, gate, up, down: "all-linear" on a Llama/Qwen block


class ModelSpec(BaseModel):
    """The numbers the memory estimate reads."""

    name: str
    source: str = Field(description="Where the numbers came from, shown in every report.")
    estimated: bool = Field(description="True when read from the bundled table rather than the model's own config.")
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    moe: bool = False

    @property
    def n_params(self) -> int:
        """Parameters of a dense decoder: embeddings, attention (with Qwen's q/k/v bias), gated MLP, norms."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        q = self.num_attention_heads * self.head_dim
        attn = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if self.attention_bias else 0)
        mlp = 3 * h * self.intermediate_size
        per_layer = attn + mlp + 2 * h
        embed = self.vocab_size * h
        head = 0 if self.tie_word_embeddings else self.vocab_size * h
        return embed + self.num_hidden_layers * per_layer + h + head

    def lora_params(self, rank: int) -> int:
        """Trainable parameters of LoRA of ``rank`` on every linear layer of every block."""
        h, i = self.hidden_size, self.intermediate_size
        q = self.num_attention_heads * self.head_dim
        kv = self.num_key_value_heads * self.head_dim
        fan = (h + q) + 2 * (h + kv) + (q + h) + 2 * (h + i) + (i + h)
        return rank * fan * self.num_hidden_layers

    def kv_bytes_per_token(self, tensor_parallel: int, dtype_bytes: int = 2) -> int:
        """K and V of one token on one GPU of a tensor-parallel group (KV heads are replicated past their count)."""
        heads_per_gpu = max(1, math.ceil(self.num_key_value_heads / tensor_parallel))
        return 2 * self.num_hidden_layers * heads_per_gpu * self.head_dim * dtype_bytes


def spec_from_hf_config(config: dict[str, Any], name: str, source: str, estimated: bool = False) -> ModelSpec:
    """A spec from the fields of a Hugging Face ``config.json`` (multimodal configs: their ``text_config``)."""
    c = config.get("text_config") or config
    heads = int(c["num_attention_heads"])
    return ModelSpec(
        name=name,
        source=source,
        estimated=estimated,
        hidden_size=int(c["hidden_size"]),
        intermediate_size=int(c["intermediate_size"]),
        num_hidden_layers=int(c["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=int(c.get("num_key_value_heads") or heads),
        head_dim=int(c.get("head_dim") or c["hidden_size"] // heads),
        vocab_size=int(c["vocab_size"]),
        max_position_embeddings=c.get("max_position_embeddings"),
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        attention_bias=bool(c.get("attention_bias", c.get("model_type") == "qwen2")),
        moe=any(k in c for k in ("num_experts", "num_local_experts", "n_routed_experts")),
    )


@lru_cache(maxsize=4)
def model_table(path: str | None = None) -> dict[str, dict[str, Any]]:
    """The bundled table of architectures (``recipes/models.yaml``), or another file of the same form."""
    file = Path(path) if path else content_dir("recipes") / "models.yaml"
    return dict(yaml.safe_load(file.read_text())["models"])


def _from_table(key: str, why: str) -> ModelSpec:
    entry = {k: v for k, v in model_table()[key].items() if k != "match"}
    return spec_from_hf_config(entry, key, f"recipes/models.yaml entry {key!r} (an estimate: {why})", estimated=True)


def _from_transformers_cache(name: str) -> dict[str, Any] | None:
    """The config of a model name already in the local Hugging Face cache; never a download."""
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(name, local_files_only=True).to_dict()
    except (ImportError, OSError, ValueError):
        return None


def hf_config(path: str) -> tuple[dict[str, Any], str] | None:
    """(the model's config.json as a dict, where it was read) from a local directory or the local Hugging Face
    cache; None where neither has it. Never a download."""
    local = Path(path).expanduser()
    if (local / "config.json").is_file():
        return json.loads((local / "config.json").read_text()), f"{local}/config.json"
    if not local.exists() and not path.startswith((".", "/", "~")) and path.count("/") <= 1:
        cached = _from_transformers_cache(path)
        if cached is not None:
            return cached, "the local Hugging Face cache"
    return None


def load_model_spec(path: str, assume: str | None = None) -> tuple[ModelSpec | None, str]:
    """The spec of the model at ``path`` (a directory or a hub name) and, when there is none, why.

    Order: ``config.json`` in the directory; a locally cached hub config; the ``assume`` entry of the table; the
    table entry whose ``match`` substring occurs in the path.
    """
    found = hf_config(path)
    if found is not None:
        config, where = found
        return spec_from_hf_config(config, path, where), ""
    table = model_table()
    if assume is not None:
        if assume not in table:
            return None, f"--assume-model {assume!r} is not in recipes/models.yaml (entries: {sorted(table)})"
        return _from_table(assume, f"--assume-model, no config.json at {path}"), ""
    lowered = path.lower()
    for key, entry in table.items():
        if any(m in lowered for m in entry.get("match", [])):
            return _from_table(key, f"no config.json reachable at {path}"), ""
    return None, (
        f"no config.json at {path}, not in the local Hugging Face cache, and no recipes/models.yaml entry matches "
        f"its name (pass --assume-model one of {sorted(table)})"
    )
