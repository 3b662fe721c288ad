"""A model API that goes away mid-turn, for each coding agent's test with its real CLI: the fake
answers the first call with a write of `wip.txt` in the CLI's working directory and stops during
the second, as a server that is shut down does (the CLI's next attempts meet a closed port)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from orchestrator.fake_api import ScriptedResponder, reply, text, tool_use, working_directory

__all__ = ["WIP", "going_away"]

WIP = "wip\n"  # what the first call writes to wip.txt: the work in progress a test finds kept


def going_away(fake: Callable[[ScriptedResponder], Any], *, name: str = "wip.txt", content: str = WIP,
               then: tuple[Any, ...] = (), directory: Callable[[dict[str, Any]], str] | None = None,
               script: ScriptedResponder | None = None) -> Any:
    """`fake(script)` (a fake API class), started, scripted to write `name` and then go away.
    `then`: replies in between (aider's fake answers a write's tool result within the same call);
    `directory(body)`: where the CLI works, when the request does not say (default: the working
    directory its system prompt names); `script`: one the test also scripts the middle agent with
    (`middle run` on the fake Messages API). The caller stops it (stop() twice is harmless)."""
    script = script if script is not None else ScriptedResponder()
    api = fake(script).start()
    where = directory or working_directory

    def goes_away(body: dict[str, Any]) -> Any:
        stopping = threading.Thread(target=api.stop)  # (not the handler's own thread: stop() joins)
        stopping.start()
        stopping.join()
        return reply(text("Never sent."))

    script.coding_agent(
        lambda body: reply(tool_use("Write", {"file_path": f"{where(body)}/{name}", "content": content})),
        *then, goes_away)
    return api
