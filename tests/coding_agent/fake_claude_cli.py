"""A stand-in `claude` executable for worker tests that need odd process behaviour, not a model.

FAKE_CLAUDE_MODE picks the behaviour; the prompt is read from stdin like `claude -p` does.
"""

import json
import os
import subprocess
import sys
import time


def result(text, **extra):
    line = {"type": "result", "subtype": "success", "is_error": False, "result": text, "session_id": "s-1",
            "total_cost_usd": 0.5, "num_turns": 1, "duration_ms": 7, "usage": {"input_tokens": 3}}
    line.update(extra)
    print(json.dumps(line), flush=True)


def main():
    mode = os.environ.get("FAKE_CLAUDE_MODE", "noise")
    prompt = sys.stdin.read()
    if mode == "noise":  # non-JSON chatter, a flood of stderr, then a normal result
        print("warming up (not JSON)", flush=True)
        print(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "thinking aloud"}]},
                          "session_id": "s-1"}), flush=True)
        sys.stderr.write("e" * 1_000_000 + "\nSTDERR-END\n")
        sys.stderr.flush()
        result(json.dumps({"argv": sys.argv[1:], "prompt": prompt}))
    elif mode == "crash":
        sys.stderr.write("fatal: something broke inside\n")
        sys.exit(3)
    elif mode == "orphan":  # leaves a background child in its process group, as a Bash tool might
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open(os.environ["FAKE_CLAUDE_PIDFILE"], "w") as f:
            f.write(str(child.pid))
        result("left a child behind")
    elif mode in ("detached", "hang"):  # a child in a session of its own, as Claude Code's tool shells are
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        pidfile = os.environ["FAKE_CLAUDE_PIDFILE"]
        with open(pidfile + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        os.replace(pidfile + ".tmp", pidfile)  # whole, for a test that polls for it
        if mode == "hang":  # a turn still in flight
            time.sleep(300)
        result("left a detached child behind")
    elif mode == "linger":  # answers, then stays for a background task, as Claude Code does
        result("answered")
        time.sleep(300)
    elif mode == "in_use":  # what Claude Code does when --session-id names an existing session
        if "--session-id" in sys.argv:
            sys.stderr.write(f"Error: Session ID {sys.argv[-1]} is already in use.\n")
            sys.exit(1)
        result("resumed " + " ".join(sys.argv[-2:]))


if __name__ == "__main__":
    main()
