"""Memory per GPU of a verl FSDP run, estimated from the model's shape and the recipe, before a GPU is rented.

verl's hybrid engine puts the trainer (actor, reference, critic under FSDP) and the rollout engine (vLLM) on the
same GPUs and alternates them. Two moments bound the memory:

- **training**: every FSDP shard the trainer keeps (weights and gradients in ``fsdp_config.model_dtype``, AdamW's
  two fp32 moments), plus the activations of one micro-batch (checkpointed layer inputs, one layer recomputed,
  the fp32 logits), plus vLLM's reservation if ``rollout.free_cache_engine`` is off;
- **rollout**: vLLM takes ``gpu_memory_utilization`` of the GPU for its weights (bf16, split by tensor
  parallelism) and KV cache, while the trainer's shards stay on the GPU unless ``param_offload`` /
  ``optimizer_offload`` move them to the host between phases.

These are estimates (allocator fragmentation, NCCL buffers and CUDA graphs are folded into a fixed overhead);
they catch the plans that cannot work (a 32B full fine-tune on one GPU, a KV cache with no room for one
sequence), not the last few GiB.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from rubric_rl.recipes.model_spec import ModelSpec
from rubric_rl.recipes.report import Finding, Level
from rubric_rl.recipes.tree import dig

GIB = 1024**3
VLLM_OVERHEAD_GIB = 2.0  # CUDA graphs, sampler and activation workspace of one vLLM worker: a rough constant
ADAM_BYTES = 8  # two fp32 moments per trainable parameter
_DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
Phase = Literal["training", "rollout"]


class MemoryRow(BaseModel):
    phase: Phase
    component: str
    gib: float
    key: str


class MemoryEstimate(BaseModel):
    """Per-GPU estimate of both phases, with the rows they add up from."""

    gpu_gib: float
    model: ModelSpec
    rows: list[MemoryRow]
    kv_cache_gib: float = 0.0
    kv_tokens: int = 0
    sequence_tokens: int = 0
    engine_max_len: int = 0

    def total(self, phase: Phase) -> float:
        return sum(r.gib for r in self.rows if r.phase == phase)

    @property
    def full_sequences(self) -> float:
        """How many sequences of the full prompt + response length one rollout replica's KV cache holds."""
        return self.kv_tokens / max(1, self.sequence_tokens)


def _bytes(dtype: Any) -> int:
    return _DTYPE_BYTES.get(str(dtype).lower(), 4)


def _lora_rank(model: dict[str, Any]) -> int:
    rank = int(dig(model, "lora.rank", 0) or 0)
    return rank if rank > 0 else int(model.get("lora_rank", 0) or 0)


def _fsdp_states(
    spec: ModelSpec, fsdp: dict[str, Any], lora_rank: int, shards: int, prefix: str, who: str
) -> list[tuple[str, float, str, bool]]:
    """(component, GiB per GPU, key, kept on the GPU during rollout) for one FSDP-trained model."""
    wbytes = _bytes(fsdp.get("model_dtype", "fp32"))
    trainable = spec.lora_params(lora_rank) if lora_rank > 0 else spec.n_params
    weights = spec.n_params * wbytes / shards / GIB
    grads = trainable * wbytes / shards / GIB
    optim = trainable * ADAM_BYTES / shards / GIB
    params_stay = not fsdp.get("param_offload", False)
    optim_stay = not fsdp.get("optimizer_offload", False)
    kind = f"LoRA r={lora_rank}" if lora_rank > 0 else "full"
    return [
        (
            f"{who} weights ({fsdp.get('model_dtype', 'fp32')}, 1/{shards})",
            weights,
            f"{prefix}.param_offload",
            params_stay,
        ),
        (f"{who} gradients ({kind})", grads, f"{prefix}.model_dtype", False),
        (f"{who} AdamW moments ({kind})", optim, f"{prefix}.optimizer_offload", optim_stay),
    ]


