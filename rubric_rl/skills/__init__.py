"""Atomic skills: prompt cards (skills/*.yaml), response parsing, Verdict feedback, and the verl datasets built
from them (``rubric_rl.skills.dataset``, ``rubric_rl.skills.sft``)."""

from rubric_rl.skills.cards import SkillCard, SkillCardError, bundled_skills, load_skill
from rubric_rl.skills.feedback import FeedbackConfig, feedback_sections, render_feedback
from rubric_rl.skills.parsing import Extraction, extract_program

__all__ = [
    "Extraction",
    "FeedbackConfig",
    "SkillCard",
    "SkillCardError",
    "bundled_skills",
    "extract_program",
    "feedback_sections",
    "load_skill",
    "render_feedback",
]
