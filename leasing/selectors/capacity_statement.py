"""The capacity search's statement: the SQL of one search, built from its filters.

One statement (`_CAPACITY_SQL`): offers are filtered and priced for the asked term, free GPUs
are counted for the whole window from the free-capacity timeline (the rule of
leasing.selectors.free) — summed by pool key for a broad search, node by node for a narrow one —
and reliability is measured from the pools' outages of the last 90 days, all in the database, so
a page of results costs one round trip whatever the size of the marketplace.
leasing.selectors.capacity runs it and turns its rows into results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from leasing.choices import OfferStatus, PriceUnit, PricingMode
from leasing.selectors.free import (
    BLOCKED_PER_NODE_SQL,
    FREE_PER_NODE_SQL,
    POOL_SQL,
    SEARCH_FREE_PER_NODE_SQL,
    SPANS_FREE_CTE_SQL,
    SPANS_FREE_PER_NODE_PROBE_SQL,
    free_params,
    may_preempt_for,
    span_column,
)
from leasing.selectors.windows import Window

RELIABILITY_DAYS = 90

ORDERINGS = ("price", "price_per_tflops", "bandwidth_per_dollar", "reliability", "free_gpus")
INTERCONNECTS = ("nvlink", "infiniband")
# Each interconnect a search can ask for: a node's condition, and its span's (leasing 0024).
_INTERCONNECT_SQL = {
    "nvlink": ("n.nvlink", "f.nvlink"),
    "infiniband": ("n.infiniband_gbit_s > 0", "f.infiniband"),
}


@dataclass(frozen=True)
class CapacityFilters:
    """Everything a capacity search can ask for; the window is already validated."""

    window: Window
    pricing_mode: str = PricingMode.ON_DEMAND
    term_months: int | None = None
    gpu_models: Sequence[str] = ()
    vendors: Sequence[str] = ()
    generation: str | None = None
    memory_gb_gte: int | None = None
    min_gpus: int = 1
    country: str | None = None
    city: str | None = None
    region: str | None = None
    providers: Sequence[str] = ()
    interconnect: str | None = None
    price_gte: Decimal | None = None
    price_lte: Decimal | None = None
    currency: str | None = None
    offer_ids: Sequence[int] = ()
    ordering: str = "price"
    limit: int = 50
    offset: int = 0
    now: datetime | None = None


# CASE guards the casts: PostgreSQL does not promise to evaluate AND from left to right. The
# reserved discount is the ladder's rung with the most months up to the term. A term that is a
# rung itself (the usual case: 1, 3, 6, 12, 24, 36 months) is looked up by key (`%(term_key)s`;
# the services store the keys canonical, "12"); any other term scans the ladder, a function scan
# and a sort per offer (~6 µs each: 16 ms over 2,550 offers at 100k nodes).
_DISCOUNT_SQL = "CASE WHEN ({v}) ~ '^[0-9]+(\\.[0-9]+)?$' THEN ({v})::numeric END"
_RATE_SQL = f"""
CASE %(mode)s::text
  WHEN 'on_demand' THEN o.price_per_gpu_hour
  WHEN 'interruptible' THEN o.interruptible_price_per_gpu_hour
  WHEN 'reserved' THEN round(o.price_per_gpu_hour * (100 - (
    CASE WHEN o.reserved_ladder ? %(term_key)s
      THEN {_DISCOUNT_SQL.format(v="o.reserved_ladder ->> %(term_key)s")}
      ELSE (
        SELECT {_DISCOUNT_SQL.format(v="r.value")}
        FROM jsonb_each_text(o.reserved_ladder) r
        WHERE (CASE WHEN r.key ~ '^[0-9]{{1,4}}$' THEN r.key::int END) <= %(term_months)s::int
        ORDER BY (CASE WHEN r.key ~ '^[0-9]{{1,4}}$' THEN r.key::int END) DESC
        LIMIT 1)
    END)) / 100, 6)
