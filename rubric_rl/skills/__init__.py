"""Atomic skills: prompt cards (skills/*.yaml) and response parsing."""

from rubric_rl.skills.cards import SkillCard, SkillCardError, bundled_skills, load_skill
from rubric_rl.skills.parsing import Extraction, extract_program

__all__ = ["Extraction", "SkillCard", "SkillCardError", "bundled_skills", "extract_program", "load_skill"]
