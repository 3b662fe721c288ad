"""`python -m orchestrator.fake_api`: serve the offline demo model and print how to point clients at it."""

from __future__ import annotations

import argparse
import tempfile
import threading

from . import DemoResponder, FakeMessagesAPI


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.fake_api",
                                     description="Serve a fake Anthropic Messages API (the offline demo model).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    args = parser.parse_args(argv)
    with FakeMessagesAPI(DemoResponder(), host=args.host, port=args.port) as fake:
        config_dir = tempfile.mkdtemp(prefix="claude-config-")
        print(fake.base_url, flush=True)
        print(f"# point clients at it:\n"
              f"export ANTHROPIC_BASE_URL={fake.base_url} ANTHROPIC_API_KEY=sk-fake-local\n"
              f"export CLAUDE_CONFIG_DIR={config_dir} CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n"
              f"# Ctrl-C stops the server.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
