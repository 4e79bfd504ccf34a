"""How a search's transaction is set for the planner and the HNSW index: `hnsw.ef_search` by
the size of the index the tenant's search uses, iterative scans, the plan cache mode, and which
tenants get a statement of their own whose plan is kept.

All of them are transaction-local settings (app/db/settings_sql.py): they end with the
search's transaction and never leak to the next user of a pooled connection. asyncpg prepares
statements, and a generic plan of a statement with the tenant as a parameter cannot see the
tenant: it sorts every row of the tenant instead of using an HNSW index, and it could never
pick a tenant's dedicated (partial) index. Statements with the tenant as a parameter are
therefore planned at every run (`force_custom_plan`). A tenant searched again and again gets a
direct vector statement of its own instead (nearest.py: the tenant, the model and the limits
written in as constants), whose plan is made once per connection and kept
(`force_generic_plan`): planning was 0.9-1.4 ms of every search. A kept plan is made again when
the table's statistics or indexes change (ANALYZE, a dedicated index created or dropped), as a
custom plan would see them. So is a keyword or hybrid search's legs statement (direct_legs.py),
on one server only (`GENERIC_ON_ONE_SERVER`).
"""

from __future__ import annotations

from sqlalchemy import text

from app.db.indexes import by_dedicated_index_size
from app.db.settings_sql import Computed
from app.db.state import PlanMemory
from app.db.tenancy import Setting
from app.retrieval.requests import SearchMode, SearchRequest

# Automatic ef_search (docs/BENCHMARKS.md, "Recall by default"): HNSW needs a longer
# candidate list for the same recall as its graph grows. (index rows below, ef_search) for a
# tenant's dedicated index; the largest graphs get EF_LARGEST; a tenant without one searches
# the shared index filtered by iterative scans (or the btree, exactly, when it is small).
# 140, not 100, under 20,000 rows: at 100 a 10,000-row graph's recall@10 went from 0.968 down
# to 0.942 over four runs ("ef_search for the small graphs again").
EF_STEPS = ((20_000, 140), (200_000, 160))
EF_LARGEST = 300
EF_SHARED = 100
EF_PER_ROW = 4  # the automatic ef_search is at least 4x the results asked for
CUSTOM, GENERIC = "force_custom_plan", "force_generic_plan"
# A keyword or hybrid search's legs plan: kept on one server, which saves PostgreSQL 2-3 ms of
# CPU per search (docs/BENCHMARKS.md, "Keyword and hybrid search"); made at every run on a Citus
# coordinator (its own catalog says which), which makes no generic plan of hybrid's ("could not
# create distributed plan") and whose kept router plan would name a shard a move replaces.
GENERIC_ON_ONE_SERVER = Computed(
    f"'{CUSTOM}'", when="to_regclass('pg_dist_partition') is not null", otherwise=GENERIC
)

# A tenant's own statement costs a prepare and a plan on its first run on a connection
# (+0.8 ms) and saves the plan (0.8 ms) on every later run (docs/BENCHMARKS.md, "Vectors in
# the row, plans kept per tenant", table 5): a tenant gets it from its KEEP_PLAN_FROM-th
# direct search within five minutes (the sessions' `PlanMemory`, app/db/state.py); until
# then, the statement every tenant shares, planned at each run.
KEEP_PLAN_FROM = 3

# An exact plan (the candidates ordered by `distance + 0`, which no index answers) reads the
# rows in scope through the index of a condition (the policy's access arms, a filter's), which
# the planner costs from table-wide estimates close to reading the whole table: never a
# sequential scan. Set in a transaction that decides on an exact plan after it began.
EXACT_PLAN = text("SET LOCAL enable_seqscan = off")
# A direct search read exactly for its collection filter (narrowed.py, or after a walk cut
# short: nearest.py `cut_short`) reads the collection's chunks through the btree on (tenant_id,
# collection_id): bitmap scans off too, else the planner, which cannot estimate the
# collections' subquery, reads every row of the tenant through the policy's arms (EXPLAIN
# ANALYZE, a 2-chunk collection of a 22,000-chunk tenant: 36.6 ms, 0.16 without). The session
# path's filters keep them (`EXACT_PLAN`): a source type's semi-join and a collection's beside
# it were 2-4 times slower without.
COLLECTION_PLAN: dict[str, Setting] = {"enable_seqscan": "off", "enable_bitmapscan": "off"}


def index_settings(
    ef_search: int | None, tenant_id: str, *, fetching: int = 0
) -> dict[str, Setting]:
    """Every HNSW query (search, similar, dedupe) runs under them: the recall guarantees are
    the same everywhere. `ef_search` None: chosen by the server from the size of the index
    the tenant's search uses, in the statement that opens the transaction, and at least
    EF_PER_ROW times the results `fetching` asks for (100 results: 400): a graph walk keeps
    only ef_search candidates, and recall@100 needs that many (docs/BENCHMARKS.md, "Up to 100
    results")."""
    floor = EF_PER_ROW * fetching
    ef: Setting = (
        str(ef_search)
        if ef_search is not None
        else by_dedicated_index_size(
            tenant_id,
            [(rows, max(value, floor)) for rows, value in EF_STEPS],
            largest=max(EF_LARGEST, floor),
            shared=max(EF_SHARED, floor),
        )
    )
    return {
        "hnsw.ef_search": ef,
        "hnsw.iterative_scan": "relaxed_order",
        "plan_cache_mode": CUSTOM,
    }


def search_settings(
    request: SearchRequest, tenant_id: str, *, exact: bool = False
) -> dict[str, Setting]:
    """A search's. Keyword and hybrid also turn sequential scans off: the planner does not
    cost reading every row's tsvector out of TOAST for `@@`, and picks a sequential scan for a
    term in a sixth of the rows where the GIN bitmap (exact for plain terms, no recheck) is
    several times faster. So does the exact plan of a small visible set: the policy's access
    arms read it from their indexes, which the planner costs from table-wide estimates close
    to a scan of the whole table."""
    settings = index_settings(request.ef_search, tenant_id, fetching=request.top_k)
    if request.mode is not SearchMode.VECTOR or exact:
        settings["enable_seqscan"] = "off"
    return settings


def direct_settings(
    request: SearchRequest, tenant_id: str, exact: bool, kept: bool, *, keep: Setting = GENERIC
) -> dict[str, Setting]:
    """The direct path's: the search's, with the tenant's own statement (`kept`) under the plan
    mode `keep` (vector's: kept everywhere; keyword's and hybrid's: `GENERIC_ON_ONE_SERVER`)."""
    settings = search_settings(request, tenant_id, exact=exact)
    return settings | {"plan_cache_mode": keep} if kept else settings


def keeps_plan(plans: PlanMemory, tenant_id: str) -> bool:
    """Counts this search of `tenant_id`: whether it uses the tenant's own statement."""
    searches = plans.searches.put(tenant_id, (plans.searches.get(tenant_id) or 0) + 1)
    return searches >= KEEP_PLAN_FROM