def _activation_tokens(cfg: dict[str, Any], section: str, seq: int) -> int:
    """Tokens in one micro-batch of one GPU's forward-backward."""
    s = dig(cfg, section, {})
    if s.get("use_dynamic_bsz"):
        tokens = int(s.get("ppo_max_token_len_per_gpu") or seq)
    else:
        tokens = int(s.get("ppo_micro_batch_size_per_gpu") or 1) * seq
    return max(1, tokens // max(1, int(s.get("ulysses_sequence_parallel_size") or 1)))


def _activations(spec: ModelSpec, tokens: int, checkpointing: bool, logits: bool) -> float:
    h, layers = spec.hidden_size, spec.num_hidden_layers
    per_layer_full = 34 * tokens * h  # bf16 activations of one block (flash attention: no s^2 term)
    kept = layers * tokens * h * 2 + per_layer_full if checkpointing else layers * per_layer_full
    return (kept + (tokens * spec.vocab_size * 4 if logits else 0)) / GIB


def estimate_memory(
    cfg: dict[str, Any], spec: ModelSpec, gpu_gib: float, use_critic: bool, use_ref: bool
) -> MemoryEstimate:
    """Both phases' memory per GPU for the resolved PPO config ``cfg`` (a plain dict)."""
    n_gpus = int(dig(cfg, "trainer.nnodes", 1)) * int(dig(cfg, "trainer.n_gpus_per_node", 1))
    ar = "actor_rollout_ref"
    fsdp = dig(cfg, f"{ar}.actor.fsdp_config", {})
    shards = n_gpus if int(fsdp.get("fsdp_size", -1)) <= 0 else int(fsdp["fsdp_size"])
    lora = _lora_rank(dig(cfg, f"{ar}.model", {}))
    seq = int(dig(cfg, "data.max_prompt_length", 512)) + int(dig(cfg, "data.max_response_length", 512))
    rollout = dig(cfg, f"{ar}.rollout", {})
    tp = int(rollout.get("tensor_model_parallel_size", 1))

    states = _fsdp_states(spec, fsdp, lora, shards, f"{ar}.actor.fsdp_config", "actor")
    if use_ref and lora == 0:
        ref = dig(cfg, f"{ar}.ref.fsdp_config", {})
        ref_w = spec.n_params * _bytes(ref.get("model_dtype", "fp32")) / shards / GIB
        states.append(("reference weights", ref_w, f"{ar}.ref.fsdp_config.param_offload", not ref.get("param_offload")))
    if use_critic:
        critic_fsdp = dig(cfg, "critic.fsdp", {})
        critic_lora = _lora_rank(dig(cfg, "critic.model", {}))
        states += _fsdp_states(spec, critic_fsdp, critic_lora, shards, "critic.fsdp", "critic")

    rows = [MemoryRow(phase="training", component=c, gib=g, key=k) for c, g, k, _ in states]
    checkpointing = bool(dig(cfg, f"{ar}.model.enable_gradient_checkpointing", True))
    act = _activations(spec, _activation_tokens(cfg, f"{ar}.actor", seq), checkpointing, logits=True)
    act_key = f"{ar}.actor.ppo_max_token_len_per_gpu"
    if use_critic:
        critic_ckpt = bool(dig(cfg, "critic.model.enable_gradient_checkpointing", True))
        critic_act = _activations(spec, _activation_tokens(cfg, "critic", seq), critic_ckpt, logits=False)
        if critic_act > act:
            act, act_key = critic_act, "critic.ppo_max_token_len_per_gpu"
    rows.append(MemoryRow(phase="training", component="activations of one micro-batch", gib=act, key=act_key))

    util = float(rollout.get("gpu_memory_utilization", 0.5))
    reserved = util * gpu_gib
    util_key = f"{ar}.rollout.gpu_memory_utilization"
    if not rollout.get("free_cache_engine", True):
        rows.append(MemoryRow(phase="training", component="vLLM (free_cache_engine off)", gib=reserved, key=util_key))
    for component, gib, key, stays in states:
        if stays:
            rows.append(MemoryRow(phase="rollout", component=f"{component}, kept", gib=gib, key=key))
    rows.append(
        MemoryRow(phase="rollout", component=f"vLLM reservation ({util:g} of the GPU)", gib=reserved, key=util_key)
    )

    rollout_weights = spec.n_params * 2 / tp / GIB
    kv_gib = reserved - rollout_weights - VLLM_OVERHEAD_GIB
    kv_tokens = int(max(0.0, kv_gib) * GIB // spec.kv_bytes_per_token(tp))
    engine_max_len = int(rollout.get("max_model_len") or spec.max_position_embeddings or seq)
    return MemoryEstimate(
        gpu_gib=gpu_gib,
        model=spec,
        rows=rows,
        kv_cache_gib=kv_gib,
        kv_tokens=kv_tokens,
        sequence_tokens=seq,
        engine_max_len=engine_max_len,
    )


def memory_findings(est: MemoryEstimate, replicas_batch: int | None = None) -> list[Finding]:
    """Errors where a phase cannot fit; the numbers as info lines."""
    out = _model_findings(est)
    out += [_phase_finding(est, phase) for phase in ("training", "rollout") if _rows(est, phase)]
    if _rows(est, "rollout"):
        out += _rollout_findings(est, replicas_batch)
    return out


def _memory(level: Level, message: str, key: str | None = None) -> Finding:
    return Finding(level=level, check="memory", key=key, message=message)


def _rows(est: MemoryEstimate, phase: Phase) -> list[MemoryRow]:
    return [r for r in est.rows if r.phase == phase]


def _model_findings(est: MemoryEstimate) -> list[Finding]:
    """Which model the estimate is of, and a warning where its numbers are guesses."""
    label = f"model {est.model.name}: {est.model.n_params / 1e9:.2f}B parameters, from {est.model.source}"
    out = [_memory("warning" if est.model.estimated else "info", label)]
    if est.model.moe:
        out.append(_memory("warning", "a mixture-of-experts model: counted as dense, the estimate is wrong for it"))
    return out


def _phase_finding(est: MemoryEstimate, phase: Phase) -> Finding:
    """One phase's total per GPU with its parts: an error naming the largest part when it does not fit."""
    rows = _rows(est, phase)
    total = est.total(phase)
    detail = ", ".join(f"{r.component} {r.gib:.1f}" for r in rows)
    line = f"{phase}: {total:.1f} of {est.gpu_gib:g} GiB per GPU ({detail})"
    if total > est.gpu_gib:
        worst = max(rows, key=lambda r: r.gib)
        return _memory("error", f"does not fit: {line}; the largest part is {worst.component}", worst.key)
    return _memory("info", line)


def _rollout_findings(est: MemoryEstimate, replicas_batch: int | None) -> list[Finding]:
    """The rollout engine's lengths against the model's positions, and its KV cache against one sequence."""
    out: list[Finding] = []
    longest = est.model.max_position_embeddings
    if longest and est.engine_max_len > longest:
        out.append(
            _memory(
                "error",
                f"{est.engine_max_len} is more than the model's max_position_embeddings {longest} (vLLM refuses it)",
                "actor_rollout_ref.rollout.max_model_len",
            )
        )
    if longest and est.sequence_tokens > longest:
        out.append(
            _memory(
                "error",
                f"prompt + response = {est.sequence_tokens} tokens is more than the model's {longest} positions",
                "data.max_response_length",
            )
        )
    if est.kv_tokens < est.engine_max_len:
        out.append(
            _memory(
                "error",
                f"vLLM's share leaves {est.kv_cache_gib:.1f} GiB of KV cache per GPU ({est.kv_tokens} tokens): "
                f"vLLM refuses to start unless one sequence of max_model_len {est.engine_max_len} tokens fits; "
                "raise it, the "
                "rollout tensor parallel size, or set actor_rollout_ref.rollout.max_model_len to prompt + response",
                "actor_rollout_ref.rollout.gpu_memory_utilization",
            )
        )
        return out
    line = (
        f"KV cache ~{est.kv_cache_gib:.1f} GiB per GPU: {est.kv_tokens} tokens, {est.full_sequences:.0f} "
        f"full-length sequences at once per replica"
    )
    if replicas_batch is not None:
        line += f" (each replica generates {replicas_batch} sequences per step)"
    out.append(_memory("info", line))
    return out


def estimate_sft_memory(cfg: dict[str, Any], spec: ModelSpec, gpu_gib: float) -> MemoryEstimate:
    """Memory per GPU of verl's ``sft_trainer`` (FSDP engine, no rollout) for the resolved config ``cfg``."""
    n_gpus = int(dig(cfg, "trainer.nnodes", 1)) * int(dig(cfg, "trainer.n_gpus_per_node", 1))
    engine = dig(cfg, "engine", {})
    shards = n_gpus if int(engine.get("fsdp_size", -1)) <= 0 else int(engine["fsdp_size"])
    states = _fsdp_states(spec, engine, _lora_rank(dig(cfg, "model", {})), shards, "engine", "model")
    rows = [MemoryRow(phase="training", component=c, gib=g, key=k) for c, g, k, _ in states]
    data = dig(cfg, "data", {})
    if data.get("use_dynamic_bsz"):
        tokens, key = int(data.get("max_token_len_per_gpu") or 1), "data.max_token_len_per_gpu"
    else:
        tokens = int(data.get("micro_batch_size_per_gpu") or 1) * int(data.get("max_length") or 1)
        key = "data.micro_batch_size_per_gpu"
    checkpointing = bool(dig(cfg, "model.enable_gradient_checkpointing", True))
    act = _activations(spec, tokens, checkpointing, logits=True)
    rows.append(MemoryRow(phase="training", component="activations of one micro-batch", gib=act, key=key))
    return MemoryEstimate(gpu_gib=gpu_gib, model=spec, rows=rows)


def hosted_judge_findings(cfg: dict[str, Any], spec: ModelSpec, gpu_gib: float) -> list[Finding]:
    """A judge hosted by verl must fit its weights (bf16, split by its tensor parallelism) in its vLLM share."""
    r = dig(cfg, "reward.reward_model.rollout", {})
    tp, util = int(r.get("tensor_model_parallel_size", 1)), float(r.get("gpu_memory_utilization", 0.5))
    weights = spec.n_params * 2 / tp / GIB
    room = util * gpu_gib - VLLM_OVERHEAD_GIB
    line = f"hosted judge {spec.name} ({spec.n_params / 1e9:.1f}B): {weights:.1f} GiB of weights per GPU at TP {tp}"
    if weights >= room:
        key = "reward.reward_model.rollout.tensor_model_parallel_size"
        return [_memory("error", f"{line} leave no KV cache in its {util:g} share of {gpu_gib:g} GiB", key)]
    return [_memory("info", f"{line}, {room - weights:.1f} GiB of KV cache")]
