"""`middle memory search|list|show|add|edit|supersede|pin|unpin|delete|history|stats|undo|retry|export|stores|
reindex|import`: the project memory from the command line. Every change is recorded (who, when, before and after:
`middle memory history`) and can be taken back (`middle memory undo N`)."""

from __future__ import annotations

import json
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from orchestrator.cli.context import command_backend, default_project, project_curator, project_memory  # noqa: F401
from orchestrator.cli.output import console, err_console, hanging, safe
from orchestrator.errors import MemoryStoreError, MiddleError
from orchestrator.memory.format import DOC_ID_CHARS, doc_id, truncate_doc, unique_ids
from orchestrator.plugins.memory_backend import MemoryDatabase

project_option = click.option(
    "--project",
    "-p",
    default=None,
    help="Project id (default: [project] id, else the only project of the tickets, else the project folder's name).",
)
# A project id named with -p must be known (configured, of a ticket, or with a store): a typo
# would start an empty store. `add` and `import` may start a new project's memory on purpose.
create_option = click.option(
    "--create", is_flag=True, help="Start the memory of a project that has none yet (else a new --project is refused)."
)


_memory = project_memory  # the facade and the project id of this command


@click.group()
def memory() -> None:
    """Search, list, show, add, edit, supersede, pin, delete, undo, export, reindex and import
    project memory."""


filter_options = [
    click.option("--source", default=None, metavar="KIND",
                 help="Docs from: ticket, commit, file, transcript, hand, api, supersede, unknown."),
    click.option("--ticket", default=None, metavar="ID", help="Docs a ticket indexed."),
    click.option("--before", default=None, metavar="DATE",
                 help="Docs dated before DATE (YYYY-MM-DD: that day's start, UTC; a doc's own "
                 "time where the backend keeps one, else when it entered memory)."),
    click.option("--after", default=None, metavar="DATE", help="Docs dated at or after DATE."),
    click.option("--containing", default=None, metavar="TEXT", help="Docs whose text holds TEXT."),
    click.option("--yes", "-y", is_flag=True, help="Do not ask before changing many docs."),
]


def with_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(filter_options):
        command = option(command)
    return command


@memory.command()
@click.argument("query")
@click.option("-k", "num", default=5, show_default=True, type=click.IntRange(min=1), help="How many docs to return.")
@click.option(
    "--explain",
    is_flag=True,
    help="Under each doc, why it was recalled: shared keywords, BM25 score, vector similarity, "
    "graph path, recall strategies, date, pinned, superseded.",
)
@click.option("--as-of", "as_of", default=None, metavar="DATE",
              help="What memory said then: the docs it held at DATE (YYYY-MM-DD: by that day's "
              "end, UTC) not yet superseded, deleted or expired.")
@project_option
@click.pass_context
def search(ctx: click.Context, query: str, num: int, explain: bool, as_of: str | None,
           project: str | None) -> None:
    """Show what recall returns for QUERY, with scores."""
    if not query.strip():  # (an empty query ranks nothing: what came back were just some docs)
        raise MiddleError("the query is empty: give the words to look for, e.g. `middle memory search "
                          "\"login cookie\"` (`middle memory list` shows every doc)")
    mem, pid = _memory(ctx, project)
    if as_of is not None:
        _search_as_of(ctx, query, num, as_of, explain, project)
        return
    if mem.backend_cls.recall == "recency":
        err_console.print(
            f"note: backend {mem.backend_name!r} recalls by recency: these are the "
            "newest docs whatever the query, and the scores do not rank relevance"
        )
    results = mem.retrieve(pid, [query], num, if_exists=True)
    for result in results:
        if not result["docs"]:
            console.print("(no memories)")
        marks = {m["doc"]: m["by"] for m in result.get("superseded", [])}
        # each id as the block shows it (longer where two docs share 8), so any can be pasted
        ids = mem.doc_ids(pid, list(result["docs"])) if result["docs"] else {}
        why = mem.explain(pid, query, result, ids) if explain else []
        for pos, (doc, score) in enumerate(zip(result["docs"], result["doc_scores"])):
            console.print(hanging(f"{score:7.3f}  [{ids[doc]}] ", doc))
            if pos in marks:
                by = ids[result["docs"][marks[pos]]]
                console.print(hanging("         ", f"(superseded by {by}: kept as history)"))
            if why:
                console.print(hanging("         why: ", why[pos]["why"]))


