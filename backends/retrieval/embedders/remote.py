"""Embedders behind an HTTP endpoint: Ollama's /api/embed and OpenAI-compatible /v1/embeddings."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from orchestrator.plugin_api import ConfigError, MemoryStoreError

from .base import Embedder, prefix_tag

DEFAULT_URLS = {"ollama": "http://localhost:11434", "openai": "https://api.openai.com/v1"}
BATCH = 64  # texts per request: endpoints cap request sizes


class HttpEmbedder(Embedder):
    """One model on an embeddings endpoint. The API key is read from an environment variable
    named in the options, never stored in config or in the index metadata."""

    def __init__(
        self,
        kind: str,
        model: str,
        url: str | None = None,
        api_key_env: str | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        timeout_s: float = 60.0,
        transport: Any = None,
    ):
        if kind not in DEFAULT_URLS:
            raise ConfigError(f"unknown embedding endpoint kind {kind!r}: use 'ollama' or 'openai'")
        if not model:
            raise ConfigError(f"embedder = \"{kind}:\" names no model: write e.g. \"{kind}:MODEL\"")
        super().__init__(query_prefix, document_prefix)
        self.kind, self.model = kind, model
        self.url = (url or DEFAULT_URLS[kind]).rstrip("/")
        self.api_key_env = api_key_env or ("OPENAI_API_KEY" if kind == "openai" else None)
        self.model_id = f"{kind}:{model}{prefix_tag(query_prefix, document_prefix)}"
        self.timeout_s = timeout_s
        self._transport = transport  # tests pass an httpx.MockTransport

    def name_for_spec(self) -> str:
        return f"{self.kind}:{self.model}"

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "embedder_url": self.url, "embedder_api_key_env": self.api_key_env}

    def _embed(self, texts: list[str]) -> np.ndarray:
        import httpx  # a dependency of the anthropic SDK, so always installed

        headers = {}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        path = "/api/embed" if self.kind == "ollama" else "/embeddings"
        rows: list[list[float]] = []
        with httpx.Client(timeout=self.timeout_s, transport=self._transport) as client:
            for start in range(0, len(texts), BATCH):
                chunk = texts[start:start + BATCH]
                try:
                    reply = client.post(self.url + path, headers=headers,
                                        json={"model": self.model, "input": chunk})
                    reply.raise_for_status()
                    rows.extend(self._parse(reply.json(), len(chunk)))
                except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                    raise MemoryStoreError(self._failure(exc)) from exc
        return np.asarray(rows, dtype=np.float32)

    def _parse(self, body: Any, n: int) -> list[list[float]]:
        if self.kind == "ollama":
            vectors = body["embeddings"]
        else:  # OpenAI returns items with an index; keep the request's order
            vectors = [item["embedding"] for item in sorted(body["data"], key=lambda d: d["index"])]
        if len(vectors) != n:
            raise ValueError(f"got {len(vectors)} vectors for {n} texts")
        return vectors

    def _failure(self, exc: Exception) -> str:
        where = f"{self.url} ({self.kind}, model {self.model!r})"
        if self.kind == "ollama":
            fix = f"start Ollama (`ollama serve`) and run `ollama pull {self.model}`"
        else:
            fix = (f"check the URL, the model name and the API key in ${self.api_key_env}"
                   if self.api_key_env else "check the URL and the model name")
        return (f"embedding endpoint {where} failed: {type(exc).__name__}: {exc}. {fix}, or set "
                "[memory.options] embedder to a local model")