END"""

# Each offer's pool in one pass, node by node (a narrow search, or the reference counting from
# the allocations): its free GPUs for the window (`{free_join}` finds each node's free GPUs, for
# nodes with some: the CTE free_per_node), and `{reliability}`: the pool's size and
# measured availability (_RELIABILITY_SQL, over `{downtime_join}`: the CTE downtime joined to
# the pool), or neither when only the page's offers need them (_RELIABILITY_OF_PAGE_SQL).
_POOL_STATS_SQL = """
SELECT p.offer_id,
       coalesce(sum(f.free), 0)::int AS free_gpus,
       coalesce(max(f.free), 0)::int AS max_free_on_one_node,
       count(f.free)::int AS nodes_with_free_gpus{reliability}
FROM pool p
{free_join}{downtime_join}
GROUP BY p.offer_id"""

# A broad search: each offer's free GPUs summed from the spans containing the start by their pool
# key (site, GPU model; leasing 0021), the spans of nodes in service only (leasing 0026) and, by
# `{span_filters}`, of those with the asked interconnect (leasing 0024), without building any
# pool of nodes; offers that name their nodes probe those nodes' spans one by one
# (`{named_probe}`, over named_pool: POOL_SQL's rule for them, from the named nodes by key rather
# than from the site's nodes). `{reliability}`: ordered by reliability, every offer's pool size
# and availability, summed by key too (_SIZE_BY_POOL_KEY_SQL); else nothing (the page's, from
# _RELIABILITY_OF_PAGE_SQL).
_POOL_KEY_STATS_SQL = """
WITH by_pool AS (
  SELECT f.site_id, f.gpu_model_id, sum(f.free) AS free_gpus, max(f.free) AS max_free,
         count(*) AS nodes_with_free
  FROM span_free f
  WHERE f.free > 0{span_filters}
  GROUP BY f.site_id, f.gpu_model_id
),
named_pool AS (
  SELECT co.id AS offer_id, n.id AS node_id, n.gpu_count, n.status AS node_status
  FROM candidate_offers co
  JOIN leasing_offer_nodes x ON x.offer_id = co.id
  JOIN inventory_node n
    ON n.id = x.node_id AND n.site_id = co.site_id AND n.gpu_model_id = co.gpu_model_id
  WHERE co.named_nodes AND n.status <> %(retired)s {node_filters}
),
named AS (
  SELECT f.offer_id, sum(f.free) AS free_gpus, max(f.free) AS max_free, count(*) AS nodes_with_free
  FROM ({named_probe}) f
  GROUP BY f.offer_id
){reliability_ctes}
SELECT co.id AS offer_id,
       coalesce(nm.free_gpus, bp.free_gpus, 0)::int AS free_gpus,
       coalesce(nm.max_free, bp.max_free, 0)::int AS max_free_on_one_node,
       coalesce(nm.nodes_with_free, bp.nodes_with_free, 0)::int AS nodes_with_free_gpus{reliability}
FROM candidate_offers co
LEFT JOIN by_pool bp
  ON NOT co.named_nodes AND bp.site_id = co.site_id AND bp.gpu_model_id = co.gpu_model_id
LEFT JOIN named nm ON co.named_nodes AND nm.offer_id = co.id{reliability_joins}"""

# The seconds of outage `{o}` within the last 90 days, and whether it has any.
_OUTAGE_SECONDS_SQL = """extract(epoch FROM least(coalesce({o}."end", %(now)s), %(now)s)
                                   - greatest({o}.start, %(since)s))"""
_IN_PERIOD_SQL = """{o}.start < %(now)s AND ({o}."end" IS NULL OR {o}."end" > %(since)s)"""

# Seconds each node was down in the last 90 days: node-wide (every GPU) and per GPU. `{nodes}`
# narrows it to some nodes (the page's pools).
_DOWNTIME_SQL = f"""
SELECT ou.node_id,
       coalesce(sum({_OUTAGE_SECONDS_SQL.format(o="ou")})
                FILTER (WHERE ou.gpu_id IS NULL), 0) AS node_seconds,
       coalesce(sum({_OUTAGE_SECONDS_SQL.format(o="ou")})
                FILTER (WHERE ou.gpu_id IS NOT NULL), 0) AS gpu_seconds
