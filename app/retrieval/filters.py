"""Search filters as SQL conditions on `chunks`; every key and value is a bound parameter."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, Numeric, and_, any_, case, cast, false, func, or_, select
from sqlalchemy.dialects.postgresql import ARRAY, UUID

from app.db.models import Chunk, Collection, Document

Scalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class MetadataCondition:
    """One metadata key: one of `any_of` (a single value is equality) and/or a numeric range."""

    any_of: Sequence[Scalar] | None = None
    bounds: Mapping[str, float] = field(default_factory=dict)  # gt, gte, lt, lte


@dataclass(frozen=True, slots=True)
class SearchFilters:
    collections: Sequence[str] | None = None
    source_types: Sequence[str] | None = None
    document_ids: Sequence[uuid.UUID] | None = None
    metadata: Mapping[str, MetadataCondition] = field(default_factory=dict)


def conditions(filters: SearchFilters) -> list[ColumnElement[bool]]:
    """WHERE conditions on Chunk (the tenant is enforced separately, and by RLS)."""
    found: list[ColumnElement[bool]] = []
    if filters.collections is not None:
        names = select(Collection.id).where(Collection.name.in_(list(filters.collections)))
        found.append(Chunk.collection_id.in_(names.scalar_subquery()))
    if filters.source_types is not None:
        docs = select(Document.id).where(Document.source_type.in_(list(filters.source_types)))
        found.append(Chunk.document_id.in_(docs.scalar_subquery()))
    if filters.document_ids is not None:
        found.append(Chunk.document_id.in_(list(filters.document_ids)))
    for key, condition in filters.metadata.items():
        if condition.any_of is not None:
            # `@>` containment uses the GIN (jsonb_path_ops) index; no value allowed (`eq`
            # outside `in`) matches nothing, never everything
            values = [Chunk.metadata_.contains({key: v}) for v in condition.any_of]
            found.append(or_(*values) if values else false())
        if condition.bounds:
            found.append(_in_range(key, condition.bounds))
    return found


def narrows(filters: SearchFilters) -> bool:
    """Whether the filters keep less than the whole tenant: any filter at all."""
    return filters.collections is not None or not collections_only(filters)


def collections_only(filters: SearchFilters) -> bool:
    """Whether the filters hold nothing but collections, if that: the direct path takes the
    collections as a parameter of its statements compiled once (`in_collections`)."""
    return filters.source_types is None and filters.document_ids is None and not filters.metadata


def in_collections(tenant: Any, names: Any) -> ColumnElement[bool]:
    """`conditions`' collection filter with the tenant and the names (a text array) as values or
    parameters: the ids of the tenant's collections of those names, read once (an InitPlan),
    then matched as an index condition of the btree on (tenant_id, collection_id). The tenant
    named in the subquery too lets Citus route the whole statement to the tenant's shard."""
    ids = select(func.array_agg(Collection.id)).where(
        Collection.tenant_id == tenant, Collection.name == any_(names)
    )
    return Chunk.collection_id == any_(cast(ids.scalar_subquery(), ARRAY(UUID)))


def _in_range(key: str, bounds: Mapping[str, float]) -> ColumnElement[bool]:
    value = Chunk.metadata_[key]
    number = case(
        (func.jsonb_typeof(value) == "number", cast(value.astext, Numeric)),
        else_=None,
    )
    tests = {
        "gt": lambda b: number > b,
        "gte": lambda b: number >= b,
        "lt": lambda b: number < b,
        "lte": lambda b: number <= b,
    }
    return and_(*(tests[op](Decimal(str(bound))) for op, bound in bounds.items()))
