#!/bin/bash
# Run once by the postgres image on its first start (docker-entrypoint-initdb.d): a role the
# standbys stream as, allowed to connect for replication from the compose network.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v password="$UDA_REPLICATION_PASSWORD" <<-'SQL'
	CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
