"""The Berkeley Function Calling Leaderboard's tasks (BFCL v4), read from the ``bfcl-eval``
package's data files (``pip install 'reactgraph[bfcl]'``: the package with ``--no-deps``, as its
own dependencies are the leaderboard's model handlers). Only its data and its multi-turn API
classes are used, never its checker (``bfcl_ast``, ``bfcl_state`` score by its rules).

A task becomes an eval ``Item``: its id, its user turns as the question, its accepted answers as
the gold (JSON), and the whole task in ``Item.task`` for the runner and the scorer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from reactgraph.app.eval.inputs import Item
from reactgraph.app.flags import UsageError

PACKAGE = "bfcl_eval"
VERSION = "2026.3.23"
INSTALL = f"pip install --no-deps bfcl-eval=={VERSION} (or pip install 'reactgraph[bfcl]')"
SINGLE_TURN = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
)
MULTI_TURN = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
CATEGORIES = (*SINGLE_TURN, *MULTI_TURN)
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
"""The user turn of a held-out function's turn (the leaderboard's
``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``)."""
# The leaderboard's CLASS_FILE_PATH_MAPPING and MULTI_TURN_FUNC_DOC_FILE_MAPPING for the
# multi-turn categories' classes (module, function doc file).
API_CLASSES = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
STATELESS = frozenset({"MathAPI"})
SOURCE_MODULE = f"{PACKAGE}.eval_checker.multi_turn_eval.func_source_code"


@dataclass(frozen=True)
class Task:
    """One BFCL task, as plain data (it crosses into worker processes)."""

    id: str
    category: str
    turns: tuple[str, ...]
    """The user's message of each turn (one for the single-turn categories)."""
    functions: tuple[Mapping[str, Any], ...]
    """The function docs the model is given at the start (BFCL's JSON-schema dialect)."""
    answer: Any
    """The accepted answers: per call, each argument's possible values (single-turn), or per
    turn the calls as Python source (multi-turn); None for ``irrelevance``."""
    initial_config: Mapping[str, Any] = field(default_factory=dict)
    involved_classes: tuple[str, ...] = ()
    added: Mapping[int, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    """Multi-turn ``miss_func``: the function docs held out until a turn, by its index."""

    @property
    def multi_turn(self) -> bool:
        """Whether its turns are follow-ups on one thread against stateful APIs."""
        return self.category in MULTI_TURN

    def as_dict(self) -> dict[str, Any]:
        """The task as JSON values (a job's ``extra``)."""
        return {
            "id": self.id,
            "category": self.category,
            "turns": list(self.turns),
            "functions": [dict(f) for f in self.functions],
            "answer": self.answer,
            "initial_config": dict(self.initial_config),
            "involved_classes": list(self.involved_classes),
            "added": {str(k): list(v) for k, v in self.added.items()},
        }

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> Task:
        """The task from ``as_dict``'s values."""
        return cls(
            id=value["id"],
            category=value["category"],
            turns=tuple(value["turns"]),
            functions=tuple(value["functions"]),
            answer=value["answer"],
            initial_config=value.get("initial_config") or {},
            involved_classes=tuple(value.get("involved_classes") or ()),
            added={int(k): tuple(v) for k, v in (value.get("added") or {}).items()},
        )


def categories_of(text: str) -> list[str]:
    """``--categories``' comma-separated names, each once, in order; UsageError for others."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in CATEGORIES]
    if unknown or not names:
        raise UsageError(
            f"unknown BFCL categor{'ies' if len(unknown) > 1 else 'y'} "
            f"{', '.join(unknown) or '(none given)'} in --categories; choose from: "
            f"{', '.join(CATEGORIES)}"
        )
    return names


def data_folder() -> Any:
    """The installed package's ``data`` folder; UsageError saying how to install it."""
    try:
        return resources.files(PACKAGE) / "data"
    except ModuleNotFoundError:
        raise UsageError(f"--bench bfcl needs the bfcl-eval package: {INSTALL}") from None


def _lines(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def function_docs(class_name: str) -> list[dict[str, Any]]:
    """The function docs of one multi-turn API class."""
    return _lines(data_folder() / "multi_turn_func_doc" / API_CLASSES[class_name][1])


def _user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """One turn's messages as the question's text (a system message's content first)."""
    return "\n\n".join(str(m.get("content") or "") for m in messages).strip()


def _task(category: str, entry: Mapping[str, Any], answer: Any) -> Task:
    turns = tuple(_user_text(messages) for messages in entry["question"])
    if category not in MULTI_TURN:
        return Task(entry["id"], category, turns, tuple(entry["function"]), answer)
    classes = tuple(entry["involved_classes"])
    functions, added = _held_back(classes, entry.get("missed_function") or {})
    turns = tuple(ADDED_FUNCTIONS_PROMPT if i in added else t for i, t in enumerate(turns))
    config = copy.deepcopy(entry.get("initial_config") or {})
    return Task(entry["id"], category, turns, tuple(functions), answer, config, classes, added)


def _held_back(
    classes: tuple[str, ...], missed: Mapping[str, Any]
) -> tuple[list[Mapping[str, Any]], dict[int, tuple[Mapping[str, Any], ...]]]:
    """The involved classes' functions offered from the start, and those a task holds back
    until a turn (``missed_function``: turn index to names), by turn."""
    functions: list[Mapping[str, Any]] = [doc for name in classes for doc in function_docs(name)]
    added: dict[int, tuple[Mapping[str, Any], ...]] = {}
    for index, names in missed.items():
        added[int(index)] = tuple(doc for doc in functions if doc["name"] in names)
        functions = [doc for doc in functions if doc["name"] not in names]
    return functions, added


def load_category(category: str, limit: int | None = None) -> list[Task]:
    """A category's first ``limit`` tasks (all without one), in the data file's order."""
    folder = data_folder()
    entries = _lines(folder / f"BFCL_v4_{category}.json")[:limit]
    answers: dict[str, Any] = {}
    if category != "irrelevance":
        answers = {
            a["id"]: a["ground_truth"]
            for a in _lines(folder / "possible_answer" / f"BFCL_v4_{category}.json")
        }
    return [_task(category, entry, answers.get(entry["id"])) for entry in entries]


def item_of(task: Task) -> Item:
    """A task as an eval item: its turns the question, its answers the gold."""
    gold = json.dumps(task.answer, ensure_ascii=False, sort_keys=True)
    return Item(task.id, "\n\n".join(task.turns), (gold,), task=task)


def bfcl_items(categories: Sequence[str], limit: int | None = None) -> list[Item]:
    """The items of the chosen categories, ``limit`` of each."""
    return [item_of(task) for c in categories for task in load_category(c, limit)]
