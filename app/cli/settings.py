"""Settings for a CLI command: a bad value stops it with the variable named."""

from __future__ import annotations

import typer
from pydantic import ValidationError

from app.settings import Settings, with_dev_jwt_secret


def load_settings(*, dev_secret: bool = True) -> Settings:
    """The settings; with `dev_secret`, the embedded mode's token secret filled in."""
    try:
        settings = Settings()
        return with_dev_jwt_secret(settings) if dev_secret else settings
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            variable = f"RAG_{field.upper()}" if field else "settings"
            typer.echo(f"configuration error: {variable}: {error['msg']}", err=True)
        raise typer.Exit(2) from None


def require_embedder(settings: Settings, *, command: str) -> None:
    """Stop with one line when the configured embedder cannot load here (the `local` extra
    not installed, say), before anything starts."""
    from app.embeddings.factory import missing_requirement

    if problem := missing_requirement(settings):
        typer.echo(f"{command}: {problem}", err=True)
        raise typer.Exit(1)
