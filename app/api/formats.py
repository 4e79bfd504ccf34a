"""GET /api/rag/formats: what ingest reads, from the parsers' registry, so that a client (the
web console's upload hint and type filters) never keeps a second list."""

from __future__ import annotations

from typing import Self

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.deps import AnyCaller
from app.api.openapi import GATED
from app.ingest.parsing import SourceType

router = APIRouter(prefix="/api/rag", tags=["documents"], responses=GATED)


class FormatOut(BaseModel):
    source_type: SourceType = Field(description="The `source_type` of documents of this format.")
    label: str = Field(description="What a person calls it: “Markdown”, “Word document” …")
    suffixes: list[str] = Field(description="File name endings, the usual one first.")
    file_only: bool = Field(
        description="Uploaded as a file only (POST /api/rag/documents/upload or /jobs); the "
        "others may also be sent as text in a JSON body."
    )

    @classmethod
    def of(cls, source_type: SourceType) -> Self:
        return cls(
            source_type=source_type,
            label=source_type.label,
            suffixes=list(source_type.suffixes),
            file_only=source_type.file_only,
        )


class FormatList(BaseModel):
    items: list[FormatOut] = Field(description="Every format ingest reads, text formats first.")


@router.get("/formats", summary="The document formats ingest reads")
async def formats(_caller: AnyCaller) -> FormatList:
    """Any valid token: each format's `source_type` (the value documents carry and the
    filters take), its name, its file name endings and whether it is a file format only."""
    return FormatList(items=[FormatOut.of(source_type) for source_type in SourceType])
