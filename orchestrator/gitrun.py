"""Running the `git` executable: the one place any part of middle starts git, errors as GitError.

We call the `git` executable rather than a library: worktrees, `merge-tree --write-tree` and the
user's own config (author, hooks, attributes) behave exactly as the user's git does, and git is
already on every machine that has a repository to work on. The ticket workspace
(`orchestrator.workspace.git`), the history importer of memory and the benchmarks all run git
through `git` here, so each gets the same environment, decoding and error messages. This module
imports nothing of middle's but its error types, so any layer may use it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from orchestrator.errors import GitError

__all__ = ["GitError", "blobs", "git", "out"]

# No prompts (a credential helper or an editor would hang a headless run), one locale for parsing.
_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "LC_ALL": "C", "LANGUAGE": "C"}
MISSING = ("git is not installed (or not on PATH): install git; for tickets, [project] isolation = "
           "\"none\" lets them edit the project directory in place without git")


def git(repo: Path | str, *args: str, check: bool = True, env: dict[str, str] | None = None,
        input: str | bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run `git -C repo ARGS`; a failure (when `check`) is a GitError with git's own message.

    Output is decoded as UTF-8 (bytes that are not become U+FFFD, never an exception) with line
    ends kept as git wrote them, so a patch of a file with CRLF lines still applies. `input`: text
    (sent as UTF-8) or bytes (e.g. a `git fast-import` stream)."""
    data = input.encode("utf-8") if isinstance(input, str) else input
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, input=data,
                              env={**os.environ, **_ENV, **(env or {})})
    except FileNotFoundError:
        raise GitError(MISSING) from None
    done = subprocess.CompletedProcess(proc.args, proc.returncode, _text(proc.stdout), _text(proc.stderr))
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise GitError(f"git {_command(args)} failed in {repo}: {detail[-1] if detail else done.returncode}")
    return done


def out(repo: Path | str, *args: str) -> str:
    """The stripped standard output of `git -C repo ARGS` (a failure is a GitError)."""
    return git(repo, *args).stdout.strip()


def blobs(repo: Path | str, names: list[str]) -> list[str | None]:
    """The text of each object named (`REV:path`), by one `git cat-file --batch` for them all (a
    ticket changing 200 files starts one git, not 200); None for a name that is not a file there.
    A name holding a newline cannot be asked this way (one name a line): None too."""
    asked = [n for n in names if "\n" not in n]
    data = "".join(f"{n}\n" for n in asked).encode("utf-8")
    try:
        proc = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], capture_output=True, input=data,
                              env={**os.environ, **_ENV})
    except FileNotFoundError:
        raise GitError(MISSING) from None
    if proc.returncode != 0:
        detail = _text(proc.stderr).strip().splitlines()
        raise GitError(f"git cat-file --batch failed in {repo}: {detail[-1] if detail else proc.returncode}")
    found: dict[str, str | None] = {}
    raw, pos = proc.stdout, 0
    for name in asked:  # each answer: `<oid> <type> <size>\n<content>\n`, or `<name> missing\n`
        end = raw.index(b"\n", pos)
        header = raw[pos:end].split(b" ")
        pos = end + 1
        if len(header) == 3 and header[2].isdigit():
            size = int(header[2])
            found[name] = _text(raw[pos:pos + size]) if header[1] == b"blob" else None
            pos += size + 1
        else:  # missing, ambiguous: no content follows
            found[name] = None
    return [found.get(n) for n in names]


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def _command(args: tuple[str, ...]) -> str:
    """The words that name what was run, for a message: `rev-parse --verify`, not `-c x=y`."""
    words = list(args)
    while len(words) >= 2 and words[0] == "-c":
        words = words[2:]
    return " ".join(words[:2])
