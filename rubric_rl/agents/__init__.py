"""Agents over the sandbox: the Planner / Coder / Verifier loop (``rubric_rl.agents.pcv``)."""
