"""Two processes on one memory: this one keeps its memory open, as a worker does, and reads the
agent's block after each change `middle memory` (another process) makes: add, supersede, edit
of the replacement, pin, forget and its undo, a bulk forget and its undo. Prints the first and
the next recall's time and this process's peak memory, then "ok" or "BAD" per step.

    python docs/bench-runs/teamsize/xproc.py PROJECT_DIR   # the folder of its middle.toml
"""

import hashlib
import resource
import subprocess
import sys
import time

from orchestrator.config.settings import load_config
from orchestrator.services import Services


def short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def main() -> None:
    where = sys.argv[1]
    services = Services(load_config(f"{where}/middle.toml", environ={}))
    mem, project = services.memory, services.config.project.id
    bad: list[str] = []

    def cli(*args: str) -> str:
        done = subprocess.run(["middle", "memory", *args], cwd=where, capture_output=True, text=True)
        if done.returncode:
            print("  CLI FAILED", args, done.stdout[-300:], done.stderr[-300:])
        return done.stdout

    def block(query: str) -> str:
        return mem.block(project, [], mem.retrieve(project, [query], 5), limit=5).text

    started = time.perf_counter()
    block("a first query about login sessions")
    first = time.perf_counter() - started
    started = time.perf_counter()
    block("another query about the deploy cluster")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{mem.backend_name}: first recall {first:.2f}s, next {time.perf_counter() - started:.2f}s, {peak} MB")
    tag = f"x{int(time.time()) % 100000}"
    old = f"Rule {tag}: deploys of the {tag} service run on the quartz cluster every Tuesday."
    new = f"Rule {tag}: deploys of the {tag} service run on Kubernetes now, not the quartz cluster."
    edited = f"Rule {tag}: deploys of the {tag} service run on Kubernetes in eu-west now, not the quartz cluster."
    query = f"{tag} service deploys quartz cluster Kubernetes"

    def check(step: str, shown: list[str], gone: tuple[str, ...] = (), query: str = query) -> None:
        text = block(query)
        fine = all(doc in text for doc in shown) and not any(doc in text for doc in gone)
        print(f"  {'ok ' if fine else 'BAD'} {step}")
        if not fine:
            bad.append(step)
            print("     " + text.replace("\n", "\n     ")[:1500])

    def last_change() -> str:
        return cli("history").split()[0]

    cli("add", old)
    check("add seen by the other process", [old])
    cli("supersede", short(old), "--with", new)
    check("supersede: the new one, the old one marked", [new, old, f"superseded by [{short(new)[:8]}]"])
    cli("edit", short(new), "--text", edited)
    check("edit of the replacement", [edited], (new,))
    cli("pin", short(edited))
    check("pin: in the block of an unrelated query", [edited], query="an unrelated question about invoices")
    cli("unpin", short(edited))
    cli("delete", short(edited))
    check("forget", [], (edited,))
    cli("undo", last_change())
    check("undo of the forget", [edited])
    cli("delete", "--containing", f"Rule {tag}:", "--yes")
    check("bulk forget", [], (edited, old))
    cli("undo", last_change())
    check("undo of the bulk forget", [edited])
    print("BAD:", bad or "none")


if __name__ == "__main__":
    main()
