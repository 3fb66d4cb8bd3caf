"""Every text the model or the user reads: prompts and Observation templates, in one place.

Templates use ``str.format`` fields; ``tests/test_prompts.py`` renders each one.
"""

from __future__ import annotations

# The seed's prompt, verbatim; only its two {{placeholders}} became format fields.
REACT_PROMPT = """Answer the question by interleaving Thought, Action and Observation.

Available actions:
{tool_descriptions}

Use exactly this format:
Thought: what you know and what you need next
Action: tool_name[input]
Observation: (written by the system, never by you)

When you can answer, write:
Thought: I now have enough information.
Final Answer: your answer

Rules:
- One action per turn. Wait for the observation.
- If an action fails, say why in your next Thought and try a different approach.
- Do not answer from memory when a tool can verify the fact.

Question: {question}"""

# The earlier conversation on a thread (the ``history_runs`` setting): one block, right before
# the "Question:" line (text format) or the question's message (tool_calls format). Its lines
# avoid the loop's own labels (Question, Final Answer, Observation), so nothing reads them as
# this run's.
EARLIER_BLOCK = (
    "Earlier in this conversation (the questions asked before on this thread, oldest first, "
    "and how each ended; the question below may refer to them):\n\n{runs}\n\n"
)
EARLIER_ANSWERED = "Asked: {question}\nAnswered: {answer}"
EARLIER_UNANSWERED = "Asked: {question}\nNot answered: {status}"
EARLIER_STATUS = {
    "answered": "the run ended without an answer",
    "turn_limit": "the turn cap was reached before an answer",
    "stuck": "the same action kept coming back, so the run was stopped",
    "stopped_early": "the turn cap was reached; the work so far is in the notes",
    "context_exhausted": "the context window was full",
    "awaiting_approval": "the run stopped for a person's decision on an action, never given",
    "budget_exhausted": "the run's budget (tokens, cost or time) was spent before an answer",
    None: "the run did not finish",
}
"""How a run that gave no answer ended, in words: one entry per status of
``reactgraph.nodes.vocabulary.endings`` (a test checks they agree), and None for a run that never
ended."""

# The tool_calls action format: the tools are bound to the model (``bind_tools``) and the model
# calls them natively. The same loop and rules; the tools are described by their schemas, so
# the prompt lists none. A system message, since servers' tool-calling templates put the
# tools' descriptions there (llama.cpp's chatml-function-calling shows them nowhere else).
TOOL_CALLS_PROMPT = """Answer the question by interleaving Thought, Action and Observation.

Each turn, write your Thought (what you know and what you need next), then take one Action: \
call exactly one of the tools. Its result comes back to you as the Observation.

When you can answer, reply without calling a tool:
Thought: I now have enough information.
Final Answer: your answer

Rules:
- One action per turn: one tool call. Wait for the observation.
- If an action fails, say why in your next Thought and try a different approach.
- Do not answer from memory when a tool can verify the fact."""
TOOL_CALLS_QUESTION = "Question: {question}"

TOOL_LINE = "{name}[input]: {description}"
TOOL_JSON_INPUT = "{description} Input: a JSON object {schema}."

STOP_SEQUENCE = "Observation:"

OBSERVATION = "Observation: {text}"

FORCE_ANSWER = "You must answer now."
# The forced answer of a run with an answer schema (``answer_schema``): the schema is in the
# prompt's answer format block.
FORCE_TYPED_ANSWER = (
    "You must answer now. Write the Final Answer as one JSON {kind} that matches the answer's "
    "JSON schema."
)

TRUNCATION_MARKER = "\n[... {cut} of {total} characters cut ...]"

# Corrective Observations for replies the parser could not act on.
EMPTY_REPLY = (
    "Your reply was empty. Write a Thought, then either an Action line "
    "(Action: tool_name[input]) or a Final Answer line. Valid actions: {valid}."
)
NO_ACTION = (
    "Invalid format: no Action or Final Answer found. Write exactly one line "
    "'Action: tool_name[input]', or 'Final Answer: your answer'. Valid actions: {valid}."
)
BAD_ACTION = (
    "Invalid format: the Action line '{text}' does not call a tool. Write the action as "
    "'Action: tool_name[input]', with the input in square brackets right after the tool name. "
    "Valid actions: {valid}."
)
UNKNOWN_TOOL = "Unknown action '{name}'. Valid actions: {valid}."
MISSING_INPUT = (
    "Invalid format: the action '{name}' has no input. Write it as {name}[input]. "
    "Valid actions: {valid}."
)
TWO_ACTIONS = (
    "Your reply has more than one action ({actions}). One action per turn: write one "
    "Action line and wait for its Observation."
)
EMPTY_ANSWER = "Your Final Answer was empty. Write the answer after 'Final Answer:'."
# The words the prompts' format lines hold where the answer goes: a reply that gives them as
# its answer has copied the format, not answered (``PLACEHOLDER_ANSWER`` tells it so).
ANSWER_PLACEHOLDERS = ("your answer", "your final answer", "the final answer")
PLACEHOLDER_ANSWER = (
    "Your Final Answer was '{answer}', the placeholder of the format, not an answer. Write the "
    "actual answer to the question after 'Final Answer:', or take an action if you do not "
    "know it yet."
)

