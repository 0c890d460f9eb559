"""Graph context over the *visible* subgraph: centrality and per-result context paths.

Pure functions. The caller removes hidden nodes first; an edge survives only when both its
ends are visible, so a hidden node contributes no context node, no edge, no path through it,
and nothing to any count or centrality.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from connectors.contract.records import GraphEdge, walks_back

Adjacency = Mapping[str, Sequence[tuple[str, str, str]]]  # node -> (neighbour, relation, dir)


@dataclass(frozen=True, kw_only=True)
class ContextHop:
    """A context node of a result: reached over `relation` in `direction` from `via`."""

    element_id: str
    relation: str
    direction: str
    depth: int
    via: str


def within_reach(
    edges: Sequence[GraphEdge],
    seeds: Iterable[str],
    depth: int,
    backward_hops: int | None = None,
) -> list[GraphEdge]:
    """The edges reachable from `seeds` within `depth` hops over `edges` alone.

    The stores expanded from every phase-1 candidate; if a store's metadata was stale and a
    hidden element got in, whatever was reached only through it must not count. Edges are
    walked backwards only in the first `backward_hops` hops (None: every hop).
    """
    every = {e.source_id for e in edges} | {e.target_id for e in edges}
    return reachable_subgraph(edges, every, seeds, depth, backward_hops)[0]


def reachable_subgraph(
    edges: Iterable[GraphEdge],
    visible: set[str],
    seeds: Iterable[str],
    depth: int,
    backward_hops: int | None = None,
) -> tuple[list[GraphEdge], dict[str, list[tuple[str, str, str]]]]:
    """The edges between visible nodes within reach of `seeds`, sorted, with their adjacency.

    An edge counts only when both its ends are visible. One pass for what a search needs of
    the expanded graph: the adjacency is built once and cut down to the edges reached,
    instead of built, walked and rebuilt.
    """
    kept = {e.key: e for e in edges if e.source_id in visible and e.target_id in visible}
    adj = adjacency(kept.values())
    frontier = list(dict.fromkeys(seeds))
    seen = set(frontier)
    reached: set[tuple[str, str, str]] = set()
    for level in range(depth):
        following: list[str] = []
        back = walks_back(level, backward_hops)
        for node in frontier:
            for neighbour, relation, direction in adj.get(node, ()):
                if direction == "in" and not back:
                    continue
                if direction == "out":
                    reached.add((node, relation, neighbour))
                else:
                    reached.add((neighbour, relation, node))
                if neighbour not in seen:
                    seen.add(neighbour)
                    following.append(neighbour)
        frontier = following
    if len(reached) < len(kept):
        adj = {
            node: kept_links
            for node, links in adj.items()
            if (kept_links := [link for link in links if _key(node, link) in reached])
        }
    return [kept[key] for key in sorted(reached)], adj


def _key(node: str, link: tuple[str, str, str]) -> tuple[str, str, str]:
    """The edge key of an adjacency entry of `node`."""
    neighbour, relation, direction = link
    return (node, relation, neighbour) if direction == "out" else (neighbour, relation, node)


def adjacency(edges: Iterable[GraphEdge]) -> dict[str, list[tuple[str, str, str]]]:
    """Both-direction adjacency lists, sorted for deterministic traversal."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for edge in edges:
        out.setdefault(edge.source_id, []).append((edge.target_id, edge.relation, "out"))
        if edge.target_id != edge.source_id:
            out.setdefault(edge.target_id, []).append((edge.source_id, edge.relation, "in"))
    for neighbours in out.values():
        neighbours.sort(key=lambda n: (n[1], n[2], n[0]))
    return out


def degree_centrality(adj: Adjacency, candidates: Iterable[str]) -> dict[str, float]:
    """Each candidate's number of incident visible edges in the expanded subgraph."""
    return {c: float(len(adj.get(c, ()))) for c in candidates}


# How sharply the PageRank seeds follow the Phase-1 scores: weight exp((score - best) / T).
# Cosine similarities of one query's candidates differ by tenths; seeding in proportion to
# them spreads the restart mass almost evenly, and the walk then measures plain
# connectedness (degree) rather than nearness to the best matches. With T = 0.02 a
# candidate 0.1 below the best seeds e^-5 as much (benchmarks/README.md, multi-hop).
PAGERANK_SEED_TEMPERATURE = 0.02
PAGERANK_DAMPING = 0.85

SeedLeg = tuple[Mapping[str, float], float]  # a leg's seed scores (higher is better), share


