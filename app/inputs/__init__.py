"""What a caller may ask, in the words every door uses (HTTP, MCP, the command line).

`vocabulary` holds the choices (modes, citation styles, scopes, merge strategies) and their
defaults with the standard library alone, so `rag --help` can parse with them; `search`,
`similar` and `dedupe` hold the validated inputs of those operations (pydantic), `replies`
what the doors return alike (the context's quality figures). The domain
packages import the choices from here; nothing here imports the domain's database layer.
"""
