"""The `github` ticket source: a repository's open issues as tickets `gh-<number>`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tickets.errors import ConfigError, TicketError
from tickets.github.client import GitHubClient, github_settings, parse_repo
from tickets.model import Ticket, validate_project_id
from tickets.source import ClosingSource, LoadResult, SourceContext, TicketFileError

__all__ = ["GitHubIssuesSource", "dependencies", "issue_number", "short_origin"]

OPTIONS = frozenset({"repo", "labels", "milestone", "project"})
PREFIX = "gh-"
CLOSED_NOTE = "issue #{number} was closed on GitHub"  # the reason a closed issue's ticket is discarded
# ... and one whose issue GitHub no longer has (410: deleted; 404: deleted, or hidden from the token)
GONE_NOTE = "issue #{number} is gone from GitHub (deleted, or no longer visible to the token)"
# "Depends on #12", "- blocked by #3 and #4": a line naming what must be done first.
_DEP_LINE = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?(?:depends\s+on|blocked\s+by)\b", re.IGNORECASE)
_REF = re.compile(r"(?<![\w/#])#(\d+)\b")


def issue_number(ticket_id: str) -> int | None:
    """The issue number of a `gh-<number>` ticket id, else None."""
    rest = ticket_id[len(PREFIX):] if ticket_id.startswith(PREFIX) else ""
    return int(rest) if rest.isdigit() else None


def dependencies(body: str) -> tuple[list[int], str]:
    """The issue numbers of the body's "depends on #N" / "blocked by #N" lines, and the body without them."""
    numbers: list[int] = []
    kept: list[str] = []
    for line in body.replace("\r\n", "\n").split("\n"):
        if _DEP_LINE.match(line) and _REF.search(line):
            numbers.extend(int(n) for n in _REF.findall(line) if int(n) not in numbers)
        else:
            kept.append(line)
    return numbers, "\n".join(kept).strip()