def restart_weights(legs: Iterable[SeedLeg]) -> dict[str, float]:
    """Where the walk restarts: each leg's best matches, sharpened, in proportion to its share.

    Every leg is sharpened against its own best score (`PAGERANK_SEED_TEMPERATURE`), so each
    leg's best match restarts with the leg's whole share whatever the leg's scale, and a
    node both legs found restarts with both shares (ADR 43).
    """
    weights: dict[str, float] = {}
    for scores, share in legs:
        finite = {n: s for n, s in scores.items() if math.isfinite(s)}
        if share <= 0 or not finite:
            continue
        best = max(finite.values())
        for node, score in finite.items():
            weight = share * math.exp((score - best) / PAGERANK_SEED_TEMPERATURE)
            weights[node] = weights.get(node, 0.0) + weight
    return weights


def pagerank_centrality(
    edges: Sequence[GraphEdge], restart: Mapping[str, float], candidates: Iterable[str]
) -> dict[str, float]:
    """Personalized PageRank over the visible subgraph, restarting at `restart`'s nodes.

    The walk runs on the degree-normalised graph (`normalised_walk`). Every candidate is a
    node, edges or not, so a seed without edges keeps the mass it restarts with instead of
    dropping out. `restart` comes from `restart_weights`; nodes without a weight never
    restart.
    """
    wanted = list(candidates)
    if not edges:
        return dict.fromkeys(wanted, 0.0)
    graph = normalised_walk(edges, wanted)
    personalization = {n: restart.get(n, 0.0) for n in graph.nodes}
    if not any(personalization.values()):
        return dict.fromkeys(wanted, 0.0)
    ranks: dict[str, float] = nx.pagerank(  # pyright: ignore[reportUnknownMemberType]
        graph, alpha=PAGERANK_DAMPING, personalization=personalization, weight="weight"
    )
    return {c: ranks.get(c, 0.0) for c in wanted}


def normalised_walk(edges: Iterable[GraphEdge], nodes: Iterable[str]) -> nx.Graph[str]:
    """The undirected graph of `edges` (and `nodes`), each edge weighted 1/sqrt(d(u)·d(v)).

    The symmetric normalisation of spectral graph theory (D^-1/2 A D^-1/2). On a plain
    graph a walk leaves a node for each neighbour alike, so a hub (an entity every other
    passage mentions, a page everything links to) takes as much of the walk as the rare
    entity two passages share, and hands it to everything around it. Weighted, the walk
    prefers the selective neighbour, which is the one that says something about the
    question: ADR 44 measured it. Degrees are counted over the visible subgraph the walk
    runs on, so a hidden node changes no weight.
    """
    graph: nx.Graph[str] = nx.Graph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from((e.source_id, e.target_id) for e in edges)
    degree: dict[str, int] = dict(graph.degree)
    for u, v, data in graph.edges(data=True):
        data["weight"] = 1.0 / math.sqrt(degree[u] * degree[v])
    return graph


def context_hops(
    origin: str, adj: Adjacency, depth: int, limit: int, backward_hops: int | None = None
) -> list[ContextHop]:
    """Nodes within `depth` hops of `origin`, breadth first, at most `limit` of them.

    Edges are walked backwards only in the first `backward_hops` hops (None: every hop).
    """
    hops: list[ContextHop] = []
    seen = {origin}
    frontier = [origin]
    for level in range(1, depth + 1):
        following: list[str] = []
        back = walks_back(level - 1, backward_hops)
        for node in frontier:
            for neighbour, relation, direction in adj.get(node, ()):
                if neighbour in seen or (direction == "in" and not back):
                    continue
                if len(hops) >= limit:
                    return hops
                seen.add(neighbour)
                following.append(neighbour)
                hops.append(
                    ContextHop(
                        element_id=neighbour,
                        relation=relation,
                        direction=direction,
                        depth=level,
                        via=node,
                    )
                )
        frontier = following
    return hops


def hops_still_visible(hops: Sequence[ContextHop], shown: Container[str]) -> list[ContextHop]:
    """The hops whose node is shown, without those reached through a node that is not.

    Hops come breadth first, so a node's `via` is decided before the node.
    """
    kept: list[ContextHop] = []
    gone: set[str] = set()
    for hop in hops:
        if hop.element_id not in shown or hop.via in gone:
            gone.add(hop.element_id)
        else:
            kept.append(hop)
    return kept
