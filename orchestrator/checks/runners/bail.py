"""A JavaScript runner's own stop at its first failure (`jest --bail`, `mocha --bail`, `vitest
--bail 1`), taken out of a check's line: where the base already fails a test, both runs would stop
there, and a test the ticket broke after it would never run (the ticket read as "no worse").

The runner's bail options are removed from its own command (from the runner's word to the end of
that command: `&&`, `||`, `;`, `|`, `)`), and the runner module adds the option that turns bailing
off, so a config file's `bail` (jest.config.js, .mocharc, vitest.config) is overridden too.
"""

from __future__ import annotations

import re

_END = re.compile(r"&&|\|\||[;|)]")  # where the runner's own command ends


def without(line: str, start: int, option: re.Pattern[str]) -> str:
    """`line` with `option`'s matches removed between `start` (the end of the runner's word) and
    the end of the runner's command."""
    end = _END.search(line, start)
    stop = end.start() if end else len(line)
    return line[:start] + option.sub("", line[start:stop]) + line[stop:]


__all__ = ["without"]
