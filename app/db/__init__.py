"""Storage: ORM models, engine, tenant-scoped transactions, embedded server, migrations."""
