"""The memory graph as NetworkX, GraphML or JSON, so a user can look at what the memory holds."""

from __future__ import annotations

import json
from typing import Any

import networkx as nx

PASSAGE_LABEL_CHARS = 200


def to_networkx(backend: Any, passages: bool = True) -> nx.Graph:
    """Entities (with how many passages hold each), fact edges (weight = co-occurrences, the
    predicates as a list), synonymy edges (cosine), and optionally passages with their edges."""
    graph = nx.Graph()
    with backend.read() as conn:
        names = dict(conn.execute("SELECT id, name FROM entities"))
        counts = dict(conn.execute("SELECT entity, COUNT(*) FROM passage_entities GROUP BY entity"))
        for eid, name in sorted(names.items(), key=lambda item: item[1]):
            graph.add_node(f"entity:{name}", kind="entity", label=name, passages=counts.get(eid, 0))
        predicates: dict[tuple[int, int], set[str]] = {}
        for s, p, o in conn.execute("SELECT subject, predicate, object FROM facts"):
            predicates.setdefault(tuple(sorted((s, o))), set()).add(p)
        for a, b, weight in conn.execute("SELECT a, b, weight FROM fact_edges"):
            graph.add_edge(f"entity:{names[a]}", f"entity:{names[b]}", kind="fact", weight=float(weight),
                           predicates=json.dumps(sorted(predicates.get((a, b), ())), ensure_ascii=False))
        for a, b, score in conn.execute("SELECT entity, neighbour, score FROM synonyms"):
            u, v = f"entity:{names[a]}", f"entity:{names[b]}"
            if not graph.has_edge(u, v):
                graph.add_edge(u, v, kind="synonym", weight=float(score))
        if passages:
            for pid, text in conn.execute("SELECT id, text FROM passages ORDER BY id"):
                graph.add_node(f"passage:{pid}", kind="passage",
                               label=text[:PASSAGE_LABEL_CHARS].replace("\x00", ""))
            for pid, eid in conn.execute("SELECT passage, entity FROM passage_entities"):
                graph.add_edge(f"passage:{pid}", f"entity:{names[eid]}", kind="passage", weight=1.0)
    return graph


def _xml_safe(text: str) -> str:
    # GraphML is XML 1.0: control characters other than tab/newline cannot be written.
    return "".join(c if c in "\t\n\r" or ord(c) >= 32 else " " for c in text)


def render(graph: nx.Graph, fmt: str) -> str:
    """GraphML (for Gephi, yEd, Cytoscape) or node-link JSON (for scripts and the dashboard)."""
    if fmt == "json":
        return json.dumps(nx.node_link_data(graph, edges="edges"), ensure_ascii=False, indent=1)
    clean = nx.relabel_nodes(graph, {n: _xml_safe(n) for n in graph.nodes}, copy=True)
    for _, data in clean.nodes(data=True):
        data["label"] = _xml_safe(data.get("label", ""))
    for _, _, data in clean.edges(data=True):
        if "predicates" in data:
            data["predicates"] = _xml_safe(data["predicates"])
    return "\n".join(nx.generate_graphml(clean))
