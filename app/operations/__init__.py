"""The service's operations, one function each, shared by every door.

A door (an HTTP route, an MCP tool, a `rag` command in process) admits its caller, turns its
own arguments into an input of app/inputs, makes one call here and shapes the outcome into
its own reply. The function builds the domain's request (limits, per-model defaults, the
configured index and fusion parameters), does the bookkeeping (traffic counts, how often each
document is returned) and picks the database: a read replica unless the caller asks for the
primary, the primary for writes and for reads that must follow them.
"""