def _search_as_of(ctx: click.Context, query: str, num: int, as_of: str, explain: bool,
                  project: str | None) -> None:
    from orchestrator.memory.asof import search_as_of

    curator, pid = project_curator(ctx, project)
    at, held, result = search_as_of(curator, pid, query, as_of, num)
    # a doc no longer held (deleted, or its text before an edit) has no signals but its words;
    # ids told apart from the docs the store holds now (what `show` looks up)
    ids = curator.facade.doc_ids(pid, list(result["docs"])) if result["docs"] else {}
    why = curator.facade.explain(pid, query, result, ids) if explain else []
    err_console.print(f"memory as of {at[:19]} UTC: {held} doc(s) held then, not superseded, "
                      "deleted or expired by then")
    if not result["docs"]:
        console.print("(no memories)")
    for pos, (doc, score) in enumerate(zip(result["docs"], result["doc_scores"])):
        console.print(hanging(f"{score:7.3f}  [{ids[doc]}] ", doc))
        if why:
            console.print(hanging("         why: ", why[pos]["why"]))


# Lines printed per console call: Rich's own work per call (measuring the terminal, collecting
# renderables) was 43 of 55 s of `middle memory list` at 100,000 docs; it prints without
# wrapping (soft_wrap), so a batch prints exactly what its lines one by one would.
_LIST_BATCH = 1000


@memory.command(name="list")
@project_option
@click.pass_context
def list_(ctx: click.Context, project: str | None) -> None:
    """List every doc in the project's memory with its id (what `delete` takes)."""
    from orchestrator.memory.curation import replacement
    from orchestrator.memory.timeline import expiry_note

    mem, pid = _memory(ctx, project)
    docs = mem.list_docs(pid)
    states = mem.curation_state(pid) if docs else {}
    # every doc of the store is listed: each id told from the others (as the block shows it)
    shown = unique_ids([doc_id(doc) for doc in docs])
    width = max((len(i) for i in shown.values()), default=DOC_ID_CHARS)
    lines: list[str] = []
    for doc in docs:
        lines.append(hanging(f"{shown[doc_id(doc)]:<{width}}  ", doc))
        state, new = states.get(doc_id(doc)), replacement(states, doc_id(doc))
        validity = expiry_note(state)
        notes = (["pinned"] if state and state["pinned"] else []) + (
            [f"superseded by {shown.get(new['doc_id']) or new['doc_id'][:DOC_ID_CHARS]}"] if new else []
        ) + ([validity] if validity else [])
        if notes:
            lines.append(" " * (width + 2) + f"({'; '.join(notes)})")
        if len(lines) >= _LIST_BATCH:
            console.print("\n".join(lines))
            lines = []
    if lines:
        console.print("\n".join(lines))
    err_console.print(f"({len(docs)} doc(s) in {safe(mem.where(pid))}, backend {mem.backend_name})")


def _ids(curator: Any, pid: str, *docs: str) -> list[str]:
    """The ids `docs` are shown by: the shortest that tell each from every doc in the store
    (MemoryFacade.short_ids), so a person can paste any id a message prints."""
    shown = curator.facade.short_ids(pid, [doc_id(d) for d in docs])
    return [shown[doc_id(d)] for d in docs]


@memory.command()
@click.argument("text")
@click.option("--valid-until", "valid_until", default=None, metavar="DATE",
              help="The doc expires then (YYYY-MM-DD: valid through that day, UTC): out of "
              "recall, shown as expired.")
@project_option
@create_option
@click.pass_context
def add(ctx: click.Context, text: str, valid_until: str | None, project: str | None,
        create: bool) -> None:
    """Index TEXT as one doc (at most [memory] max_doc_chars long; its <private>...</private>
    spans are not stored)."""
    from orchestrator.memory.curation import cli_user

    curator, pid = project_curator(ctx, project, create)
    done = curator.add(pid, text, cli_user(), valid_until=valid_until)
    ident, = _ids(curator, pid, done.doc)
    if done.change is None:
        console.print(f"already in memory (id {ident}): nothing added")
        return
    console.print(f"added 1 doc (id {ident}) to {safe(curator.facade.where(pid))} (change {done.change})")