# Corrective Observations of the tool_calls format (each answers a tool call, as its result).
ONE_ACTION_PER_TURN = (
    "Not run: one action per turn, and this reply's action was its first tool call. Call {name} "
    "in a later turn if you still need it."
)
EMPTY_REPLY_TOOLS = (
    "Your reply was empty. Write a Thought and call one tool, or reply with your final answer "
    "and no tool call. Valid tools: {valid}."
)
BAD_CALL_ARGS = (
    "Error: the arguments of this {name} call could not be read ({error}). Call it again with "
    "its arguments as a JSON object."
)
REPLY_CUT_TOOLS = (
    "Your reply was cut off at {limit} before it ended. Keep it short: a Thought of a sentence "
    "or two and one tool call (or your final answer, with no tool call). Valid tools: {valid}."
)

# The warning (once per server) when action_format="tool_calls" gets Actions written as text.
NO_TOOL_CALLS = (
    "the model{where} wrote its Action as text instead of calling a tool: its server does not "
    "return tool calls (llama-cpp-python's needs --chat_format chatml-function-calling; vLLM's "
    "--enable-auto-tool-choice and a --tool-call-parser), so such replies are taken as answers; "
    "enable tool calls there, or use action_format=text (--action-format text)"
)

# Observations for tool calls that did not produce a result.
TOOL_ERROR = "Error: {name} failed: {error}"
TOOL_TIMEOUT = "Error: {name} timed out after {seconds:g} s. Try a different approach."
TOOL_BAD_INPUT = (
    "Error: {name} expects a JSON object with its arguments, {schema}; {problem} "
    'Write it as {name}[{{"key": value, ...}}].'
)
TOOL_UNAVAILABLE = (
    "Error: {name} is unavailable: {hanging} earlier calls are still running past their "
    "timeout. Try a different approach."
)
TOOL_UNCALLABLE = (
    "Error: {name} cannot be called from an Action: it expects {expects}, and its argument "
    "schema cannot be read ({why}). Use another action."
)
TOOL_UNPRINTABLE = "Error: the tool returned a {kind} too large to show."
TOOL_COMMAND = (
    "Error: {name} returned a LangGraph Command (a graph update), which this loop does not "
    "support; tools here must return their result. Try a different approach."
)
# Kept in the turn record instead of an artifact too large to keep.
ARTIFACT_UNKEPT = "(a {kind} artifact of {size} characters, too large to keep)"

# A reply cut at max_completion_tokens.
REPLY_CUT = (
    "Your reply was cut off at {limit} before it ended. Keep it short: one Thought of "
    "a sentence or two, then exactly one line 'Action: tool_name[input]' (or 'Final Answer: "
    "your answer'). Valid actions: {valid}."
)
REPLY_CUT_LIMIT = "{tokens} tokens"
REPLY_CUT_SERVER = "the server's length limit"

# The ReAct paper's own way to answer, `Finish[answer]`: reserved, never a tool's name.
FINISH_ACTION = "finish"

# The notes variant.
# Filled in per run, since a run's context may change the limit.
NOTES_LIMIT = "<max_notes_chars>"
UPDATE_NOTES = "update_notes"
"""The notes variants' action that rewrites the notes (the tool's name)."""
UPDATE_NOTES_DESCRIPTION = (
    "replace your notes (plan, findings with sources, next steps) with the text; at most "
    "<max_notes_chars> characters. Older turns drop out of view, the notes stay."
)
NOTES_BLOCK = "Your notes (kept across turns; replace them with update_notes[text]):\n{notes}"
NOTES_BLOCK_TOOLS = (
    "Your notes (kept across turns; replace them with the update_notes tool):\n{notes}"
)
UPDATE_NOTES_TEXT = "The whole new text of your notes."
NOTES_EMPTY = "(empty)"
NOTES_RESUMED = (
    "These notes were saved by an earlier run on this thread. Continue from them; do not redo "
    "the work they record."
)
NOTES_SAVED = "notes saved"
NOTES_ELIDED = "(the text now shown under Your notes)"
NOTES_TOO_LONG = (
    "Notes not saved: they are {length} characters, over the limit of {limit}. Write a shorter "
    "version (keep the plan, the facts with sources and the next step); the old notes stay."
)

