#!/usr/bin/env bash
# Rebuilds the fixtures of this folder: for each released version k of the old numbering (schema_migrations
# 1..7), the code of the last commit of main where k was the newest migration is built in a temporary
# worktree, its Migrate runs on a fresh SQLite file and a fresh PostgreSQL database, and the schema that
# results (with the rows of schema_migrations) is written as vK.sqlite.sql and vK.postgres.sql.
# The fixtures are frozen: this script documents where they came from and is not part of any build.
#
# Usage: models/testdata/released/dump.sh postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
set -euo pipefail
server=${1:?a PostgreSQL server URL}
out=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$out" rev-parse --show-toplevel)
# version=commit: the state just before the next migration was added (the last one: main when the
# migrations moved to goose).
commits=(1=c9174e6 2=73024bc 3=59ad4ca 4=54a51f4 5=90ef9cc 6=3643fb4 7=ae2c434)
tmp=$(mktemp -d)
trap 'for d in "$tmp"/wt-*; do [ -d "$d" ] && git -C "$repo" worktree remove --force "$d"; done; rm -rf "$tmp"' EXIT
base=${server%%\?*}; base=${base%/*}; query=${server#"${server%%\?*}"}
for kv in "${commits[@]}"; do
	k=${kv%%=*} commit=${kv#*=}
	wt=$tmp/wt-$k
	git -C "$repo" worktree add --detach --quiet "$wt" "$commit"
	mkdir -p "$wt/cmd/released-schema"
	cat >"$wt/cmd/released-schema/main.go" <<'GO'
package main

import (
	"context"
	"log"
	"os"

	"studio/models"
)

func main() {
	ctx := context.Background()
	db, err := models.OpenDB(ctx, os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := models.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
}
GO
	(cd "$wt" && go build -mod=mod -o "$tmp/migrate-$k" ./cmd/released-schema)

	lite=$tmp/v$k.db
	"$tmp/migrate-$k" "sqlite://$lite"
	{
		echo "-- Schema of a SQLite database migrated to version $k of schema_migrations by commit $commit."
		sqlite3 "$lite" "SELECT sql || ';' FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
		sqlite3 "$lite" ".mode insert schema_migrations" "SELECT * FROM schema_migrations ORDER BY version"
	} >"$out/v$k.sqlite.sql"

	name=studio_released_v$k
	psql -q "$server" -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name"
	"$tmp/migrate-$k" "$base/$name$query"
	{
		echo "-- Schema of a PostgreSQL database migrated to version $k of schema_migrations by commit $commit."
		pg_dump --schema-only --no-owner --no-privileges --no-comments "$base/$name$query"
		pg_dump --data-only --inserts --table=schema_migrations "$base/$name$query"
	} | grep -v -E '^(\\|SET |SELECT pg_catalog.set_config|--)' | cat -s |
		# pg_dump writes the predicate of idx_video_tasks_open (status IN (...) on a varchar) in a form
		# that PostgreSQL parses into another expression than the one it printed; the release created the
		# index with the statement put back here, which reads back as the release's database does.
		sed -E "s/^(CREATE INDEX idx_video_tasks_open ON public.video_tasks USING btree \(created_at\)) WHERE .*;$/\1 WHERE status IN ('pending', 'running');/" \
			>"$out/v$k.postgres.sql"
	psql -q "$server" -c "DROP DATABASE $name"
done
