"""A checkpoint serializer that never imports or calls code when it reads a checkpoint back.

LangGraph's default reader rebuilds any object a checkpoint names (module + class + args), so a
tampered `checkpoints.sqlite3` could make `middle resume` run any function. Our graph state is
plain JSON-able data by design, so reading needs no object construction at all: msgpack is
decoded with an extension hook that refuses every extension type (the ones that name code), and
any other serialization type (pickle included) is refused. Writing uses LangGraph's own writer.
"""

from __future__ import annotations

from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from orchestrator.errors import StoreError

# LangGraph's marker for its own delta-snapshot wrapper (langgraph.checkpoint.serde.jsonplus);
# it holds plain values and names no module, so it is decoded as its payload.
_EXT_DELTA_SNAPSHOT = 7


class CheckpointRefused(StoreError):
    """A checkpoint holds something middle-agent never writes; it was not loaded."""


class StrictSerializer:
    """SerializerProtocol: LangGraph's writer, and a reader for plain data only."""

    def __init__(self, path: str = "the checkpoint store"):
        self.path = path
        self._writer = JsonPlusSerializer(allowed_msgpack_modules=None)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self._writer.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind == "null":
            return None
        if kind == "bytes":
            return payload
        if kind == "bytearray":
            return bytearray(payload)
        if kind == "msgpack":
            refusals: list[CheckpointRefused] = []
            try:
                return ormsgpack.unpackb(payload, ext_hook=lambda c, p: self._ext_hook(c, p, refusals),
                                         option=ormsgpack.OPT_NON_STR_KEYS)
            except (ValueError, TypeError) as exc:
                # ormsgpack reports a raising ext_hook as ValueError("ext_hook failed").
                if refusals:
                    raise refusals[0] from None
                raise self._refused(f"unreadable data ({exc})") from None
        raise self._refused(f"a value serialized as {kind!r}")

    def _ext_hook(self, code: int, payload: bytes, refusals: list[CheckpointRefused]) -> Any:
        if code == _EXT_DELTA_SNAPSHOT:
            return ormsgpack.unpackb(payload, ext_hook=lambda c, p: self._ext_hook(c, p, refusals),
                                     option=ormsgpack.OPT_NON_STR_KEYS)
        try:  # only to name what it asked for in the message; nothing is imported
            named = ormsgpack.unpackb(payload, option=ormsgpack.OPT_NON_STR_KEYS)
            what = f"an object of {named[0]}.{named[1]}"
        except Exception:
            what = f"an object (msgpack extension {code})"
        refusals.append(self._refused(what))
        raise refusals[-1]

    def _refused(self, what: str) -> CheckpointRefused:
        return CheckpointRefused(
            f"{self.path} holds {what}, which middle-agent never writes: the file may have been "
            "tampered with, so it was not loaded (nothing in it was run). Move the file away to "
            "start fresh (runs in it can then not be resumed; start them again with `middle run`)"
        )