# The compaction variant.
PROGRESS = "## Progress so far\n{summary}"
SUMMARY_REQUEST = """You are compacting the working memory of an agent that answers a question \
with tools. Its transcript no longer fits its context window. Summarize the earlier part so the \
agent can go on from your summary alone.

{instructions}The question (kept verbatim elsewhere, do not restate it): {question}

{earlier}{previous}The earlier transcript, to summarize:
{dropped}

The most recent turns, shown for context only. They stay in the agent's view word for word, so \
do not repeat them, and do not list what they already did as a next step:
{kept}

Write these sections, in this order, with "None" where a section is empty:
## Goal
## Facts found (each with its source: the action and input that found it)
## Decisions made
## Dead ends and errors
## Next step

Be specific: keep numbers, names and dates exactly. At most {max_words} words."""
SUMMARY_EARLIER = (
    "The earlier conversation on this thread (questions asked before, and their answers; the "
    "question may refer to them, so keep in the summary, under Facts found, whatever it may "
    "need from them):\n{earlier}\n\n"
)
# The application's instructions in the summarizer's prompt (``instructions``), else nothing.
SUMMARY_INSTRUCTIONS = "{block}\n\n"
SUMMARY_PREVIOUS = "The summary of even earlier work:\n{summary}\n\n"
SUMMARY_NONE = "(none)"
TRANSCRIPT_TURN = "{text}\nObservation: {observation}"
TRANSCRIPT_CALL = "{text}\nAction: {name}[{input}]\nObservation: {observation}"

# The chat view (``messages``) of how a run ended, when it ended without an answer.
CHAT_STUCK = "Stopped: the same action came back again and again without progress."
CHAT_STOPPED_EARLY = (
    "Stopped at the turn cap with the notes saved. Ask again on this thread to continue from them."
)
CHAT_CONTEXT_EXHAUSTED = (
    "Stopped: even a fresh, summarized window no longer fits the model's context window."
)
CHAT_BUDGET_EXHAUSTED = (
    "Stopped: the run spent its budget (tokens, cost or time), so no further model call or "
    "tool ran."
)
# The same, naming the budget: its words, its setting, what was spent of its limit (``BUDGET_*``).
CHAT_BUDGET_SPENT = (
    "Stopped at the run's {name} ({budget}): {spent} of {limit}{unit} spent, so no further "
    "model call or tool ran."
)
# The 80% warning, shown in the chat on its own (the model reads it in its Observation).
CHAT_BUDGET_WARNING = (
    "Budget warning: {spent} of {limit}{unit} of the run's {name} ({budget}) are spent. The "
    "run stops once all of it is, answered or not."
)
CHAT_TOOL_LIMIT_WARNING = (
    "Budget warning: {name} has made {spent} of the {limit} calls it may make in this run."
)
# The tool result of an Action the run never ran: its budget was spent first.
CHAT_NOT_RUN = "Not run: the run spent its budget before this action could run."
CHAT_COMPACTION = (
    "Summary of the work so far (made after turn {turn} to fit the context window):\n{summary}"
)
CHAT_NO_SUMMARY = "(no summary could be made; the oldest turns were dropped from view)"
CHAT_UNREAD = "Note: this loop reads only text, so {blocks} in the question went unread."
CHAT_EMPTY_REPLY = "(empty reply)"

# A person's decision on an Action before it runs (the ``approve`` setting). The Observations
# are what the model reads; the request is what a person reads in the chat client.
ACTION_REJECTED = "A person refused this action, so it did not run."
# A call of a tool that needs approval which is not the call a person decided on (a middleware
# changed its tool or its arguments after the decision): refused, unrun.
ACTION_UNAPPROVED = "This call is not the one a person approved, so it did not run."
ACTION_REJECTED_WHY = "A person refused this action, so it did not run. Their reason: {reason}"
OBSERVATION_EDITED = (
    "Observation: (a person changed this action before it ran: it ran as {action})\n{text}"
)
# The same in a tool message (the tool_calls format), which has no "Observation:" label.
TOOL_RESULT_EDITED = "(a person changed this call before it ran: it ran as {action})\n{text}"
# What a chat client's approval card offers (Agent Chat UI's: approve, edit, reject); a client
# may send the other decisions (``respond``), which the request allows, but the text offers only
# what every card can do.
APPROVAL_REQUEST = (
    "The agent wants to run {action} (turn {turn}).\n\n"
    "Approve it to run it as written, edit its input first, or reject it with a reason, which "
    "the agent reads."
)
APPROVAL_LAST_TRY = (
    "{total} answers to this action could not be used: another answer that is no usable "
    "decision is refused before it is kept, and the action keeps waiting."
)
APPROVAL_AGAIN = "That answer could not be used: {problem} Please decide again.\n\n"
# A decision typed in the chat ("yes", "no"), shown after the Action's result (the tool result
# must follow its call, so the trace comes after it).
CHAT_DECIDED = 'Decided in the chat: "{said}" {decided} {action}.'
DECIDED = {
    "approve": "approved",
    "edit": "edited",
    "respond": "answered in the tool's place",
    "reject": "refused",
}
"""A decision in words, for the logs, the console and ``show``."""