FROM inventory_outage ou
WHERE {_IN_PERIOD_SQL.format(o="ou")}{{nodes}}
GROUP BY ou.node_id"""

# Every offer's pool size and availability for a broad search ordered by reliability, from the
# tables the database keeps for it (leasing 0027), not from the nodes: the sizes by pool key
# (leasing_poolsize: rows of changes by key and interconnect, summed), the GPU-seconds lost by
# pool key in the 90 days
# (leasing_pooloutage: each outage with its node's key and the GPUs it costs); the named pools
# by offer, their nodes' lost seconds from the same outage rows. `{span_filters}` asks for the
# interconnect as on the spans (the same columns under the same alias). Each offer joins the
# sums by key or by offer (the joins on named_nodes exclude each other), so coalesce picks it.
_SIZE_BY_POOL_KEY_SQL = f""",
size_by_key AS (
  SELECT f.site_id, f.gpu_model_id, sum(f.nodes) AS pool_nodes, sum(f.gpus) AS pool_gpus
  FROM leasing_poolsize f
  WHERE true{{span_filters}}
  GROUP BY f.site_id, f.gpu_model_id
  HAVING sum(f.nodes) > 0
),
lost_by_key AS (
  SELECT f.site_id, f.gpu_model_id, sum(f.gpus * {_OUTAGE_SECONDS_SQL.format(o="f")}) AS lost
  FROM leasing_pooloutage f
  WHERE {_IN_PERIOD_SQL.format(o="f")} AND NOT f.retired{{span_filters}}
  GROUP BY f.site_id, f.gpu_model_id
),
named_lost AS MATERIALIZED (
  SELECT p.offer_id, sum(f.gpus * {_OUTAGE_SECONDS_SQL.format(o="f")}) AS lost
  FROM named_pool p
  JOIN leasing_pooloutage f ON f.node_id = p.node_id
  WHERE {_IN_PERIOD_SQL.format(o="f")}
  GROUP BY p.offer_id
),
size_named AS (
  SELECT s.offer_id, s.pool_nodes, s.pool_gpus, d.lost
  FROM (
    SELECT p.offer_id, count(*) AS pool_nodes, sum(p.gpu_count) AS pool_gpus
    FROM named_pool p
    GROUP BY p.offer_id
  ) s
  LEFT JOIN named_lost d ON d.offer_id = s.offer_id
)"""
_SIZE_BY_POOL_KEY_JOINS = """
LEFT JOIN size_by_key sk
  ON NOT co.named_nodes AND sk.site_id = co.site_id AND sk.gpu_model_id = co.gpu_model_id
LEFT JOIN lost_by_key lk
  ON NOT co.named_nodes AND lk.site_id = co.site_id AND lk.gpu_model_id = co.gpu_model_id
