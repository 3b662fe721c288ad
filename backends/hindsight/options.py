"""Strict options of the hindsight backend: embedder, recall strategies, lifecycle, mental models."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from backends import retrieval

DEFAULT_MENTAL_MODELS = {
    "project conventions": "What conventions, decisions and preferences does this project follow?",
    "known pitfalls": "What errors, pitfalls and their fixes have come up in this project?",
}
MODEL_NAME_CHARS = 64
MENTAL_MODEL_CAP = 16_000  # Hindsight caps a mental model at 16k characters
Strategy = Literal["semantic", "keyword", "graph", "temporal"]  # the recall strategies fused


def _default_weights() -> dict[Strategy, float]:
    return {"semantic": 1.0, "keyword": 1.0, "graph": 0.5, "temporal": 1.0}


class HindsightOptions(retrieval.EmbedderOptions, retrieval.RecencyOptions):
    """Options of the hindsight backend; every default works offline with no LLM."""

    # --- retain -------------------------------------------------------------------------
    llm_extraction: bool = Field(
        True, description="with a memory LLM configured, extract facts with it (else offline)")
    llm_extraction_min_chars: int = Field(
        200, ge=0, description="docs shorter than this use the offline extractor even with an "
        "LLM: a sentence or two gains little from a model call (saves tokens)")
    max_facts_per_doc: int = Field(
        60, ge=1, le=1000, description="a longer doc has its sentences grouped into at most "
        "this many facts (keeps a huge doc from costing thousands of embeddings)")
    fact_vectors: Literal["auto", "passage", "text"] = Field(
        "auto", description="what a fact's vector is: 'passage', the doc's own token states "
        "pooled over the fact's sentence and the doc's header (one model pass per doc; a fact "
        "not found in the doc, e.g. an LLM's, is embedded alone), or 'text', the fact's text "
        "embedded alone. A bank keeps the kind it was built with; 'auto' is the bank's, else "
        "'passage'")
    semantic_link_threshold: float = Field(
        0.75, gt=0, le=1, description="cosine at or above which two facts get a semantic link")
    semantic_links_per_fact: int = Field(5, ge=0, le=50)
    temporal_links_per_fact: int = Field(
        4, ge=0, le=50, description="links to the facts nearest in time (then in retain order)")
    temporal_link_window_days: float = Field(7.0, gt=0)
    consolidate_threshold: float = Field(
        0.92, gt=0, le=1, description="cosine at or above which a fact from another doc "
        "supports (or starts) an observation instead of standing alone")
    # --- recall -------------------------------------------------------------------------
    fusion: Literal["weighted", "rrf"] = Field(
        "weighted", description="'weighted': min-max-normalised weighted sum (measured best by "
        "the retrieval layer, and here: LoCoMo conv 1-5 recall@10 0.744 against 0.715 for 'rrf'); "
        "'rrf': "
        "reciprocal-rank fusion with k = rrf_k, as Hindsight does")
    rrf_k: int = Field(60, ge=1)
    strategy_weights: dict[Strategy, float] = Field(
        default_factory=_default_weights,
        description="weight of each recall strategy in the fusion (0 turns one off)")
    candidate_pool: int = Field(100, ge=10, le=2000, description="candidates per strategy")
    graph_seeds: int = Field(8, ge=1, le=100, description="best hits the graph spreads from")
    evidence_weight: float = Field(
        0.1, ge=0, le=1, description="boost for facts confirmed by several sources: "
        "score * (1 + w * ln(sources))")
    context_weight: float = Field(
        0.5, ge=0, le=1, description="BM25 weight of the fact said just before each fact (same "
        "exchange, within an hour) relative to the fact's own text; 0: own text only")
    rerank_model: str | None = Field(
        None, description="cross-encoder ('sentence-transformers:NAME' or 'fastembed:NAME') to "
        "re-rank the fused pool; None: no re-ranking")
    max_query_chars: int = Field(
        2000, ge=50, description="a longer query is cut to this many characters (its head is "
        "kept and a warning logged); the middle agent's per-turn queries are ~1000")
    retrieve_returns: Literal["documents", "facts"] = Field(
        "documents", description="what `retrieve` (the middle agent's recall) returns: the "
        "exact retained docs ranked by their best facts (the memory contract), or fact texts "
        "with their dates")
    # --- lifecycle : off by default, as the workflow indexes only at completion -----
    retain_every_turns: int = Field(
        0, ge=0, description="retain a ticket conversation every N Claude Code turns; 0: off")
    retain_overlap_turns: int = Field(
        1, ge=0, description="turns of the previous window repeated in the next (context)")
    tag_conversations: bool = Field(
        True, description="tag retained turns with 'conversation:run-<id>', so recall can be "
        "scoped to one ticket run (`middle memory recall --tag ...`)")
    # --- mental models ---------------------------------------------------------
    mental_models: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_MENTAL_MODELS),
        description="name -> question; each is refreshed from recall (+ reflect with an LLM)")
    mental_model_chars: int = Field(
        MENTAL_MODEL_CAP, ge=200, le=MENTAL_MODEL_CAP, description="cap per stored model")
    refresh_every_retains: int = Field(
        1, ge=0, description="refresh the mental models after this many retain calls, when "
        "they are next read (the middle agent's context, `middle memory models`); 0: never")
    agent_context_chars: int = Field(
        1200, ge=0, le=8000, description="most characters of mental models shown to the middle "
        "agent on each request (all models together); 0: none")

    @field_validator("mental_models")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name, question in value.items():
            if not name.strip() or len(name) > MODEL_NAME_CHARS or not question.strip():
                raise ValueError(f"mental model {name!r}: give a name of 1-{MODEL_NAME_CHARS} "
                                 "characters and a non-empty question")
        return value
