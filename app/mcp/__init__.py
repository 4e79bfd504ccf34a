"""MCP: the service's tools and resources for agents, over streamable HTTP (/mcp) and stdio.

The tools are doors like the HTTP routes: the same gate (app/gate.py), the same domain
functions, the same answers. See docs/MCP.md.
"""