@memory.command()
@click.argument("id_or_text", metavar="[ID_OR_TEXT]", required=False)
@with_filters
@project_option
@click.pass_context
def delete(ctx: click.Context, id_or_text: str | None, source: str | None, ticket: str | None,
           before: str | None, after: str | None, containing: str | None, yes: bool,
           project: str | None) -> None:
    """Delete one doc: by its id from `middle memory list` (4+ characters of it), or by its
    exact text; or every doc the filters pick (--source, --ticket, --before, --after,
    --containing), after one question, as one change. `middle memory undo N` puts them back."""
    from orchestrator.memory import bulk
    from orchestrator.memory.curation import cli_user

    curator, pid = project_curator(ctx, project)
    flt = _filter(id_or_text, source, ticket, before, after, containing)
    if flt is not None:
        docs = bulk.select(curator, pid, flt)
        _confirm(docs, flt.words(), "Delete", yes, _ids(curator, pid, *docs[:10]))
        done = bulk.forget_all(curator, pid, docs, cli_user(), flt.words())
        console.print(f"{done.message} (change {done.change}; `middle memory undo {done.change}` "
                      "puts them all back)")
        return
    done = curator.forget(pid, id_or_text or "", cli_user())
    console.print(
        f"deleted doc {_ids(curator, pid, done.doc)[0]} (change {done.change}; "
        f"`middle memory undo {done.change}` puts it back)"
    )


@memory.command()
@click.argument("ident", metavar="ID")
@project_option
@click.pass_context
def show(ctx: click.Context, ident: str, project: str | None) -> None:
    """One doc: its text, where it came from (ticket and run, import, or by hand; when, by
    whom), what it superseded or what superseded it, whether it is pinned, and its changes."""
    from orchestrator.cli.memory_view import print_doc
    from orchestrator.memory.catalog import project_usage
    from orchestrator.memory.curation import change_ids

    curator, pid = project_curator(ctx, project)
    shown = curator.show(pid, ident)
    ids = curator.facade.short_ids(pid, change_ids(shown["changes"]))
    print_doc(console, {**shown, "uses": project_usage(curator.store, pid).get(shown["id"][:DOC_ID_CHARS])}, ids)


@memory.command()
@click.argument("ident", metavar="ID")
@click.option("--text", default=None, help="The new text (default: edit it in $EDITOR).")
@click.option("--valid-until", "valid_until", default=None, metavar="DATE",
              help="Set when the doc expires (YYYY-MM-DD: valid through that day, UTC; `never` "
              "clears it); alone, the text is left as it is.")
@project_option
@click.pass_context
def edit(ctx: click.Context, ident: str, text: str | None, valid_until: str | None,
         project: str | None) -> None:
    """Change a doc's text: it is re-embedded and re-indexed alone, keeps its pins, supersede
    links, ticket and time; `middle memory undo` puts the old text back."""
    from orchestrator.memory.curation import cli_user

    if text is not None and not text.strip():  # said in this command's words, before any store opens
        raise MiddleError("the new text is empty: give the doc's words (--text TEXT, or leave "
                          "--text out to write them in the editor)")
    curator, pid = project_curator(ctx, project)
    if valid_until is not None:
        done = curator.set_valid_until(pid, ident, valid_until, cli_user())
        change = f" (change {done.change})" if done.change else ""
        ident, = _ids(curator, pid, done.doc)
        console.print(f"doc {ident}: {done.message}{change}")
        if text is None:
            return
    if text is None:
        old = curator.find(pid, ident)
        try:
            text = click.edit(old, require_save=True)
        except click.ClickException as exc:  # no editor, or it failed: say what works instead
            raise MiddleError(f"{exc.format_message()}: set $EDITOR (or $VISUAL) to an editor that "
                              "works here, or give the text with --text TEXT; nothing was changed") from None
        if text is None:
            raise MiddleError("the editor closed without saving: nothing was changed")
        text = text.rstrip("\n")
    done = curator.edit(pid, ident, text, cli_user())
    old, new = _ids(curator, pid, done.old or "", done.doc)
    console.print(f"edited doc {old}: it is now {new} (change {done.change})")


