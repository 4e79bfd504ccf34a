"""The `rag` command line."""

from app.cli.commands import app as _app


def main() -> None:
    _app()
