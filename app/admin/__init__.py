"""Administration: tenant lifecycle with an audit trail, per-tenant statistics."""
