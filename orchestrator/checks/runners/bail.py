"""A runner's own stop at its first failure (`jest --bail`, `mocha --bail`, `vitest --bail 1`, `go test
-failfast`), taken out of a check's line: where the base already fails a test, both runs would stop
there, and a test the ticket broke after it would never run (the ticket read as "no worse").

The runner's bail options are removed from its own command (from the runner's word to the end of
that command: `&&`, `||`, `;`, `|`, `)`), and the runner module adds the option that turns bailing
off, so a config file's `bail` (jest.config.js, .mocharc, vitest.config) is overridden too.
"""

from __future__ import annotations

import re

END = re.compile(r"&&|\|\||[;|)]")  # where a runner's own command ends in a shell line


def without(line: str, runner: re.Pattern[str], option: re.Pattern[str]) -> str:
    """`line` with `option`'s matches removed from the runner's own command: from the end of the
    runner's word (its first match) to the end of that command. Unchanged when it runs no such runner."""
    found = runner.search(line)
    if found is None:
        return line
    end = END.search(line, found.end())
    stop = end.start() if end else len(line)
    return line[:found.end()] + option.sub("", line[found.end():stop]) + line[stop:]


__all__ = ["END", "without"]
