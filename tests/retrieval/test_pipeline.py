"""The retrieval pipeline stages: recency blend, importance, threshold, MMR, token budget, rerank."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backends.retrieval import pipeline
from backends.retrieval.options import PipelineOptions

DAY = 86400.0
NOW = 1_000 * DAY


def cand(i: int, rel: float, age_days: float = 0.0, importance: int = 3, vec=None, text=None):
    vector = None if vec is None else np.asarray(vec, dtype=np.float32) / np.linalg.norm(vec)
    return pipeline.Candidate(i, text or f"doc {i}", rel, NOW - age_days * DAY, importance, vector)


def opts(**kw) -> PipelineOptions:
    base = {"recency_weight": 0.0, "use_importance": False}
    return PipelineOptions(**{**base, **kw})


def test_recency_blend_is_seed_001s_formula():
    picked = pipeline.run("q", [cand(1, 0.8, age_days=60), cand(2, 0.7, age_days=0)], 2,
                          opts(recency_weight=0.2, recency_scale_days=30), NOW)
    expected_old = 0.8 * 0.8 + 0.2 * math.exp(-60 / 30)
    expected_new = 0.8 * 0.7 + 0.2 * 1.0
    assert [c.id for c in picked] == [2, 1]
    assert [c.score for c in picked] == pytest.approx([expected_new, expected_old])


def test_importance_scales_relevance_like_seed_002():
    picked = pipeline.run("q", [cand(1, 0.6, importance=5), cand(2, 0.9, importance=1)], 2,
                          opts(use_importance=True), NOW)
    assert [(c.id, round(c.score, 3)) for c in picked] == [(1, 1.0), (2, 0.3)]


def test_threshold_drops_weak_candidates():
    picked = pipeline.run("q", [cand(1, 0.9), cand(2, 0.3), cand(3, 0.5)], 3,
                          opts(relevance_threshold=0.35), NOW)
    assert [c.id for c in picked] == [1, 3]


def test_mmr_prefers_a_different_doc_over_a_near_copy():
    pool = [cand(1, 1.0, vec=[1, 0, 0]), cand(2, 0.95, vec=[1, 0.01, 0]),
            cand(3, 0.7, vec=[0, 1, 0])]
    assert [c.id for c in pipeline.run("q", pool, 2, opts(), NOW)] == [1, 2]
    picked = pipeline.run("q", [cand(1, 1.0, vec=[1, 0, 0]), cand(2, 0.95, vec=[1, 0.01, 0]),
                                cand(3, 0.7, vec=[0, 1, 0])], 3, opts(mmr_lambda=0.7), NOW)
    assert [c.id for c in picked] == [1, 3, 2]
    scores = [c.score for c in picked]
    assert scores == sorted(scores, reverse=True), "MMR values are reported best first"


def test_token_budget_returns_whole_docs_that_fit():
    pool = [cand(1, 0.9, text="x" * 400), cand(2, 0.8, text="y" * 2400), cand(3, 0.7, text="z" * 800)]
    picked = pipeline.run("q", pool, 3, opts(token_budget=500), NOW)  # 100 + 600 + 200 tokens
    assert [c.id for c in picked] == [1, 3]
    alone = pipeline.run("q", [cand(2, 0.8, text="y" * 2400)], 3, opts(token_budget=500), NOW)
    assert [c.id for c in alone] == [2], "the best doc comes back even when it alone is over"


def test_reranker_relevance_is_a_sigmoid_of_its_logits():
    class Reverse:
        def score(self, query, texts):
            return np.array([-2.0, 3.0])

    picked = pipeline.run("q", [cand(1, 0.9), cand(2, 0.1)], 2, opts(), NOW, Reverse())
    assert [c.id for c in picked] == [2, 1]
    assert picked[0].score == pytest.approx(1 / (1 + math.exp(-3.0)))


def test_bad_rerank_model_spec_is_a_config_error():
    from orchestrator.plugin_api import ConfigError

    with pytest.raises(ConfigError, match="sentence-transformers:NAME"):
        pipeline.load_reranker("ms-marco")
