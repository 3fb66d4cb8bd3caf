"""The settings every variant has, declared once; a variant changes only their defaults."""

from __future__ import annotations

from reactgraph.settings import Setting

MAX_TURNS = Setting(
    "max_turns", int, 10, "Turn cap: after this many turns the run takes its cap exit.", minimum=1
)
TOOL_TIMEOUT = Setting(
    "tool_timeout",
    float,
    10.0,
    "Seconds a tool call may take before its Observation becomes a timeout error.",
    above=0,
)
MAX_OBSERVATION_CHARS = Setting(
    "max_observation_chars",
    int,
    2000,
    "Observations longer than this many characters are cut, with a marker saying how much.",
    minimum=1,
)
STUCK_REPEATS = Setting(
    "stuck_repeats",
    int,
    3,
    "The same action with the same input (or the same unreadable reply) this many times in a "
    "row ends the run as stuck.",
    minimum=2,
)
MODEL_RETRIES = Setting(
    "model_retries",
    int,
    3,
    "Retries of a model call after a transient fault (429, 5xx, timeout, malformed response).",
    minimum=0,
)
RETRY_BACKOFF_S = Setting(
    "retry_backoff_s",
    float,
    0.5,
    "First wait between retries in seconds, doubled each time, unless the server sends "
    "Retry-After.",
    minimum=0,
)
MAX_COMPLETION_TOKENS = Setting(
    "max_completion_tokens",
    int,
    4096,
    "Cap on the tokens of each model reply (the forced answer and summaries too); None: no cap. "
    "A reply cut at the cap gets a corrective Observation.",
    minimum=1,
    optional=True,
    unset="no cap",
)
APPROVE = Setting(
    "approve",
    tuple,
    (),
    "Tools whose Actions wait for a person to approve, edit or reject them before they run: "
    "tool names (a list, or separated by commas), all, or none.",
    metavar="TOOL",
)
MODEL_NAME = Setting(
    "model_name",
    str,
    None,
    "Model to call for this run (an OpenAI-compatible name); empty: the built model.",
    optional=True,
    build=False,
    unset="the built model",
)
BASE_URL = Setting(
    "base_url",
    str,
    None,
    "OpenAI-compatible server URL for model_name (vLLM, Ollama, llama.cpp, LM Studio).",
    optional=True,
    build=False,
    unset="the built model's",
)

COMMON = (
    MAX_TURNS,
    TOOL_TIMEOUT,
    MAX_OBSERVATION_CHARS,
    STUCK_REPEATS,
    MODEL_RETRIES,
    RETRY_BACKOFF_S,
    MAX_COMPLETION_TOKENS,
    APPROVE,
    MODEL_NAME,
    BASE_URL,
)


def common(max_turns: int) -> tuple[Setting, ...]:
    """The common settings with a variant's own turn cap."""
    return tuple(s.but(default=max_turns) if s is MAX_TURNS else s for s in COMMON)
