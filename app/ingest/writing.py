"""Writing new versions: all of a unit in one transaction, or, when the database refuses one of
them (a constraint, a value it cannot store), each in a transaction of its own, so that only
that document fails."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from app.db.tenancy import SessionMaker, tenant_transaction
from app.errors import AppError, Unprocessable
from app.ingest.store import NewVersion, Written, write_versions
from app.ingest.versions import Pending


async def write(
    sessions: SessionMaker, tenant_id: str, items: list[Pending], versions: list[NewVersion]
) -> list[tuple[Pending, Written | AppError]]:
    """All in one transaction; if the database refuses any of them, each in its own."""
    if not versions:
        return []
    try:
        async with tenant_transaction(sessions, tenant_id) as session:
            written = await write_versions(session, tenant_id, versions)
        return list(zip(items, written, strict=True))
    except DBAPIError as error:
        if not _refused_by_content(error):
            raise
        if len(versions) == 1:
            return [(items[0], _refusal(error))]
    return [
        (item, await _write_alone(sessions, tenant_id, version))
        for item, version in zip(items, versions, strict=True)
    ]


async def _write_alone(
    sessions: SessionMaker, tenant_id: str, version: NewVersion
) -> Written | AppError:
    try:
        async with tenant_transaction(sessions, tenant_id) as session:
            [written] = await write_versions(session, tenant_id, [version])
    except DBAPIError as error:
        if not _refused_by_content(error):
            raise
        return _refusal(error)
    return written


def _refused_by_content(error: DBAPIError) -> bool:
    """SQLSTATE class 22 (data exception) or 23 (integrity constraint): the document's values
    are the cause. Anything else (a lost connection, a timeout) is the database's problem."""
    sqlstate = getattr(error.orig, "sqlstate", None) or ""
    return sqlstate[:2] in {"22", "23"}


def _refusal(error: DBAPIError) -> AppError:
    reason = str(error.orig).strip().splitlines()[0]
    return Unprocessable(f"the database refused the document: {reason}")
