-- Whether the last run stopped cleanly: the edge sets running in a synced commit as it opens
-- the file and clears it as it closes. Found set at the next start, the last run crashed or
-- lost its power, and the embedded JetStream may have lost acknowledgements of jobs already
-- delivered: the edge then tells the workers that JOBS messages stored before this start may
-- be repeats (schema.KeyUncleanStart).
ALTER TABLE id_limits ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