@memory.command()
@click.argument("ident", metavar="[ID]", required=False)
@click.option("--with", "text", required=True, metavar="TEXT", help="The doc that replaces it.")
@with_filters
@project_option
@click.pass_context
def supersede(ctx: click.Context, ident: str | None, text: str, source: str | None,
              ticket: str | None, before: str | None, after: str | None,
              containing: str | None, yes: bool, project: str | None) -> None:
    """Replace a doc with TEXT by hand (or every doc the filters pick, after one question, as
    one change): the old ones are kept, marked, and ranked right below their replacement
    (shown as history)."""
    from orchestrator.memory import bulk
    from orchestrator.memory.curation import cli_user

    if not text.strip():  # said in this command's words (--with), before any store is opened
        raise MiddleError("the new text is empty: give the words of the doc that replaces it "
                          "(--with TEXT, e.g. --with 'Sessions now use JWT tokens.')")
    curator, pid = project_curator(ctx, project)
    flt = _filter(ident, source, ticket, before, after, containing)
    if flt is not None:
        docs = bulk.select(curator, pid, flt)
        _confirm(docs, flt.words(), "Supersede", yes, _ids(curator, pid, *docs[:10]))
        done = bulk.supersede_all(curator, pid, docs, text, cli_user(), flt.words())
        console.print(f"{done.message} by {_ids(curator, pid, done.doc)[0]} (change {done.change}; "
                      f"`middle memory undo {done.change}` takes it back)")
        return
    done = curator.supersede(pid, ident or "", text, cli_user())
    old, new = _ids(curator, pid, done.old or "", done.doc)
    console.print(f"doc {old} is superseded by {new} (change {done.change})")


@memory.command()
@click.argument("ident", metavar="ID")
@project_option
@click.pass_context
def pin(ctx: click.Context, ident: str, project: str | None) -> None:
    """Pin a doc: always in the agent's memories while pinned (within the block's budget)."""
    _pin(ctx, ident, project, True)


@memory.command()
@click.argument("ident", metavar="ID")
@project_option
@click.pass_context
def unpin(ctx: click.Context, ident: str, project: str | None) -> None:
    """Unpin a doc: recalled by relevance again."""
    _pin(ctx, ident, project, False)


def _filter(ident: str | None, source: str | None, ticket: str | None, before: str | None,
            after: str | None, containing: str | None) -> Any:
    """The bulk filter the options give, or None for one doc named by `ident`."""
    from orchestrator.memory.bulk import DocFilter

    given = {"source": source, "ticket": ticket, "before": before, "after": after,
             "containing": containing}
    if not any(v is not None for v in given.values()):
        if ident is None:
            raise MiddleError("give a doc's id (`middle memory list` shows them), or filters "
                              "(--source, --ticket, --before, --after, --containing) to change "
                              "many docs at once")
        return None
    if ident is not None:
        raise MiddleError("give a doc's id or filters, not both: nothing was changed")
    flt = DocFilter.of(**given)
    if flt.empty():
        raise MiddleError("the filters are empty: give a value to at least one of them")
    return flt


def _confirm(docs: list[str], words: str, verb: str, yes: bool, ids: list[str]) -> None:
    """Show what a bulk change takes (the first 10 docs, by `ids`) and ask once (unless --yes)."""
    if not docs:
        raise MiddleError(f"no doc matches {words}: nothing was changed")
    err_console.print(f"{len(docs)} doc(s) match {safe(words)}:")
    for doc, ident in zip(docs[:10], ids):
        err_console.print(safe(f"  {ident}  {' '.join(doc.split())[:100]}"), soft_wrap=True)
    if len(docs) > 10:
        err_console.print(f"  ... and {len(docs) - 10} more")
    if yes:
        return
    try:
        agreed = click.confirm(f"{verb} these {len(docs)} doc(s)? (one `middle memory undo` takes "
                               "it back)", default=False, err=True)
    except click.Abort:
        agreed = False
    if not agreed:
        raise MiddleError("not confirmed: nothing was changed (add --yes to change them "
                          "without the question)")


