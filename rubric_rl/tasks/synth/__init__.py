"""Task synthesis (CUDA Agent's pipeline): seed operators composed into KernelBench-format programs, filtered
for executability, determinism, non-triviality, runtime and contamination, appended as a resumable task set.

    summary = Synthesizer(SynthConfig(n=100, device="cuda"), Path("synth.jsonl"), against=index).run()
"""

from rubric_rl.tasks.synth.compose import Composition, compose, render
from rubric_rl.tasks.synth.llm import LLMComposer, LLMComposerConfig, extract_task_program, screen_program
from rubric_rl.tasks.synth.ops import SeedTable, SeedTableError, load_seed_table
from rubric_rl.tasks.synth.pipeline import (
    FUNNEL,
    DecontaminationConfig,
    SynthConfig,
    Synthesizer,
    sidecar,
    summarize,
)
from rubric_rl.tasks.synth.probe import ProbeConfig, probe

__all__ = [
    "FUNNEL",
    "Composition",
    "DecontaminationConfig",
    "LLMComposer",
    "LLMComposerConfig",
    "ProbeConfig",
    "SeedTable",
    "SeedTableError",
    "SynthConfig",
    "Synthesizer",
    "compose",
    "extract_task_program",
    "load_seed_table",
    "probe",
    "render",
    "screen_program",
    "sidecar",
    "summarize",
]
