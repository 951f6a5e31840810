"""The agentic environment: tools over the sandbox (``ToolSession``), their OpenAI function schemas, hermes
tool-call parsing, an episode over an OpenAI tool-calling client, the final reward of a trajectory, and verl's
agent loop (``rubric_rl.agents.verl_loop``, the only module here that imports verl); and the Planner / Coder /
Verifier loop (``rubric_rl.agents.pcv``). See docs/agents.md and docs/rollouts.md."""

from rubric_rl.agents.backend import SandboxTools, get_sandbox_tools
from rubric_rl.agents.calls import ParsedCall, parse_tool_calls
from rubric_rl.agents.chat import ChatEpisode, run_chat_episode
from rubric_rl.agents.config import AgentConfig, AgentConfigError, ToolsConfig
from rubric_rl.agents.reward import FinalReward, final_reward
from rubric_rl.agents.schemas import tool_schemas
from rubric_rl.agents.tools import (
    TOOLS,
    Benchmark,
    Check,
    Compile,
    Profile,
    Submit,
    ToolCallRecord,
    ToolResult,
    ToolSession,
    WriteProgram,
)

__all__ = [
    "TOOLS",
    "AgentConfig",
    "AgentConfigError",
    "Benchmark",
    "ChatEpisode",
    "Check",
    "Compile",
    "FinalReward",
    "ParsedCall",
    "Profile",
    "SandboxTools",
    "Submit",
    "ToolCallRecord",
    "ToolResult",
    "ToolSession",
    "ToolsConfig",
    "WriteProgram",
    "final_reward",
    "get_sandbox_tools",
    "parse_tool_calls",
    "run_chat_episode",
    "tool_schemas",
]