def _pin(ctx: click.Context, ident: str, project: str | None, pinned: bool) -> None:
    from orchestrator.memory.curation import cli_user

    curator, pid = project_curator(ctx, project)
    done = curator.pin(pid, ident, cli_user(), pinned)
    ident, = _ids(curator, pid, done.doc)
    console.print(f"doc {ident}: {done.message}" + (f" (change {done.change})" if done.change else ""))


@memory.command()
@click.argument("ident", metavar="[ID]", required=False)
@click.option(
    "-n", "limit", default=50, show_default=True, type=click.IntRange(min=1), help="How many changes, newest first."
)
@click.option("--full", is_flag=True, help="Each change's whole before and after (an edit as a diff), "
              "not one line cut at 120 characters.")
@project_option
@click.pass_context
def history(ctx: click.Context, ident: str | None, limit: int, full: bool, project: str | None) -> None:
    """The changes made to the project's memory (or to one doc), newest first: who, when,
    what, before and after; `middle memory undo N` takes change N back."""
    from orchestrator.cli.memory_view import print_changes
    from orchestrator.memory.curation import change_ids

    if (pid := _nothing_yet(ctx, project)) is not None:
        console.print(f"no memory yet for project {pid}: no doc was added or changed, so there is no history")
        return
    curator, pid = project_curator(ctx, project)
    changes = curator.show(pid, ident)["changes"][:limit] if ident else curator.changes(pid, limit)
    print_changes(console, changes, full=full, ids=curator.facade.short_ids(pid, change_ids(changes)))


def _nothing_yet(ctx: click.Context, project: str | None) -> str | None:
    """The project's id when it has no memory at all yet (no ticket store, so no change or
    use recorded, and no doc in its memory store), else None: a read-only verb then says so
    instead of creating the ticket store."""
    from orchestrator.cli.context import get_config, services

    if services(ctx, get_config(ctx)).read_store() is not None:
        return None
    mem, pid = project_memory(ctx, project)
    return None if mem.has_store(pid) and mem.list_docs(pid) else pid


@memory.command()
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
@project_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool, project: str | None) -> None:
    """The project's memory in numbers: docs by source, pinned and superseded, how many the
    agent was shown and said it used, and the candidates to supersede or forget (recalled in
    3 or more runs, never used)."""
    from orchestrator.cli.memory_view import print_stats
    from orchestrator.memory.catalog import Catalog, build_catalog
    from orchestrator.memory.catalog import stats as catalog_stats

    if (pid := _nothing_yet(ctx, project)) is not None:
        mem, _ = project_memory(ctx, project)
        numbers = {"project": pid, "backend": mem.backend_name, **catalog_stats(Catalog([], {}, {}, {}))}
        if not as_json:
            console.print(f"no memory yet for project {pid}: no doc was indexed ({safe(mem.where(pid))})")
            return
    else:
        curator, pid = project_curator(ctx, project)
        numbers = {"project": pid, "backend": curator.facade.backend_name,
                   **catalog_stats(build_catalog(curator.facade, curator.store, pid))}
    if as_json:
        click.echo(json.dumps(numbers, indent=2))
    else:
        print_stats(console, numbers)


@memory.command()
@click.argument("change", type=int)
@project_option
@click.pass_context
def undo(ctx: click.Context, change: int, project: str | None) -> None:
    """Take back change CHANGE (its number from `middle memory history`)."""
    from orchestrator.memory.curation import cli_user

    curator, pid = project_curator(ctx, project)
    done = curator.undo(pid, change, cli_user())
    # one doc's undo names it; a bulk undo's message counts its docs ("put back 3 docs")
    doc = f", doc {_ids(curator, pid, done.doc)[0]}" if done.doc and not done.message.endswith(" docs") else ""
    console.print(f"{done.message} (change {change}{doc}); recorded as change {done.change}")


