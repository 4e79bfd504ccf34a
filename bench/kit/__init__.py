"""What the benchmarks share: a throwaway migrated database (database), NFCorpus and the model's
vectors (corpus), synthetic tenants (synthetic), a live `rag serve` (server), embedders that
return known vectors (stubs), ingestion stages (ingestion), statistics (stats) and reports
(report)."""
