-- Distribute the service's schema by tenant, on the Citus coordinator, as superuser, after
-- `rag migrate` has created it (docker-compose.citus.yml runs this once; docs/operations.md,
-- "Sharding by tenant on Citus", explains each step and how to do it for an existing database).
--
-- Tenant-owned tables become distributed tables on tenant_id, all co-located, so every row of
-- one tenant (its collections, documents, chunks, keyword statistics and postings, jobs) lives
-- in the same shard group and a tenant's statements, joins and foreign keys stay on one node.
-- The tenant registry is a reference table (a copy on every node, so foreign keys to it hold
-- everywhere); the admin tables without tenant content stay on the coordinator.

\set ON_ERROR_STOP on

-- Idempotent: a second run (compose restarted) finds chunks distributed and changes nothing.
SELECT EXISTS (
  SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'chunks'::regclass
) AS already_distributed \gset
\if :already_distributed
  \echo 'already distributed'
  \quit
\endif

BEGIN;

-- 1. Primary keys and unique constraints must contain the distribution column (Citus checks
--    uniqueness per shard). Every foreign key between these tables already includes tenant_id.
ALTER TABLE collections DROP CONSTRAINT pk_collections,
  ADD CONSTRAINT pk_collections PRIMARY KEY (tenant_id, id);
ALTER TABLE documents DROP CONSTRAINT pk_documents,
  ADD CONSTRAINT pk_documents PRIMARY KEY (tenant_id, id);
ALTER TABLE chunks DROP CONSTRAINT pk_chunks,
  ADD CONSTRAINT pk_chunks PRIMARY KEY (tenant_id, id);
ALTER TABLE chunks DROP CONSTRAINT uq_chunks_document_id_chunk_index,
  ADD CONSTRAINT uq_chunks_document_id_chunk_index UNIQUE (tenant_id, document_id, chunk_index);
ALTER TABLE ingest_jobs DROP CONSTRAINT pk_ingest_jobs,
  ADD CONSTRAINT pk_ingest_jobs PRIMARY KEY (tenant_id, id);
ALTER TABLE ingest_job_inputs DROP CONSTRAINT pk_ingest_job_inputs,
  ADD CONSTRAINT pk_ingest_job_inputs PRIMARY KEY (tenant_id, id);
ALTER TABLE ingest_job_inputs DROP CONSTRAINT uq_ingest_job_inputs_job_id_position,
  ADD CONSTRAINT uq_ingest_job_inputs_job_id_position UNIQUE (tenant_id, job_id, position);

COMMIT;

-- 2. The registry on every node; then the tenant-owned tables, parents first, co-located.
--    Existing rows are copied into the shards (for a large database see docs/operations.md).
--    Indexes (the HNSW graph, GIN, btree), RLS policies and grants are created on each shard.
SELECT create_reference_table('tenants');
SELECT create_distributed_table('collections', 'tenant_id');
SELECT create_distributed_table('documents', 'tenant_id', colocate_with => 'collections');
SELECT create_distributed_table('chunks', 'tenant_id', colocate_with => 'collections');
SELECT create_distributed_table('bm25_corpus', 'tenant_id', colocate_with => 'collections');
SELECT create_distributed_table('bm25_terms', 'tenant_id', colocate_with => 'collections');
SELECT create_distributed_table('bm25_postings', 'tenant_id', colocate_with => 'collections');
SELECT create_distributed_table('ingest_jobs', 'tenant_id', colocate_with => 'collections');
SELECT create_distributed_table('ingest_job_inputs', 'tenant_id', colocate_with => 'collections');

-- 3. Rows copied in by create_distributed_table stay in the coordinator's local tables until
--    they are truncated: reclaim the space.
SELECT truncate_local_data_after_distributing_table(t)
  FROM unnest(ARRAY['collections', 'documents', 'chunks', 'bm25_corpus', 'bm25_terms',
                    'bm25_postings', 'ingest_jobs', 'ingest_job_inputs']) AS t;

-- 4. What the service's role needs to find on the workers: its login (roles are propagated by
--    Citus) and its grants on the shards. Checked, not assumed:
SELECT nodename, success, result
  FROM run_command_on_workers($$SELECT count(*) FROM pg_roles WHERE rolname = 'rag_app'$$);
SELECT logicalrelid, partmethod, colocationid FROM pg_dist_partition ORDER BY logicalrelid::text;
