"""Why a search returned fewer chunks than asked, worked out only when it happens.

The reasons, checked in this order: the tenant holds no chunk embedded by the query's model
(`empty`); every chunk the filters leave was returned, so the filters (or, without filters,
the tenant's size) are the limit (`filters`, `scope`); more chunks were in scope, and the
threshold kept fewer (`threshold`, vector and hybrid), no more chunks hold the query's terms
(`no_match`, keyword), or the index scan stopped early (`index`, vector without threshold).
One bounded statement in the search's own transaction: two counts that stop at `top_k`.
A vector search knows the commonest case without it: its statement counts the candidates it
measured before the threshold, and `top_k` of them in scope means the threshold kept the
rest (`threshold_shortfall`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk


class ShortfallReason(StrEnum):
    EMPTY = "empty"
    FILTERS = "filters"
    SCOPE = "scope"
    THRESHOLD = "threshold"
    NO_MATCH = "no_match"
    INDEX = "index"


@dataclass(frozen=True, slots=True)
class Shortfall:
    reason: ShortfallReason
    returned: int
    in_scope: int  # chunks the tenant and filters leave, counted up to top_k
    threshold: float | None
    hybrid: bool = False  # hybrid keeps keyword matches below the threshold

    @property
    def note(self) -> str:
        n = _chunks(self.returned)
        match self.reason:
            case ShortfallReason.EMPTY:
                return "the tenant holds no chunks for this model yet: ingest documents first"
            case ShortfallReason.FILTERS:
                return f"the filters match only {_chunks(self.in_scope)}"
            case ShortfallReason.SCOPE:
                return f"the tenant holds only {_chunks(self.in_scope)}"
            case ShortfallReason.THRESHOLD:
                either = " or contain the query's terms" if self.hybrid else ""
                return f"only {n} reached the threshold {self.threshold}{either}"
            case ShortfallReason.NO_MATCH:
                verb = "contains" if self.returned == 1 else "contain"
                return f"only {n} {verb} the query's terms"
            case ShortfallReason.INDEX:
                return f"the index search found only {n}; a higher ef_search looks further"


def _chunks(count: int) -> str:
    return f"{count} chunk" if count == 1 else f"{count} chunks"


def threshold_shortfall(
    returned: int, measured: int | None, top_k: int, threshold: float | None
) -> Shortfall | None:
    """What `explain_shortfall` finds for a vector search that `measured` at least `top_k`
    candidates in scope (the nearest, before the threshold) and returned fewer: the scope
    holds `top_k` or more, so the threshold kept the rest. None when there is no shortfall
    or the counts do not tell (then `explain_shortfall` works it out)."""
    if returned >= top_k or threshold is None or measured is None or measured < top_k:
        return None
    return Shortfall(ShortfallReason.THRESHOLD, returned, top_k, threshold)


async def explain_shortfall(
    session: AsyncSession,
    *,
    tenant_scope: Sequence[ColumnElement[bool]],
    filters: Sequence[ColumnElement[bool]],
    returned: int,
    top_k: int,
    threshold: float | None,
    keyword: bool,
    hybrid: bool = False,
) -> Shortfall | None:
    """None when `returned` reached `top_k`. `tenant_scope` selects the tenant's chunks of
    the model, `filters` the request's further conditions."""
    if returned >= top_k:
        return None
    tenant_rows = select(Chunk.id).where(*tenant_scope).limit(1).subquery()
    scoped_rows = select(Chunk.id).where(*tenant_scope, *filters).limit(top_k).subquery()
    row = (
        await session.execute(
            select(
                select(func.count()).select_from(tenant_rows).scalar_subquery(),
                select(func.count()).select_from(scoped_rows).scalar_subquery(),
            )
        )
    ).one()
    return shortfall_of(
        int(row[0]) > 0,
        int(row[1]),
        returned=returned,
        filtered=bool(filters),
        threshold=threshold,
        keyword=keyword,
        hybrid=hybrid,
    )


def shortfall_of(
    any_rows: bool,
    in_scope: int,
    *,
    returned: int,
    filtered: bool,
    threshold: float | None,
    keyword: bool,
    hybrid: bool = False,
) -> Shortfall:
    """The reason, from whether the tenant holds any chunk of the model and how many chunks
    the scope holds (counted up to `top_k`): a search that counted them itself (the direct
    path of keyword and hybrid, direct_legs.py) needs no statement more."""
    if not any_rows:
        reason = ShortfallReason.EMPTY
    elif in_scope <= returned:
        reason = ShortfallReason.FILTERS if filtered else ShortfallReason.SCOPE
    elif keyword:
        reason = ShortfallReason.NO_MATCH
    elif threshold is not None:
        reason = ShortfallReason.THRESHOLD
    else:
        reason = ShortfallReason.INDEX
    return Shortfall(reason, returned, in_scope, threshold, hybrid)
