"""Strict options of the hipporag backend; defaults are the HippoRAG 2 paper's where it has one."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from backends import retrieval

OPENIE_HELP = ('"auto" (the memory LLM when one is configured, else offline), "offline", "llm", '
               'or "precomputed:PATH" (a JSON file shaped like musique100/openie_triples.json)')


class HippoRAGOptions(retrieval.EmbedderOptions, retrieval.RecencyOptions):
    """Embedder (shared with dense/hybrid), OpenIE source, graph and retrieval numbers."""

    openie: str = Field("auto", description=OPENIE_HELP)
    synonymy_threshold: float = Field(
        0.8, ge=-1, le=1, description="cosine at or above which two entity phrases get a "
        "synonymy edge")
    synonymy_max_neighbours: int = Field(
        100, ge=0, le=10_000, description="most synonymy neighbours kept per entity (its "
        "nearest); 0 turns synonymy edges off")
    synonymy_min_chars: int = Field(
        3, ge=0, description="entities with fewer letters/digits get no synonymy edges "
        "(short tokens are near everything)")
    fact_top_k: int = Field(5, ge=1, le=1000, description="facts kept by dense similarity")
    fact_vectors: Literal["auto", "passage", "text", "entities"] = Field(
        "auto", description="what fact and entity vectors are: 'passage', the passage's own "
        "token states pooled over the words that state the fact or name the entity (one model "
        "pass per passage, its vector included; a part the extractor gives no place for is "
        "embedded alone); 'text', each fact's text and entity's name embedded alone (HippoRAG "
        "2; a fact with a bare predicate such as 'and' takes its names' vectors); 'entities', "
        "a fact is the normalised sum of its subject's and object's name vectors. A store "
        "keeps the kind it was built with; 'auto' is the store's, else 'passage'")
    fact_weight: Literal["cosine", "minmax"] = Field(
        "cosine", description="seed weight of a fact's entities: its cosine to the query "
        "(absolute: a weak best match stays weak beside an entity the query names, which "
        "seeds with 1), or 'minmax' over the kept facts (HippoRAG 2)")
    recognition_filter: bool = Field(
        True, description="let the memory LLM drop irrelevant facts (recognition memory); "
        "off when no LLM is configured")
    passage_node_weight: float = Field(
        0.05, ge=0, description="seed weight of every passage: its min-max normalised dense "
        "score times this")
    damping: float = Field(0.5, gt=0, lt=1, description="PageRank damping (walk continues)")
    ppr_max_iterations: int = Field(100, ge=1, le=10_000,
                                    description="power-iteration cap")
    ppr_tolerance: float = Field(1e-6, gt=0, description="stop when the L1 change is below this")
    openie_cache: bool = Field(
        True, description="keep LLM OpenIE results by (model, prompt, passage hash) beside the "
        "embedding cache, so re-indexing never pays for an extraction twice")
    llm_max_passage_chars: int = Field(
        8000, ge=200, description="a passage is cut to this many characters in OpenIE prompts")

    @field_validator("openie")
    @classmethod
    def _known_openie(cls, value: str) -> str:
        if value in ("auto", "offline", "llm"):
            return value
        if value.startswith("precomputed:") and value[len("precomputed:"):].strip():
            return value
        raise ValueError(f"openie must be {OPENIE_HELP}, not {value!r}")