@memory.command()
@project_option
@click.pass_context
def retry(ctx: click.Context, project: str | None) -> None:
    """Index the completion docs memory could not take when their ticket completed (the next
    run does this too)."""
    from orchestrator.cli.context import get_config, services
    from orchestrator.memory.pending import index_pending

    config = get_config(ctx)
    svc = services(ctx, config)
    mem, pid = _memory(ctx, project)
    done = index_pending(svc.store, mem, pid)
    if not done.indexed and not done.pending:
        console.print(f"nothing to retry: every completion doc of project {pid} is in memory")
        return
    if done.indexed:
        console.print(f"indexed {done.indexed} pending completion doc(s) into {safe(mem.where(pid))}")
    if done.pending:
        raise MemoryStoreError(
            f"{done.pending} completion doc(s) of project {pid} are still not indexed "
            f"({done.errors[0]}): fix that, then run `middle memory retry` again"
        )


@memory.command()
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write JSON here instead of standard output."
)
@project_option
@click.pass_context
def export(ctx: click.Context, output: str | None, project: str | None) -> None:
    """Export every doc of the project's memory as JSON."""
    mem, pid = _memory(ctx, project)
    docs = mem.list_docs(pid)
    data = json.dumps({"project": pid, "backend": mem.backend_name, "docs": docs}, ensure_ascii=False, indent=2)
    if not output:
        click.echo(data)
        return
    target = Path(output)
    try:
        target.write_text(data + "\n", encoding="utf-8")
    except OSError as exc:
        raise MiddleError(
            f"cannot write {target.resolve()} ({exc.strerror}): choose a path in an existing directory you can write to"
        ) from None
    console.print(f"wrote {len(docs)} doc(s) to {safe(target)}")


@memory.command()
@project_option
@click.pass_context
def stores(ctx: click.Context, project: str | None) -> None:
    """List the project's stores: one per backend it has been used with."""
    from orchestrator.memory.stores import store_counts

    mem, pid = _memory(ctx, project)
    rows = store_counts(mem, pid)
    for name, count, note in rows:
        docs = "?" if count is None else f"{count} doc(s)"
        console.print(f"{name:16} {docs:>12}  {safe(note)}")
    if not rows:
        console.print("(no stores)")
    err_console.print(f"(in {safe(mem.where(pid))}; [memory] backend = {mem.backend_name})")


@memory.command()
@click.option(
    "--from",
    "source",
    required=True,
    metavar="BACKEND",
    help="The backend whose store of the project to read (the configured backend "
    "itself rebuilds its store, e.g. to re-embed it with a newly installed model).",
)
@click.option(
    "--from-url",
    "from_url",
    default=None,
    metavar="URL|local",
    help="Where that store is, when not where [memory] url says: 'local' (the SQLite store "
    "under [memory] save_dir) or the PostgreSQL URL it is in; moves a memory between the two.",
)
@project_option
@click.pass_context
def reindex(ctx: click.Context, source: str, from_url: str | None, project: str | None) -> None:
    """Copy a project's docs from one backend's store into the configured backend."""
    from orchestrator.memory.stores import reindex as run_reindex

    mem, pid = _memory(ctx, project)
    report = run_reindex(mem, pid, source, from_url)
    if report.damage is not None:
        console.print(
            f"the old store was damaged: the {report.copied} doc(s) that could still be "
            "read from it were indexed afresh"
        )
    origin = report.source
    if from_url is not None:  # the store's place, its password hidden
        origin += f" ({from_url if from_url == 'local' else MemoryDatabase(from_url, pid).shown_url})"
    line = (
        f"reindexed {report.copied} doc(s) from {origin} into {report.target}"
        if report.source != report.target or from_url is not None
        else f"rebuilt the {report.target} store: {report.copied} doc(s) indexed afresh"
    )
    if report.already:
        line += f"; {report.already} already there"
    console.print(line)
    if report.backup is not None:
        console.print(f"the old store's files are in {safe(report.backup)} (delete it when the new store looks right)")


