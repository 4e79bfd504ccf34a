"""What the wheel holds, beyond what pyproject.toml can say.

The repository keeps `app/`, `migrations/` and `clients/python/` at their places; the wheel maps
them to two import names, so an installed service claims no top-level `migrations`:

- `app` and its subpackages;
- `app.db.migrations`, from `migrations/` (Alembic reads it as a folder: app/db/migrate.py);
- `rag_client`, the Python client from `clients/python/`, which `rag … --url` talks through.
  It ships inside the service's wheel, so `pip install .` (from a clone or from a built wheel)
  gives a `rag` whose remote commands work; `pip install ./clients/python` stays the way to get
  the client alone. docs/ARCHITECTURE.md, "Packaging", says why.

An editable install maps the same names onto these folders.
"""

from setuptools import find_namespace_packages, setup

MIGRATIONS = ["app.db.migrations", "app.db.migrations.versions"]

setup(
    packages=[*find_namespace_packages(include=["app", "app.*"]), *MIGRATIONS, "rag_client"],
    package_dir={"app.db.migrations": "migrations", "rag_client": "clients/python/rag_client"},
    package_data={
        "app.console": ["static/**/*"],
        "app.db.migrations": ["script.py.mako"],
        "rag_client": ["py.typed"],
    },
)
