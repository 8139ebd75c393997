#!/usr/bin/env bash
# First start of the primary: let the replica stream (pg_basebackup and WAL) as the conduit user.
set -euo pipefail
echo "host replication conduit all scram-sha-256" >> "$PGDATA/pg_hba.conf"