def _text_list(value: Any, what: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
        raise ConfigError(f"bad [tickets.options] for source 'github': {what} must be text or a list of text")
    return [i.strip() for i in items]


class GitHubIssuesSource(ClosingSource):
    """Open issues of one GitHub repository (pull requests left out), optionally by label or milestone."""

    kind = "github"
    argument = "repo"  # `middle sync --from github:OWNER/REPO`

    def __init__(self, repo: str, context: SourceContext, *, labels: list[str] | None = None,
                 milestone: str | None = None, project: str | None = None) -> None:
        self.repo = parse_repo(repo)
        self.context = context
        self.labels = labels or []
        self.milestone = milestone
        self.api_url, self.token_env, self.max_wait_s = github_settings(context.sections.get("github"))
        self.project = project or context.project_id or _folder_project(context.project_path)
        validate_project_id(self.project)

    @classmethod
    def open(cls, options: dict[str, Any], context: SourceContext) -> GitHubIssuesSource:
        """The repository of `options["repo"]`, with `labels`, `milestone` and `project` if given."""
        unknown = sorted(set(options) - OPTIONS)
        if unknown:
            raise ConfigError(f"bad [tickets.options] for source 'github': unknown option(s) {', '.join(unknown)}. "
                              f"Allowed options: {', '.join(sorted(OPTIONS))}")
        if not options.get("repo"):
            raise ConfigError("no GitHub repository: set [tickets.options] repo = \"OWNER/REPO\", or use "
                              "`middle sync --from github:OWNER/REPO`")
        labels = _text_list(options["labels"], "labels") if options.get("labels") else None
        milestone = options.get("milestone")
        if milestone is not None and (isinstance(milestone, bool) or not isinstance(milestone, (str, int))):
            raise ConfigError("bad [tickets.options] for source 'github': milestone is a title or a number")
        project = options.get("project")
        if project is not None and not isinstance(project, str):
            raise ConfigError("bad [tickets.options] for source 'github': project is a project id (text)")
        return cls(options["repo"], context, labels=labels,
                   milestone=str(milestone) if milestone is not None else None, project=project)

    @property
    def where(self) -> str:
        return f"github:{self.repo}"

    def _client(self) -> GitHubClient:
        state = self.context.state_dir
        cache = state / "github" / f"{self.repo.replace('/', '__')}.json" if state is not None else None
        return GitHubClient(self.repo, api_url=self.api_url, token_env=self.token_env,
                            max_wait_s=self.max_wait_s, cache=cache)

    def load(self) -> LoadResult:
        """Every open issue (all pages read before anything is returned); a bad issue is an error of its own."""
        with self._client() as gh:
            params: dict[str, Any] = {"state": "open", "per_page": 100}
            if self.labels:
                params["labels"] = ",".join(self.labels)
            if self.milestone is not None:
                params["milestone"] = self._milestone_number(gh)
            issues = gh.get_all("/issues", params, f"the issue list of {self.repo}")
            done = self._done_dependencies(gh, issues)
            gh.save_cache()
        result = LoadResult()
        for issue in sorted((i for i in issues if isinstance(i, dict)), key=lambda i: str(i.get("number"))):
            if "pull_request" in issue:
                continue  # GitHub lists pull requests among the issues
            where = issue.get("html_url") if isinstance(issue.get("html_url"), str) else None
            try:
                result.tickets.append(self._ticket(issue))
            except TicketError as exc:
                result.errors.append(TicketFileError(where or f"{self.where}#{issue.get('number')}", str(exc)))
        result.tickets.sort(key=lambda t: issue_number(t.id) or 0)
        # A dependency on a closed issue (or on a pull request) is done: it holds nothing back.
        result.tickets = [t if not done & set(t.depends_on) else
                          t.replace(depends_on=[d for d in t.depends_on if d not in done]) for t in result.tickets]
        return result

    def _done_dependencies(self, gh: GitHubClient, issues: list[Any]) -> set[str]:
        """The `gh-N` ids that issues depend on and that are closed issues or pull requests; one
        that is not in the list is read on its own (an unknown one stays, and is reported)."""
        listed: dict[int, dict[str, Any]] = {i["number"]: i for i in issues
                                             if isinstance(i, dict) and isinstance(i.get("number"), int)}
        wanted: set[int] = set()
        for issue in listed.values():
            if "pull_request" not in issue and isinstance(issue.get("body"), str):
                wanted.update(dependencies(issue["body"])[0])
        done = set()
        for number in sorted(wanted):
            item = listed.get(number) or gh.get(f"/issues/{number}", f"issue #{number} of {self.repo}",
                                                missing_ok=True)
            if isinstance(item, dict) and ("pull_request" in item or item.get("state") == "closed"):
                done.add(f"{PREFIX}{number}")
        return done

    def _milestone_number(self, gh: GitHubClient) -> str:
        """GitHub filters by milestone number: a title is looked up among the repository's milestones."""
        assert self.milestone is not None
        if self.milestone.isdigit() or self.milestone in ("*", "none"):
            return self.milestone
        found = gh.get_all("/milestones", {"state": "all", "per_page": 100}, f"the milestones of {self.repo}")
        for m in found:
            if isinstance(m, dict) and m.get("title") == self.milestone and isinstance(m.get("number"), int):
                return str(m["number"])
        titles = ", ".join(repr(m.get("title")) for m in found if isinstance(m, dict)) or "none"
        raise ConfigError(f"no milestone {self.milestone!r} in {self.repo} (milestones: {titles}): give its "
                          "title or number")

    def _ticket(self, issue: dict[str, Any]) -> Ticket:
        number, title, body = issue.get("number"), issue.get("title"), issue.get("body") or ""
        if not isinstance(number, int) or number <= 0:
            raise TicketError("an issue without a number in GitHub's answer: check [github] api_url")
        if not isinstance(title, str) or not title.strip():
            raise TicketError(f"issue #{number} has no title: give it one on GitHub")
        if not isinstance(body, str):
            raise TicketError(f"issue #{number} ({title!r}): its body is not text")
        numbers, description = dependencies(body)
        if number in numbers:
            raise TicketError(f"issue #{number} ({title!r}) depends on itself: fix its \"depends on #N\" line")
        labels = [lab.get("name") for lab in issue.get("labels") or [] if isinstance(lab, dict)]
        milestone = issue.get("milestone")
        fields: dict[str, Any] = {"labels": [str(x) for x in labels if isinstance(x, str)],
                                  "github": {"repo": self.repo, "number": number}}
        if isinstance(milestone, dict) and isinstance(milestone.get("title"), str):
            fields["milestone"] = milestone["title"]
        url = issue.get("html_url")
        return Ticket(id=f"{PREFIX}{number}", project_id=self.project, title=title.strip(), description=description,
                      project_path=str(self.context.project_path),
                      source=url if isinstance(url, str) and url.startswith("http") else f"{self.where}#{number}",
                      fields=fields, depends_on=[f"{PREFIX}{n}" for n in numbers])

    def closed(self, tickets: list[Ticket]) -> dict[str, str]:
        """Of these stored tickets, those whose issue in this repository is closed or gone: id -> why.
        An issue GitHub answers 404 or 410 for is gone once the repository itself still answers
        (a repository that is gone, or hidden from the token, stays that error)."""
        mine = [(t.id, n) for t in tickets if (n := issue_number(t.id)) is not None
                and isinstance(t.fields.get("github"), dict) and t.fields["github"].get("repo") == self.repo]
        if not mine:
            return {}
        found: dict[str, str] = {}
        with self._client() as gh:
            for tid, number in mine:
                issue = gh.get(f"/issues/{number}", f"issue #{number} of {self.repo}", missing_ok=True)
                if issue is None:
                    gh.get("", f"the repository {self.repo}")
                    found[tid] = GONE_NOTE.format(number=number)
                elif isinstance(issue, dict) and issue.get("state") == "closed":
                    found[tid] = CLOSED_NOTE.format(number=number)
            gh.save_cache()
        return found

    def reopened(self, tickets: list[Ticket]) -> dict[str, str]:
        """Of these stored discarded tickets (their issue is open again), those a sync discarded
        because the issue was closed or gone: they go back to pending. id -> why."""
        back = {}
        for t in tickets:
            number = issue_number(t.id)
            if t.status_reason == CLOSED_NOTE.format(number=number):
                back[t.id] = "its issue was reopened"
            elif t.status_reason == GONE_NOTE.format(number=number):
                back[t.id] = "its issue is back on GitHub"
        return back


def short_origin(source: str) -> str:
    """`me/app#12` for an issue's URL (or `github:me/app#12`); other text as it is."""
    found = re.search(r"([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)$", source)
    if found:
        return f"{found.group(1)}#{found.group(2)}"
    return source.removeprefix("github:")


def _folder_project(path: Path) -> str:
    """The project id of a config that names none: the project folder's name, made a valid id."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(path).name).strip("-.") or "project"
    return name
