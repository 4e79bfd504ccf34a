"""Benchmarks of the service, beside its alternatives. Each runs as `python -m bench.<name>`;
`python -m bench` is the suite beside the peers (docs/BENCHMARKS.md). What they share (the
throwaway database, NFCorpus and synthetic tenants, the live server, stub embedders,
statistics and reports) is in bench.kit; no benchmark imports another."""
