"""A small GitHub REST client: token and repository checks, paging, rate-limit waits, ETag cache.

Every failure is one TicketError (or ConfigError) saying what to do; nothing here writes the
ticket store. The ETag cache is a JSON file of earlier answers, read as untrusted data: an entry
of the wrong shape is ignored, and what it holds is checked like a fresh answer.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tickets.cache_file import read_json, write_json
from tickets.errors import ConfigError, TicketError

__all__ = ["DEFAULT_API_URL", "GitHubClient", "github_settings", "parse_repo"]

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_TOKEN_ENV = "GITHUB_TOKEN"
MAX_WAIT_S = 60.0  # the longest rate-limit wait before giving up with an error
ATTEMPTS = 3  # tries of a GET that met a 5xx or a dropped connection (GitHub's are short blips)
RETRY_WAIT_S = 1.0  # the first wait between those tries; it doubles
IDEMPOTENT = ("GET", "HEAD")  # only these are sent again: a POST that timed out may have landed
_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_CACHE_VERSION = 1
CACHE_ENTRIES = 500  # answers kept in the ETag cache (pages of issue lists, single issues)


def parse_repo(name: Any) -> str:
    """`OWNER/REPO` checked as GitHub names are, or a ConfigError with an example."""
    text = name.strip() if isinstance(name, str) else ""
    if text.endswith(".git"):
        text = text[:-4]
    if not _REPO.match(text) or text.split("/")[1] in (".", ".."):
        raise ConfigError(f"bad GitHub repository {name!r}: write OWNER/REPO, e.g. `middle sync --from github:me/app`")
    return text


def github_settings(section: Mapping[str, Any] | None) -> tuple[str, str, float]:
    """(api_url, token_env, max_wait_s) of a `[github]` table (defaults for what it leaves out)."""
    section = dict(section or {})
    api_url = section.get("api_url") or DEFAULT_API_URL
    token_env = section.get("token_env") or DEFAULT_TOKEN_ENV
    max_wait = section.get("max_wait_s", MAX_WAIT_S)
    if not isinstance(api_url, str) or urlsplit(api_url).scheme not in ("http", "https"):
        raise ConfigError(f"bad [github] api_url {api_url!r}: give the API's http(s) URL, e.g. {DEFAULT_API_URL}")
    if not isinstance(token_env, str):
        raise ConfigError("bad [github] token_env: the name of an environment variable, e.g. GITHUB_TOKEN")
    return api_url.rstrip("/"), token_env, float(max_wait)


def _say(message: str) -> None:
    print(f"note: {message}", file=sys.stderr, flush=True)


class _Transient(Exception):
    """A 5xx answer (resp) or a dropped connection (resp None): worth another try for a GET."""

    def __init__(self, resp: Any, why: str) -> None:
        super().__init__(why)
        self.resp, self.why = resp, why


class GitHubClient:
    """Requests to one repository's REST API with the token of `token_env`."""

    def __init__(self, repo: str, *, api_url: str = DEFAULT_API_URL, token_env: str = DEFAULT_TOKEN_ENV,
                 max_wait_s: float = MAX_WAIT_S, cache: Path | None = None,
                 notify: Callable[[str], None] = _say, timeout_s: float = 30.0,
                 retry_wait_s: float | None = None) -> None:
        self.repo = parse_repo(repo)
        self.api_url = api_url.rstrip("/")
        self.token_env = token_env
        self.max_wait_s = max_wait_s
        self.notify = notify
        self.timeout_s = timeout_s
        self.retry_wait_s = RETRY_WAIT_S if retry_wait_s is None else retry_wait_s
        self.cache_path = cache
        self._cache_old = self._read_cache() if cache is not None else {}
        self._cache_new: dict[str, Any] = {}
        self._http: Any = None

    # -- plumbing ---------------------------------------------------------------------------

    def _token(self) -> str:
        token = os.environ.get(self.token_env, "").strip()
        if not token:
            raise ConfigError(f"no GitHub token: set {self.token_env} to a token that can read {self.repo}"
                              " (or name another variable in [github] token_env)")
        return token

    def _client(self) -> Any:
        if self._http is None:
            import httpx  # here: only a GitHub source or `middle pr` needs it

            self._http = httpx.Client(timeout=self.timeout_s, follow_redirects=False, headers={
                "Authorization": f"Bearer {self._token()}", "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "middle-agent"})
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, path: str) -> str:
        return f"{self.api_url}/repos/{self.repo}{path}"

    def request(self, method: str, url: str, *, params: Mapping[str, Any] | None = None,
                json: Any = None, headers: Mapping[str, str] | None = None) -> Any:
        """One request, waiting out a used-up rate limit (bounded, said on stderr). A GET that
        meets a 5xx or a dropped connection is tried again (ATTEMPTS in all, said on stderr); a
        POST or PATCH is sent once, since one that timed out may have landed (the pull-request
        flow finds what a lost answer created). The last 5xx answer is returned for check()."""
        import httpx
        from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        def once() -> Any:
            try:
                resp = self._send(method, url, params, json, headers)
            except httpx.TransportError as exc:
                raise _Transient(None, f"{type(exc).__name__}: {exc}") from None
            if resp.status_code >= 500:
                raise _Transient(resp, f"{resp.status_code} {_message(resp)}")
            return resp

        def say_retry(state: Any) -> None:
            exc = state.outcome.exception()
            self.notify(f"GitHub did not answer {method} {urlsplit(url).path} ({exc.why}): trying again in "
                        f"{state.next_action.sleep:.0f}s")

        retrying = Retrying(stop=stop_after_attempt(ATTEMPTS if method in IDEMPOTENT else 1),
                            wait=wait_exponential(multiplier=self.retry_wait_s, min=self.retry_wait_s),
                            retry=retry_if_exception_type(_Transient), before_sleep=say_retry)
        try:
            return retrying(once)
        except RetryError as err:
            last = err.last_attempt.exception()
            assert isinstance(last, _Transient)
            if last.resp is not None:
                return last.resp  # check() says "GitHub answered 502 (...): try again later"
            raise TicketError(f"cannot reach GitHub at {self.api_url} ({last.why}): check the network and "
                              "[github] api_url") from None

    def _send(self, method: str, url: str, params: Mapping[str, Any] | None, json: Any,
              headers: Mapping[str, str] | None) -> Any:
        """One answer that is not a used-up rate limit (waited out, bounded)."""
        client = self._client()
        for _ in range(3):
            resp = client.request(method, url, params=params, json=json, headers=headers)
            wait = self._rate_limit_wait(resp)
            if wait is None:
                return resp
            if wait > self.max_wait_s:
                raise TicketError(f"GitHub's rate limit for this token is used up for {wait:.0f}s more: try again "
                                  f"then (or raise [github] max_wait_s, now {self.max_wait_s:.0f}s)")
            self.notify(f"GitHub's rate limit is used up: waiting {wait:.0f}s for it to reset")
            time.sleep(wait)
        raise TicketError("GitHub kept refusing for its rate limit after waiting: try again later")

    @staticmethod
    def _rate_limit_wait(resp: Any) -> float | None:
        """Seconds to wait before retrying `resp`'s request, or None if it was not rate-limited."""
        if resp.status_code not in (403, 429):
            return None
        retry_after = resp.headers.get("Retry-After")
        if retry_after and retry_after.isdigit():
            return float(retry_after)
        if resp.headers.get("X-RateLimit-Remaining") == "0":
            reset = resp.headers.get("X-RateLimit-Reset", "")
            return max(0.0, float(reset) - time.time()) + 0.5 if reset.isdigit() else 60.0
        return None

    def check(self, resp: Any, what: str) -> Any:
        """The answer's JSON if it succeeded, else the TicketError saying what to do."""
        status = resp.status_code
        if 200 <= status < 300:
            try:
                return resp.json() if resp.content else None
            except ValueError:
                raise TicketError(f"GitHub at {self.api_url} answered {what} with something that is not JSON: "
                                  "check [github] api_url") from None
        message = _message(resp)
        if status == 401:
            raise TicketError(f"GitHub refused the token in {self.token_env} (401 {message}): set it to a valid "
                              "token")
        if status == 403:
            raise TicketError(f"GitHub refused {what} (403 {message}): give the token in {self.token_env} "
                              f"access to {self.repo}")
        if status == 404 and self._inside_repository(resp):  # e.g. /pulls/2/reviews: the repository answered
            raise TicketError(f"GitHub found nothing for {what} in {self.repo} (404): the pull request, issue "
                              f"or commit it names may be gone, or the token in {self.token_env} cannot see it")
        if status == 404:
            raise TicketError(f"GitHub has no repository {self.repo} at {self.api_url}, or the token in "
                              f"{self.token_env} cannot see it (404 on {what}): check the name and the token")
        if status >= 500:
            raise TicketError(f"GitHub answered {status} ({message}) to {what}: try again later")
        raise TicketError(f"GitHub answered {status} ({message}) to {what}")

    def _inside_repository(self, resp: Any) -> bool:
        """Whether `resp` answered a resource inside the repository (a pull request's reviews, a
        commit's status) rather than the repository or one of its lists (/issues, /pulls): a
        404 there says that resource is gone, not the repository."""
        try:
            path = urlsplit(str(resp.request.url)).path
        except RuntimeError:  # a response built without its request
            return False
        base = urlsplit(self.url("")).path
        return path.startswith(base + "/") and len([p for p in path[len(base):].split("/") if p]) > 1

    # -- reading ----------------------------------------------------------------------------

    def get(self, path: str, what: str, *, missing_ok: bool = False) -> Any:
        """GET one resource of the repository, through the ETag cache; with `missing_ok`, None if
        GitHub has no such resource (404, 410) rather than an error."""
        return self._get_cached(self.url(path), None, what, dict, missing_ok)[0]

    def get_all(self, path: str, params: Mapping[str, Any], what: str, max_pages: int = 1000) -> list[Any]:
        """Every page of a list (following `Link: rel="next"`), through the ETag cache."""
        items: list[Any] = []
        url: str | None = self.url(path)
        query: Mapping[str, Any] | None = params
        for _ in range(max_pages):
            if url is None:
                return items
            page, url = self._get_cached(url, query, what, list)
            query = None  # the next link carries the query
            if not isinstance(page, list):
                raise TicketError(f"GitHub answered {what} with a {type(page).__name__}, not a list: check "
                                  "[github] api_url")
            items.extend(page)
        raise TicketError(
            f"GitHub's answer to {what} has over {max_pages} pages: narrow it with --label or --milestone"
        )

    def _get_cached(
        self, url: str, params: Mapping[str, Any] | None, what: str, expect: type, missing_ok: bool = False
    ) -> tuple[Any, str | None]:
        import httpx

        key = str(httpx.URL(url, params=params)) if params else url
        old = self._cache_old.get(key)
        if old is not None and not isinstance(old["body"], expect):
            old = None  # not what GitHub gives for this: fetch it whole again
        headers = {"If-None-Match": old["etag"]} if old else None
        resp = self.request("GET", key, headers=headers)
        if resp.status_code == 304 and old:
            body, next_url = old["body"], old["next"]
        elif missing_ok and resp.status_code in (404, 410):
            return None, None
        else:
            body = self.check(resp, what)
            next_url = resp.links.get("next", {}).get("url")
            if resp.headers.get("ETag"):
                self._cache_new[key] = {"etag": resp.headers["ETag"], "body": body, "next": next_url}
        if old and resp.status_code == 304:
            self._cache_new[key] = old
        if next_url is not None and not self._same_api(next_url):
            raise TicketError(f"GitHub's next-page link {next_url!r} leaves {self.api_url}: check [github] api_url")
        return body, next_url

    def _same_api(self, url: str) -> bool:
        a, b = urlsplit(url), urlsplit(self.api_url)
        return (a.scheme, a.netloc) == (b.scheme, b.netloc)

    # -- the ETag cache (untrusted) -----------------------------------------------------------

    def _read_cache(self) -> dict[str, Any]:
        data = read_json(self.cache_path) if self.cache_path else None
        if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION or data.get("api") != self.api_url:
            return {}
        entries = data.get("entries")
        if not isinstance(entries, dict):
            return {}
        return {
            k: v
            for k, v in entries.items()
            if isinstance(k, str)
            and isinstance(v, dict)
            and isinstance(v.get("etag"), str)
            and "body" in v
            and isinstance(v.get("next"), (str, type(None)))
        }

    def save_cache(self) -> None:
        """Keep the answers this client used, and the newest of the older ones, for the next load."""
        if self.cache_path is None or not self._cache_new:
            return
        older = [(k, v) for k, v in self._cache_old.items() if k not in self._cache_new]
        keep = max(0, CACHE_ENTRIES - len(self._cache_new))
        entries = dict(older[len(older) - keep :] if keep else [])
        entries.update(self._cache_new)  # last: the most recently used are kept longest
        if entries != self._cache_old:
            write_json(self.cache_path, {"version": _CACHE_VERSION, "api": self.api_url, "entries": entries})


def _message(resp: Any) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.reason_phrase or "no message"
    text = data.get("message") if isinstance(data, dict) else None
    return str(text)[:200] if text else (resp.reason_phrase or "no message")
