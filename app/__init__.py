"""Multi-tenant RAG retrieval service."""

__version__ = "0.1.0"