@memory.command(name="import")
@click.argument("sources", nargs=-1, required=True, metavar="git | FILES...")
@click.option(
    "--since", default=None, metavar="REF", help="With git: only the commits after REF (a commit, tag or branch)."
)
@click.option(
    "--repo",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="With git: the repository (default: the project's path, [project] path).",
)
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
@project_option
@create_option
@click.pass_context
def import_(
    ctx: click.Context,
    sources: tuple[str, ...],
    since: str | None,
    repo: Path | None,
    progress: bool,
    project: str | None,
    create: bool,
) -> None:
    """Index a project's existing history: `git` (one doc per non-merge commit, new commits
    only on a rerun), or FILES: Markdown or text (one doc per section) and Claude Code session
    transcripts (.jsonl, one doc per session), or folders of them."""
    from orchestrator.cli.context import get_config
    from orchestrator.memory.importers import files as file_import
    from orchestrator.memory.importers import git as git_import
    from orchestrator.memory.importers import import_lock, index_batches

    if sources == ("git",):
        config = get_config(ctx)
        curator, pid = project_curator(ctx, project, create)
        mem = curator.facade
        where = repo if repo is not None else config.resolve(config.project.path)
        with _progress(progress) as track, _interruptible("git"):
            report, total = git_import.import_history(mem, pid, where, config.state_path, since, track,
                                                      lambda batch: _note_origins(curator, pid, batch))
        if not total:
            console.print(f"nothing new to import: every commit of {safe(where)} is in memory")
            return
        console.print(
            f"imported {report.added} new commit(s) of {total} into {safe(mem.where(pid))}"
            + (f"; {report.already} already there" if report.already else "")
        )
        return
    if since is not None or repo is not None:
        raise click.UsageError("--since and --repo go with `middle memory import git`")
    paths = file_import.expand([Path(s) for s in sources])
    # Every file is read before anything is indexed: bad input imports nothing.
    records: list[tuple[str, float | None]] = []
    origins: dict[str, dict[str, str]] = {}  # each doc's file, recorded after its batch is indexed
    for path in paths:
        kind = "transcript" if path.suffix.lower() == file_import.TRANSCRIPT_SUFFIX else "file"
        for text, when in file_import.read_records(path):
            records.append((text, when))
            origins[text] = {"kind": kind, "path": str(path.resolve())}
    curator, pid = project_curator(ctx, project, create)
    mem = curator.facade
    noted = 0

    def note(read: int) -> None:  # after each batch, so a doc in memory has its origin (a kill between: the rerun)
        nonlocal noted
        _note_origins(curator, pid, {text: origins[text] for text, _ in records[noted:read]})
        noted = read

    with (import_lock(get_config(ctx).state_path, pid), _progress(progress) as track,
          _interruptible(" ".join(shlex.quote(s) for s in sources))):
        report = index_batches(mem, pid, records, track(f"importing {len(records)} doc(s)", len(records)), note)
    console.print(
        f"imported {report.added} new doc(s) from {len(paths)} file(s) into "
        f"{safe(mem.where(pid))}" + (f"; {report.already} already there" if report.already else "")
    )


@contextmanager
def _interruptible(what: str) -> Iterator[None]:
    """Ctrl-C during an import: what it indexed stays (with its origins), and a rerun goes on."""
    try:
        yield
    except KeyboardInterrupt:
        from orchestrator.cli.main import EXIT_INTERRUPTED

        err_console.print("[yellow]interrupted:[/] the docs imported so far are kept; run "
                          f"`middle memory import {safe(what)}` again to go on where it stopped")
        sys.exit(EXIT_INTERRUPTED)


def _note_origins(curator: Any, project_id: str, origins: dict[str, dict[str, Any]]) -> None:
    """Record where each imported doc came from (`middle memory show`); a doc that already has
    an origin keeps it."""
    from orchestrator.memory.curation import cli_user

    # The text as stored, cut as the import cut it (and warned about once, there).
    cap = curator.facade.max_doc_chars
    prepared = [(truncate_doc(text, cap), origin) for text, origin in origins.items()]
    curator.store.note_memory_origins(project_id, [(doc_id(d), d, o) for d, o in prepared], cli_user())


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    """`track(description, total)` -> advance(n): a rich bar on stderr, or nothing (also when
    stderr is no terminal: there the bar only left a blank line, e.g. before an error)."""
    if not enabled or not err_console.is_terminal:
        yield lambda _d, _t: (lambda _n: None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:

        def track(description: str, total: int) -> Callable[[int], None]:
            task = bar.add_task(description, total=max(total, 1))
            return lambda n: bar.advance(task, n)

        yield track