LEFT JOIN size_named sn ON co.named_nodes AND sn.offer_id = co.id"""

# Measured availability over the last 90 days, per offer over the rows of its pool `p` joined to
# their nodes' downtime `d`: GPU-seconds lost to outages (a node-wide outage costs every GPU of
# the node) over GPU-seconds in the period. Outages of one node never overlap each other
# (inventory's constraints and services), so the seconds simply add up.
_RELIABILITY_OF_SQL = """round(100 * (1
    - coalesce({lost}, 0) / ({gpus} * %(reliability_seconds)s::numeric)), 3)"""
_RELIABILITY_SQL = _RELIABILITY_OF_SQL.format(
    lost="sum(p.gpu_count * d.node_seconds + d.gpu_seconds)", gpus="sum(p.gpu_count)"
)
_SIZE_BY_POOL_KEY_RELIABILITY = _RELIABILITY_OF_SQL.format(
    lost="coalesce(sn.lost, lk.lost)", gpus="coalesce(sn.pool_gpus, sk.pool_gpus)"
)
_SIZE_BY_POOL_KEY_COLUMNS = f""",
       coalesce(sn.pool_nodes, sk.pool_nodes) AS pool_nodes,
       coalesce(sn.pool_gpus, sk.pool_gpus) AS pool_gpus,
       {_SIZE_BY_POOL_KEY_RELIABILITY} AS reliability_pct"""


# Unqualified: they name the same columns in the statement that picks the page and in the one
# that adds reliability to a page picked already. Each name must stay unique among the relations
# those two statements join (offers, pool_stats, page, page_reliability): a second `rate` would
# make the orderings ambiguous.
_ORDER_SQL = {
    "price": "rate",
    "price_per_tflops": "rate / dense_bf16_tflops",
    "bandwidth_per_dollar": "memory_bandwidth_tbps / rate",
    "reliability": "reliability_pct",
    "free_gpus": "free_gpus",
}

_CAPACITY_SQL = """
WITH candidate_offers AS (
  SELECT o.id, o.name, o.site_id, o.gpu_model_id, o.currency, o.price_per_gpu_hour,
         o.interruptible_price_per_gpu_hour, o.reserved_ladder, o.min_term_hours,
         o.preemption_notice_minutes,
         ({rate}) AS rate,
         pr.slug AS provider_slug, pr.name AS provider_name,
         s.name AS site_name, s.country, s.city, s.region,
         m.slug AS model_slug, m.name AS model_name, m.vendor, m.generation, m.memory_gb,
         m.memory_bandwidth_tbps, m.dense_bf16_tflops,
         EXISTS (SELECT 1 FROM leasing_offer_nodes x WHERE x.offer_id = o.id) AS named_nodes,
         o.index_linked_terms IS NOT NULL AS index_linked
  FROM leasing_offer o
  JOIN inventory_gpumodel m ON m.id = o.gpu_model_id
  JOIN inventory_site s ON s.id = o.site_id
  JOIN accounts_organization pr ON pr.id = o.provider_id
  WHERE o.status = %(published)s
    AND o.price_unit = %(gpu_hour)s
    AND o.available_from <= %(start)s
    AND (o.available_until IS NULL OR o.available_until >= %(end)s)
    AND o.min_term_hours * interval '1 hour' <= %(duration)s
    {offer_filters}
),
priced AS (
  SELECT * FROM candidate_offers co WHERE co.rate IS NOT NULL {price_filters}
),
pool AS ({pool}),{free_per_node}{downtime}
pool_stats AS ({pool_stats}),
page AS (
  SELECT co.*, {page_pool_size}r.nodes_with_free_gpus, r.free_gpus,
         r.max_free_on_one_node{page_reliability}, count(*) OVER () AS total
  FROM priced co
  JOIN pool_stats r ON r.offer_id = co.id
  WHERE r.free_gpus >= %(min_gpus)s
  ORDER BY {order}, rate ASC, id ASC
  LIMIT %(limit)s OFFSET %(offset)s
){reliability_of_page}
SELECT co.id, co.name, co.provider_slug, co.provider_name, co.site_id, co.site_name,
       co.country, co.city, co.region, co.model_slug, co.model_name, co.vendor, co.generation,
       co.memory_gb, co.memory_bandwidth_tbps, co.dense_bf16_tflops,
       {pool_size}, co.nodes_with_free_gpus, co.free_gpus,
       co.max_free_on_one_node, co.rate, co.currency, co.price_per_gpu_hour,
       co.interruptible_price_per_gpu_hour, co.reserved_ladder, {reliability_column},
       co.min_term_hours, co.preemption_notice_minutes, co.index_linked, co.total
