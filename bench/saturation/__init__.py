"""Searches per second at saturation: closed-loop clients driven by wrk against `rag serve`
and Chroma's HTTP server, with the CPU time of every process involved (bench/saturation/)."""
