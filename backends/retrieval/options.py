"""Strict options models for retrieval backends: the embedder, fusion and the pipeline stages."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from orchestrator.plugin_api import BackendOptions

from .embedders import EMBEDDER_HELP, embedder_spec_problem


class Bm25Options(BackendOptions):
    """Options of the bm25 backend: none (FTS5 with Porter stemming needs no tuning)."""


class EmbedderOptions(BackendOptions):
    """Which embedder a backend uses; the store records it and refuses another later."""

    embedder: str = Field("auto", description=f"one of {EMBEDDER_HELP}")
    embedder_url: str | None = Field(None, description="base URL of an ollama/openai endpoint")
    embedder_api_key_env: str | None = Field(
        None, description="environment variable holding the endpoint's API key (openai: "
        "OPENAI_API_KEY)")
    query_prefix: str | None = Field(
        None, description="text put before queries; default: the model's known prefix "
        "(nomic-embed-text: 'search_query: ')")
    document_prefix: str | None = Field(
        None, description="text put before documents; default: the model's known prefix")
    embedding_cache: bool = Field(
        True, description="reuse document vectors by (model, text hash) across stores and runs")

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, name: str) -> str:
        problem = embedder_spec_problem(name)
        if problem:  # at config load: `memory list` or a paid `middle run` must not get this far
            raise ValueError(problem)
        return name


class DenseOptions(EmbedderOptions):
    """Options of the dense backend: the embedder only (cosine similarity, nothing else)."""


class RecencyOptions(BackendOptions):
    """How much the time of a doc counts. Off by default: relevance has no day-scale decay (a
    decision made months ago binds as much as yesterday's; the newest work is the "Memories
    invoked" block's recent part, not a ranked memory's bonus), and time only breaks ties.
    The recency blend stays available for experiments. Shared by hybrid, hipporag, hindsight."""

    recency_weight: float = Field(
        0.0, ge=0, le=1, description="total = (1-w)*relevance + w*exp(-age_days/scale) (seed "
        "001's blend); 0 (the default) ranks by relevance alone, newer first on a tie: with a "
        "1-day scale the blend hid every related ticket older than a day (issue: memory for "
        "the life of a project)")
    recency_scale_days: float = Field(
        1.0, gt=0, description="recency decay scale in days: a working day (agent-cli's memory uses 30 "
        "for chat memories; ticket work that bears on the next ticket is hours old, not weeks)")
    recent_candidates: bool = Field(
        False, description="the newest docs join the candidate pool (as many as each ranked "
        "list holds), so the work just done is weighed even when it shares no words with the "
        "query; off, or recency_weight = 0, leaves the pool to the ranked lists")


class PipelineOptions(RecencyOptions):
    """The pipeline stages, in the order they run. Defaults are the designs' we took them from where a stage is
    on; stages that would change what the memory contract promises are off until set."""

    candidate_multiplier: int = Field(
        3, ge=1, le=50, description="candidate pool = top_k * this ")
    rerank_model: str | None = Field(
        None, description="cross-encoder to rerank the pool ('sentence-transformers:NAME' or "
        "'fastembed:NAME'); None skips reranking (no offline package ships one)")
    relevance_threshold: float | None = Field(
        None, ge=0, le=1, description="drop candidates with relevance below this: the "
        "reranker's sigmoid when reranking (agent-cli's memory uses 0.35), the late-interaction "
        "order's score with hybrid's `rerank`, else the fused score. None: off")
    use_importance: bool = Field(
        True, description="multiply relevance by importance/3 (docs default to 3)")
    mmr_lambda: float | None = Field(
        None, ge=0, le=1, description="MMR on embedding cosine, lambda*total - (1-lambda)*"
        "redundancy (agent-cli's memory uses 0.7); None: off (it lowered recall in `middle bench`)")
    dedup_threshold: float | None = Field(
        None, gt=0, le=1, description="on index, a doc whose cosine to a stored one is at least "
        "this replaces it instead of being added (a common choice is 0.85). None: off")
    track_access: bool = Field(True, description="count retrievals and last access per doc")
    token_budget: int | None = Field(
        None, ge=1, description="most tokens (~4 chars each) returned per query; docs are never "
        "cut, and the best one is always returned (about 500 is a common choice). None: no limit")


class HybridOptions(EmbedderOptions, PipelineOptions):
    """Options of the hybrid backend: embedder, fusion of dense and BM25, and the pipeline."""

    fusion: Literal["weighted", "relative", "rrf"] = Field(
        "weighted", description="'weighted': sum of min-max-normalised scores; 'rrf': "
        "reciprocal-rank fusion (measured lower on MuSiQue and LoCoMo)")
    dense_weight: float = Field(0.5, ge=0, le=1, description="weight of the dense list")
    rrf_k: int = Field(60, ge=1, description="RRF's rank constant")
    thread_weight: float = Field(
        0.0, ge=0, le=1, description="weight of a doc's place in time, counted in docs newer than "
        "it, against its relevance (retrieval.thread): work comes in threads, so the work just "
        "before the newest may bear on a new ticket more than older work that matches as well. "
        "0 (the default): off. 0.3 gained +0.10 long-range R@5 on the datasette development split "
        "it was chosen on but +0.01 on four held-out histories (within noise) and lost a little on "
        "LoCoMo, so it is not on by default: docs/memory-benchmarks.md")
    burst_weight: float = Field(
        0.0, ge=0, le=1, description="share of a strong match's score lent to its burst-mates: "
        "the docs at most 10 docs away in time that name one of its file paths "
        "(retrieval.burst): a ticket that matches one commit of an old burst bears on the "
        "others. 0 (the default): off. 0.2 gained +0.06 long-range R@5 on the datasette "
        "development split it was fitted on and lost 0.013 on four held-out histories: "
        "docs/memory-benchmarks.md")
    rerank: Literal["maxsim", "maxsim-rrf"] | None = Field(
        None, description="reorder the candidate pool (top_k * candidate_multiplier) by late "
        "interaction (retrieval.late): each query token's best cosine to any doc token, "
        "MiniLM's own token states, averaged over the query. 'maxsim': by that score alone; "
        "'maxsim-rrf': that order and the fused order by reciprocal rank. None (the default): "
        "off. Opt-in: see docs/memory-benchmarks.md, \"Fifth try\"")
    issue_hop: bool = Field(
        False, description="follow the issues (#123) the best matches' texts name to every "
        "stored doc naming one of them, and join that list to the fused one by reciprocal rank "
        "(retrieval.issues): work comes in issue threads whose later tickets share no words "
        "with the earlier. Off (the default): -0.016 long-range R@5 on the datasette "
        "development split (16 tickets up, 9 down), so not run held-out; it lowers decision "
        "recall's hit@1. Opt-in: docs/memory-benchmarks.md, \"Sixth try\"")
    thread_expansion: bool = Field(
        False, description="expand the query by the words its words predict in issue "
        "thread-mates (retrieval.expansion): over the stored docs naming the same issue (#123), "
        "pairs weighted 1/thread size, pointwise mutual information seen in 2+ pairs, the 10 "
        "best words; their BM25 list joins the fusion at half the lexical weight (RM3's 0.5). "
        "Off (the default). Opt-in: docs/memory-benchmarks.md, \"Seventh try\"")
    thread_docs: bool = Field(
        True, description="score each issue thread (the stored docs naming one issue, #123) as "
        "one document by BM25 and add a list of the best threads' docs, each at its thread's "
        "score, to the fusion at half the lexical weight (retrieval.thread_docs; cluster-based "
        "retrieval). On (the default): +0.059 long-range R@5 on the datasette development split, "
        "+0.047 on six held-out histories (BM25 + 0.125 pooled, ahead on each), whole R@5 not "
        "below; a store whose docs name no issue ranks as without it. false: hybrid's two lists "
        "only (docs/memory-benchmarks.md, \"Eighth try\")")
    thread_scale_docs: int = Field(
        40, ge=1, le=10_000, description="how many newer docs make a doc's place count e (2.7) "
        "times less: two [memory] related_window's worth (the window the block leaves out, and "
        "as far again)")