FROM page co{reliability_join}
ORDER BY {order}, rate ASC, id ASC
"""

# Reliability and pool size of the page's offers only (any ordering but by reliability): their
# pools again, and the downtime of those nodes alone, instead of the whole fleet's.
_RELIABILITY_OF_PAGE_SQL = """,
page_pool AS ({page_pool}),
page_downtime AS ({page_downtime}),
page_reliability AS (
  SELECT p.offer_id, count(*) AS pool_nodes, sum(p.gpu_count) AS pool_gpus,
         {reliability} AS reliability_pct
  FROM page_pool p
  LEFT JOIN page_downtime d ON d.node_id = p.node_id
  GROUP BY p.offer_id
)"""


# The filters on offers, each a CapacityFilters field and its condition over the parameter of the
# same name, and the filters on the asked term's rate (`co.rate`).
_OFFER_FILTER_SQL = (
    ("offer_ids", "o.id = ANY(%(offer_ids)s)"),
    ("gpu_models", "m.slug = ANY(%(gpu_models)s)"),
    ("vendors", "m.vendor = ANY(%(vendors)s)"),
    ("generation", "lower(m.generation) = lower(%(generation)s)"),
    ("memory_gb_gte", "m.memory_gb >= %(memory_gb_gte)s"),
    ("country", "s.country = upper(%(country)s)"),
    ("city", "lower(s.city) = lower(%(city)s)"),
    ("region", "lower(s.region) = lower(%(region)s)"),
    ("providers", "pr.slug = ANY(%(providers)s)"),
    ("currency", "o.currency = %(currency)s"),
)
_PRICE_FILTER_SQL = (
    ("price_gte", "co.rate >= %(price_gte)s"),
    ("price_lte", "co.rate <= %(price_lte)s"),
)


def _conditions(
    filters: CapacityFilters, table: tuple[tuple[str, str], ...], params: dict[str, Any]
) -> list[str]:
    """The conditions of the filters given (not None, not an empty text or list; 0 is given),
    their values added to `params` (lists as lists, for ANY)."""
    conditions = []
    for name, condition in table:
        value = getattr(filters, name)
        if value is None or (isinstance(value, Sequence) and not value):
            continue
        conditions.append(condition)
        params[name] = (
            list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
        )
    return conditions


def capacity_sql(
    filters: CapacityFilters, *, from_allocations: bool = False
) -> tuple[str, dict[str, Any]]:
    """The SQL text and parameters of a capacity search (the benchmark times it bare).

    Free GPUs come from the free-capacity timeline (leasing.NodeFreeSpan). `from_allocations`
    counts them from the allocations and outages themselves, GPU by GPU (the rule of
    leasing.selectors.free): the reference the timeline's property test compares against.
    """
    now = filters.now or timezone.now()
    params = free_params(
        start=filters.window.start,
        end=filters.window.end,
        may_preempt=may_preempt_for(filters.pricing_mode),
    )
    params.update(
        mode=filters.pricing_mode,
        term_months=filters.term_months,
        term_key=None if filters.term_months is None else str(filters.term_months),
        published=OfferStatus.PUBLISHED,
        # GPU-hour offers only: whole-server monthly rent is leased from its offer directly.
        gpu_hour=PriceUnit.GPU_HOUR,
        duration=filters.window.duration,
        min_gpus=filters.min_gpus,
        limit=filters.limit,
        offset=filters.offset,
        now=now,
        since=now - timedelta(days=RELIABILITY_DAYS),
        reliability_seconds=RELIABILITY_DAYS * 86400,
    )
    offer_filters = _conditions(filters, _OFFER_FILTER_SQL, params)
    price_filters = _conditions(filters, _PRICE_FILTER_SQL, params)
    node_filters = span_filters = ""
    if filters.interconnect:
        node_condition, span_condition = _INTERCONNECT_SQL[filters.interconnect]
        node_filters, span_filters = f"AND {node_condition}", f" AND {span_condition}"
    ordering = filters.ordering
    descending = ordering.startswith("-")
    # Two plans for one rule. A search narrowed to a few pools probes an index once per node (or
    # GPU) of those pools; a broad one reads every node's span containing the start (or counts
    # the blocked GPUs of every node) in one index scan. PostgreSQL cannot pick between them
    # itself: it underestimates the pool CTE by orders of magnitude.
    set_based = not (
        filters.offer_ids
        or len(filters.gpu_models) == 1
        or filters.providers
        or filters.country
        or filters.city
        or filters.region
    )
    by_node = "LEFT JOIN free_per_node f ON f.offer_id = p.offer_id AND f.node_id = p.node_id"
    by_reliability = ordering.lstrip("-") == "reliability"
    # A broad search on the timeline sums the spans by their pool key (_POOL_KEY_STATS_SQL);
    # the others count node by node over each offer's pool (_POOL_STATS_SQL). The sums cannot
    # tell an offer whose pool has no node from one with no GPU free: both are left out when at
    # least one free GPU is asked for (the API's minimum), not when none is.
    by_pool_key = set_based and not from_allocations and filters.min_gpus >= 1
    column = span_column(filters.pricing_mode)
    free_per_node = free_join = ""
    if from_allocations:
        blocked = f"\nblocked_per_node AS ({BLOCKED_PER_NODE_SQL})," if set_based else ""
        per_node = SEARCH_FREE_PER_NODE_SQL if set_based else FREE_PER_NODE_SQL
        free_per_node, free_join = f"{blocked}\nfree_per_node AS ({per_node}),", by_node
    elif by_pool_key:
        free_per_node = f"\nspan_free AS ({SPANS_FREE_CTE_SQL.format(column=column)}),"
    else:
        probe = SPANS_FREE_PER_NODE_PROBE_SQL.format(column=column, pool="pool")
        free_per_node, free_join = f"\nfree_per_node AS ({probe}),", by_node
    order = _ORDER_SQL[ordering.lstrip("-")]
    pool = POOL_SQL.format(offers="candidate_offers", node_filters=node_filters)
    # Ordered by it: every candidate offer's reliability, from the whole fleet's downtime (a broad
    # search on the timeline sums the outages by pool key instead: _SIZE_BY_POOL_KEY_SQL).
    downtime = (
        f"\ndowntime AS ({_DOWNTIME_SQL.format(nodes='')}),"
        if by_reliability and not by_pool_key
        else ""
    )
    if by_pool_key:
        pool_stats = _POOL_KEY_STATS_SQL.format(
            span_filters=span_filters,
            node_filters=node_filters,
            named_probe=SPANS_FREE_PER_NODE_PROBE_SQL.format(column=column, pool="named_pool"),
            reliability_ctes=(
                _SIZE_BY_POOL_KEY_SQL.format(span_filters=span_filters) if by_reliability else ""
            ),
            reliability=_SIZE_BY_POOL_KEY_COLUMNS if by_reliability else "",
            reliability_joins=_SIZE_BY_POOL_KEY_JOINS if by_reliability else "",
        )
    else:
        pool_stats = _POOL_STATS_SQL.format(
            free_join=free_join,
            reliability=(
                ",\n       count(*) AS pool_nodes, sum(p.gpu_count) AS pool_gpus,"
                f"\n       {_RELIABILITY_SQL} AS reliability_pct"
                if by_reliability
                else ""
            ),
            downtime_join=(
                "\nLEFT JOIN downtime d ON d.node_id = p.node_id" if by_reliability else ""
            ),
        )
    if by_reliability:
        page_reliability, reliability_of_page = ", r.reliability_pct", ""
        reliability_column, reliability_join = "co.reliability_pct", ""
        page_pool_size, pool_size = "r.pool_nodes, r.pool_gpus, ", "co.pool_nodes, co.pool_gpus"
    else:
        page_reliability = ""
        page_pool_size, pool_size = "", "r.pool_nodes, r.pool_gpus"
        reliability_of_page = _RELIABILITY_OF_PAGE_SQL.format(
            page_pool=POOL_SQL.format(offers="page", node_filters=node_filters),
            page_downtime=_DOWNTIME_SQL.format(
                nodes="\n  AND ou.node_id IN (SELECT page_pool.node_id FROM page_pool)"
            ),
            reliability=_RELIABILITY_SQL,
        )
        reliability_column = "r.reliability_pct"
        reliability_join = "\nJOIN page_reliability r ON r.offer_id = co.id"
    direction = "DESC NULLS LAST" if descending else "ASC NULLS LAST"
    sql = _CAPACITY_SQL.format(
        rate=_RATE_SQL,
        offer_filters="".join(f"\n    AND {condition}" for condition in offer_filters),
        price_filters="".join(f" AND {condition}" for condition in price_filters),
        pool=pool,
        free_per_node=free_per_node,
        downtime=downtime,
        pool_stats=pool_stats,
        page_reliability=page_reliability,
        page_pool_size=page_pool_size,
        pool_size=pool_size,
        reliability_of_page=reliability_of_page,
        reliability_column=reliability_column,
        reliability_join=reliability_join,
        order=f"{order} {direction}",
    )
    return sql, params
