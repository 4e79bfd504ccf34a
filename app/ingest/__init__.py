"""Ingestion: parse documents (text, markdown, HTML, PDF), split them into chunks, embed, store."""