# The application's own instructions to its agent (the ``instructions`` setting): one headed
# block in every prompt of the run, after the loop's rules (and the answer format) and before
# the question; the summarizer's prompt holds it too.
INSTRUCTIONS_BLOCK = "Instructions from the application (follow them throughout):\n{instructions}"

# A typed answer (the ``answer_schema`` setting, ``build_graph(response_format=...)``): the
# answer format block after the loop's rules, and the corrective Observations of an answer that
# does not match.
ANSWER_FORMAT = (
    "Answer format: write the Final Answer as one JSON {kind} that matches this JSON schema, "
    "with nothing else after 'Final Answer:':\n{schema}"
)
ANSWER_FORMAT_TOOLS = (
    "Answer format: when you can answer, reply without calling a tool, with the Final Answer as "
    "one JSON {kind} that matches this JSON schema:\n{schema}"
)
TYPED_ANSWER_INVALID = (
    "Your Final Answer does not match the answer's JSON schema: {problems}. Write the Final "
    "Answer again as one JSON {kind} that matches the schema."
)
TYPED_ANSWER_NOT_JSON = (
    "Your Final Answer is not JSON ({problem}). Write the Final Answer as one JSON {kind} that "
    "matches the answer's JSON schema, with nothing else after it."
)
TYPED_ANSWER_TOO_LONG = (
    "Your Final Answer is {length} characters, over the limit of {limit}. Write it again as one "
    "short JSON {kind} that matches the answer's JSON schema."
)
TYPED_ANSWER_TOO_BIG = (
    "Your Final Answer is too large to check: {problem}. Write it again as one short JSON {kind} "
    "that matches the answer's JSON schema."
)
TYPED_ANSWER_TOO_COSTLY = (
    "Your Final Answer takes too long to check against the answer's JSON schema (more than "
    "{limit} steps). Write it again as one shorter JSON {kind} that matches the schema."
)
TYPED_ANSWER_UNCHECKED = (
    "Your Final Answer could not be checked against the answer's JSON schema ({problem}). "
    "Write it again as one JSON value that matches the schema."
)
# Run budgets (``reactgraph.nodes.loop.middleware.budgets``).
BUDGET_WARNING = (
    "\n\n(Budget: {spent} of this run's {limit} {unit} are spent. Give your answer soon: once "
    "the budget is spent the run stops without one.)"
)
TOOL_LIMIT_WARNING = (
    "\n\n(Budget: {name} has made {spent} of the {limit} calls it may make in this run.)"
)
TOOL_LIMIT_REACHED = (
    "Not run: {name} may be called at most {limit} time(s) in this run, and it has been. Use "
    "another tool, or answer with what you have."
)
BUDGET_UNITS = {
    "max_run_tokens": "tokens",
    "max_run_cost": "of cost",
    "max_run_seconds": "seconds",
}
"""Each run budget's unit, as its warning says it."""
BUDGET_NAMES = {
    "max_run_tokens": "token budget",
    "max_run_cost": "cost budget",
    "max_run_seconds": "time budget",
}
"""Each run budget in words, as the chat and the console name it."""
BUDGET_SPENT_UNITS = {
    "max_run_tokens": " tokens",
    "max_run_cost": "",
    "max_run_seconds": " seconds",
}
"""The unit after a budget's limit ("1,000 tokens"; a cost is in the prices' own money)."""
BUDGET_SPENT = "{name} ({budget}): {spent} of {limit}{unit} spent"
"""Which budget a run spent and how much of it, as the console's ``Budget:`` line says it."""

PARALLEL_RULES = {  # ``parallel_tool_calls`` on: the one-action rules ({cap}: the most)
    "- One action per turn. Wait for the observation.": "- You may take up to {cap} independent "
    "actions in one turn, one 'Action: tool_name[input]' line each; their Observations come "
    "back numbered in order. Wait for them before your Final Answer.",
    "- One action per turn: one tool call. Wait for the observation.": "- You may call up to "
    "{cap} independent tools at once; each result answers its call. Wait for them to answer.",
    "take one Action: call exactly one of the tools.": "take your Action: call one or more tools.",
}
OBSERVATION_NUMBERED = "Observation {index} ({action}): {text}"
PAST_PARALLEL_CAP = "Not run: at most {cap} calls run at once. Call {name} later if still needed."
ANSWER_AMONG_CALLS = "Not taken: give the final answer after this turn's Observations, alone."
RUNS_ALONE = "Not run: {name} runs alone, in a reply with no other call."
EDITED_CALL = "{action}, run instead of {proposed}: a person changed the call"
