"""The ticket source contract suite, run over the GitHub issues source on the fake GitHub API."""

from __future__ import annotations

import pytest

from orchestrator.plugin_api import SourceContext, TicketSourceContract, TicketSpec
from orchestrator.testing.fake_github import FakeGitHub
from tickets.github.source import GitHubIssuesSource


class IssueBacklog:
    """A repository on the fake GitHub whose issues the tests write; each spec id gets an issue number."""

    def __init__(self, fake: FakeGitHub, repo: str = "me/app"):
        self.fake, self.repo = fake, repo
        self.numbers: dict[str, int] = {}
        fake.add_repo(repo)

    def _number(self, spec_id: str) -> int:
        return self.numbers.setdefault(spec_id, len(self.numbers) + 1)

    def ticket_id(self, spec_id: str) -> str:
        return f"gh-{self._number(spec_id)}"

    def add(self, spec: TicketSpec) -> None:
        deps = "".join(f"\nDepends on #{self._number(d)}" for d in spec.depends_on)
        number = self._number(spec.id)
        if number in self.fake.repos[self.repo].issues:
            self.fake.update_issue(self.repo, number, title=spec.title, body=spec.description + deps)
        else:
            self.fake.add_issue(self.repo, spec.title, spec.description + deps, number=number)

    def add_broken(self, name: str) -> None:
        number = self._number(name)  # an issue that says it waits for itself
        self.fake.add_issue(self.repo, name, f"Blocked by #{number}", number=number)

    def source(self, context: SourceContext) -> GitHubIssuesSource:
        ctx = SourceContext(**{**context.__dict__, "sections": {"github": {"api_url": self.fake.url}}})
        return GitHubIssuesSource.open({"repo": self.repo, "project": "proj"}, ctx)


class TestGitHubIssuesSource(TicketSourceContract):
    source_class = GitHubIssuesSource

    @pytest.fixture
    def backlog(self, github) -> IssueBacklog:
        return IssueBacklog(github)
