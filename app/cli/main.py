"""`python -m app.cli.main` runs the `rag` command."""

from app.cli import main

if __name__ == "__main__":
    main()
