"""An sde-bench checkout (vectorize-io/sde-bench) as tasks: what `middle bench sde` reads of it.

The checkout's layout: one folder per task, `boltons-<name>/`, holding `build.py` (which makes
the task's repository from a boltons clone: boltons at a pinned commit plus the trap) and
`tasks/main/` with `task.json` (the bug report, the test lists, the decision chats of a
conversation task, the decision commit's subject of a history task), `regression_test.py` (the
visible repro, red at HEAD) and `hidden_test.py` (the held-out test of the decision, for grading
only). `gen/decoy_conversations.json` holds the developer chats that carry no decision, which
memory must rank the decision chat above. Everything here only reads the checkout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from orchestrator.errors import ConfigError

TASK_GLOB = "boltons-*"
TASK_JSON = Path("tasks") / "main" / "task.json"
DECOYS = Path("gen") / "decoy_conversations.json"
GET_IT = "git clone https://github.com/vectorize-io/sde-bench"

Chat = list[tuple[str, str]]  # (role, text) turns


@dataclass(frozen=True)
class SdeTask:
    """One task of the checkout, as its task.json and test files give it."""

    name: str  # its folder, e.g. boltons-budget
    folder: Path
    task_id: str
    source: str  # history | conversation | conversation-amended
    category: str
    bug_report: str
    fail_to_pass: list[str]  # the visible repro's path in the repository (red at HEAD)
    pass_to_pass: list[str]  # tests that must stay green
    hidden_to_pass: list[str]  # where the hidden test goes when grading
    regression_test: Path  # the repro's text, in the task folder
    hidden_test: Path
    chats: list[Chat]  # the decision chats, oldest first (the last one decides)
    decision_subject: str | None  # a history task's decision commit subject, when task.json says

    @property
    def build_script(self) -> Path:
        return self.folder / "build.py"


def _fail(path: Path, what: str) -> ConfigError:
    return ConfigError(f"{path}: {what}; is it an sde-bench task ({GET_IT})?")


def _paths(data: dict[str, Any], key: str, path: Path) -> list[str]:
    value = data.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise _fail(path, f"'{key}' should be a non-empty list of test file paths")
    for item in value:
        if Path(item).is_absolute() or ".." in Path(item).parts:
            raise _fail(path, f"'{key}' names {item!r}, which is not a path inside the repository")
    return list(value)


def _chat(turns: Any, path: Path) -> Chat:
    if not isinstance(turns, list) or not turns:
        raise _fail(path, "a chat in 'conversations' should be a non-empty list of turns")
    chat: Chat = []
    for turn in turns:
        if not (isinstance(turn, dict) and isinstance(turn.get("role"), str)
                and isinstance(turn.get("text"), str)):
            raise _fail(path, "each turn of a chat should be {\"role\": ..., \"text\": ...}")
        chat.append((turn["role"], turn["text"]))
    return chat


def chats_of(value: Any, path: Path) -> list[Chat]:
    """`conversations`: one chat (a list of turns) or several (a list of them, oldest first, as an
    amended task has: the rule, then the chat that amends it)."""
    if value is None:
        return []
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return [_chat(v, path) for v in value]
    return [_chat(value, path)]


def load_task(folder: Path) -> SdeTask:
    """One task folder; a missing or malformed part is a ConfigError naming the file."""
    path = folder / TASK_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"is not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise _fail(path, "should hold one JSON object")
    report = data.get("bug_report")
    if not isinstance(report, str) or not report.strip():
        raise _fail(path, "has no 'bug_report'")
    tests = {}
    for key in ("regression_test_file", "hidden_test_file"):
        name = data.get(key)
        file = path.parent / name if isinstance(name, str) and name else None
        if file is None or not file.is_file():
            raise _fail(path, f"'{key}' should name a file beside it ({name!r} is not there)")
        tests[key] = file
    if not (folder / "build.py").is_file():
        raise _fail(folder / "build.py", "is missing (it builds the task's repository)")
    subject = data.get("decision_subject")
    return SdeTask(
        name=folder.name, folder=folder, task_id=str(data.get("task_id") or folder.name),
        source=str(data.get("source") or "?"), category=str(data.get("category") or "?"),
        bug_report=report.strip(), fail_to_pass=_paths(data, "fail_to_pass", path),
        pass_to_pass=_paths(data, "pass_to_pass", path) if data.get("pass_to_pass") else [],
        hidden_to_pass=_paths(data, "hidden_to_pass", path),
        regression_test=tests["regression_test_file"], hidden_test=tests["hidden_test_file"],
        chats=chats_of(data.get("conversations"), path),
        decision_subject=subject.strip() if isinstance(subject, str) and subject.strip() else None)


def task_folders(checkout: Path) -> list[Path]:
    """The checkout's task folders (absolute), by name; an error when `checkout` is no sde-bench
    checkout."""
    checkout = Path(checkout).resolve()
    if not checkout.is_dir():
        raise ConfigError(f"{checkout} is not a folder: pass an sde-bench checkout ({GET_IT})")
    folders = sorted(p for p in checkout.glob(TASK_GLOB) if (p / TASK_JSON).is_file())
    if not folders:
        raise ConfigError(f"{checkout} is not an sde-bench checkout (no {TASK_GLOB}/{TASK_JSON.as_posix()}): "
                          f"{GET_IT} and pass its folder")
    return folders


def select_tasks(checkout: Path, names: Sequence[str] = (), limit: int | None = None) -> list[SdeTask]:
    """The tasks to run: those named (a folder, the folder without `boltons-`, or a task id), in
    the order given, else all by name; then the first `limit`. Unknown names are an error that
    lists the tasks there are, before anything runs."""
    folders = task_folders(checkout)
    if names:
        by_name = {f.name: f for f in folders}
        chosen: list[Path] = []
        for name in names:
            folder = by_name.get(name) or by_name.get(f"boltons-{name}")
            if folder is None:
                folder = next((f for f in folders if _task_id(f) == name), None)
            if folder is None:
                known = ", ".join(f.name.removeprefix("boltons-") for f in folders)
                raise ConfigError(f"no task {name!r} in {checkout}: give one of {known}")
            if folder not in chosen:
                chosen.append(folder)
        folders = chosen
    if limit is not None:
        folders = folders[:limit]
    return [load_task(f) for f in folders]


def _task_id(folder: Path) -> str | None:
    try:
        data = json.loads((folder / TASK_JSON).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data.get("task_id") if isinstance(data, dict) else None


def load_decoys(checkout: Path) -> list[Chat]:
    """The decoy chats (none when the checkout has no decoy file)."""
    path = Path(checkout) / DECOYS
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(path, f"cannot be read as JSON ({exc})") from None
    if not isinstance(data, list):
        raise _fail(path, "should be a list of chats ({\"turns\": [...]})")
    return [_chat(item.get("turns") if isinstance(item, dict) else None, path) for item in data]


def chat_text(chat: Chat) -> str:
    """A chat as memory keeps it: `User: ...` / `Assistant: ...` lines."""
    return "\n".join(f"{role.strip().capitalize() or 'Someone'}: {text.strip()}" for role, text in chat)
