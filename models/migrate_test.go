package models_test

import (
	"context"
	"database/sql"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"studio/models"
	"studio/models/migrations"
	"studio/models/modelstest"
)

// TestMigrateFromTwoReplicasAtOnce starts two migrations of one empty PostgreSQL database together: the
// advisory lock lets one apply every step while the other waits and then finds nothing left to do.
func TestMigrateFromTwoReplicasAtOnce(t *testing.T) {
	modelstest.RequirePostgres(t)
	server := modelstest.PostgresURL()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("studio_migrate_%d", time.Now().UnixNano())
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	u, _ := url.Parse(server)
	u.Path = "/" + name
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			db, err := models.OpenDB(ctx, u.String())
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			errs[i] = models.Migrate(ctx, db)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	db, err := models.OpenDB(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkVersions(t, db)
}

// TestUpgradeEndsTheLoginsOfClaimedAccounts upgrades a database of version 4, where a redemption gave a
// login token for any e-mail (D8 as first written), to the current version: every login of an account a
// code was redeemed for ends (tokens and console sessions), and other accounts keep theirs.
func TestUpgradeEndsTheLoginsOfClaimedAccounts(t *testing.T) {
	ctx := context.Background()
	dbURL := modelstest.URLFor(t)
	open := func() *models.App {
		db, err := models.OpenDB(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := models.Migrate(ctx, db); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		app, err := models.NewApp(ctx, db, models.DefaultConfig(), models.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		return app
	}
	app := open()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	victim, bystander := newUser(t, app, 0), newUser(t, app, 0)
	var v models.User
	app.DB.Gorm.First(&v, "id = ?", victim.UserID)
	// Tokens issued at version 0 carry no version, as every token of version 4 did.
	victimToken, _, err := app.Auth().IssueUserToken(victim.UserID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bystanderToken, _, _ := app.Auth().IssueUserToken(bystander.UserID, time.Hour)
	session, err := app.Auth().StartUserSession(ctx, victim.UserID)
	if err != nil {
		t.Fatal(err)
	}
	code := newClaim(t, app, tenant, 1, platformTemplate(t, app, "poster"))
	if _, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: code.Code, Nickname: "x", Email: v.Email}, ""); err != nil {
		t.Fatal(err)
	}
	// Back to version 4 of the numbering before goose: without the columns and the step of version 5;
	// then the upgrade, as a restart.
	m := app.DB.Gorm.Migrator()
	if err := m.DropColumn(&models.User{}, "TokenVersion"); err != nil {
		t.Fatal(err)
	}
	if err := m.DropColumn(&models.EmailCode{}, "Attempts"); err != nil {
		t.Fatal(err)
	}
	if err := app.DB.Gorm.Exec("DELETE FROM schema_migrations WHERE version = 5").Error; err != nil {
		t.Fatal(err)
	}
	// Nor what goose's versions after 1 add.
	if err := app.DB.Gorm.Exec("DROP INDEX idx_jobs_runner").Error; err != nil {
		t.Fatal(err)
	}
	if err := m.DropColumn(&models.Job{}, "Runner"); err != nil {
		t.Fatal(err)
	}
	if err := m.DropTable(&models.JobRunner{}); err != nil {
		t.Fatal(err)
	}
	// A database of the numbering before goose has no goose table.
	if err := app.DB.Gorm.Exec("DROP TABLE goose_db_version").Error; err != nil {
		t.Fatal(err)
	}
	app.DB.Close()
	app = open()
	if _, err := app.Auth().ResolveIdentity(ctx, victimToken); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("a token of a claimed account after the upgrade: %v, want unauthenticated", err)
	}
	if _, err := app.Auth().SessionUser(ctx, session); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("a console session of a claimed account after the upgrade: %v, want unauthenticated", err)
	}
	if id, err := app.Auth().ResolveIdentity(ctx, bystanderToken); err != nil || id.UserID != bystander.UserID {
		t.Fatalf("another account's token after the upgrade: %v", err)
	}
}

// checkVersions asserts that goose applied each of its versions once and that schema_migrations records
// each step of the numbering before goose once.
func checkVersions(t *testing.T, db *models.DB) {
	t.Helper()
	var goose []int64
	if err := db.Gorm.Raw("SELECT version_id FROM goose_db_version WHERE version_id > 0 ORDER BY version_id").Scan(&goose).Error; err != nil {
		t.Fatal(err)
	}
	if want := gooseVersions(t, db.Dialect); !slices.Equal(goose, want) {
		t.Fatalf("goose_db_version = %v, want each of %v once", goose, want)
	}
	var legacy []int
	if err := db.Gorm.Raw("SELECT version FROM schema_migrations ORDER BY version").Scan(&legacy).Error; err != nil {
		t.Fatal(err)
	}
	if len(legacy) != migrations.LegacyLast || legacy[0] != 1 || legacy[len(legacy)-1] != migrations.LegacyLast {
		t.Fatalf("schema_migrations = %v, want each of the versions 1 to %d once", legacy, migrations.LegacyLast)
	}
}

// gooseVersions are the versions of the SQL files of a dialect, in order.
func gooseVersions(t *testing.T, dialect models.Dialect) []int64 {
	t.Helper()
	fsys, err := migrations.FS(string(dialect))
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, n := range names {
		var v int64
		if _, err := fmt.Sscanf(n, "%d_", &v); err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// dialects runs f for SQLite, and for PostgreSQL when TEST_DATABASE_URL names a server.
func dialects(t *testing.T, f func(t *testing.T, dialect models.Dialect)) {
	for _, d := range []models.Dialect{models.SQLite, models.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				modelstest.RequirePostgres(t)
			}
			f(t, d)
		})
	}
}

// emptyURL returns the URL of a new empty database (nothing migrated), removed when the test ends.
func emptyURL(t *testing.T, dialect models.Dialect) string {
	t.Helper()
	if dialect == models.SQLite {
		return "sqlite://" + filepath.Join(t.TempDir(), "studio.db")
	}
	server := modelstest.PostgresURL()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := fmt.Sprintf("studio_migrate_%d", time.Now().UnixNano())
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u, _ := url.Parse(server)
	u.Path = "/" + name
	return u.String()
}

func openURL(t *testing.T, dbURL string) *models.DB {
	t.Helper()
	db, err := models.OpenDB(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// releasedDB returns the URL of a database holding the schema (and the schema_migrations rows) of
// version k of the numbering before goose, as that release's own Migrate left it
// (testdata/released/dump.sh).
func releasedDB(t *testing.T, dialect models.Dialect, k int) string {
	t.Helper()
	fixture, err := os.ReadFile(fmt.Sprintf("testdata/released/v%d.%s.sql", k, dialect))
	if err != nil {
		t.Fatal(err)
	}
	dbURL := emptyURL(t, dialect)
	db, err := models.OpenDB(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.SQL.Exec(string(fixture)); err != nil {
		t.Fatalf("load v%d.%s.sql: %v", k, dialect, err)
	}
	return dbURL
}

// TestUpgradeFromEveryReleasedVersion installs a fresh database, and for each version of the numbering
// before goose loads the schema that release left and migrates it: every upgraded schema is the fresh one
// (tables, columns with their types, nullability and defaults, primary keys, indexes with their
// predicates, unique and foreign keys, sequences), with the same versions recorded.
func TestUpgradeFromEveryReleasedVersion(t *testing.T) {
	dialects(t, func(t *testing.T, dialect models.Dialect) {
		ctx := context.Background()
		fresh := openURL(t, emptyURL(t, dialect))
		if err := models.Migrate(ctx, fresh); err != nil {
			t.Fatalf("fresh: %v", err)
		}
		checkVersions(t, fresh)
		want := schemaOf(t, fresh)
		if len(want) < 100 {
			t.Fatalf("the fresh schema reads as %d lines: %q", len(want), want)
		}
		for k := 1; k <= migrations.LegacyLast; k++ {
			t.Run(fmt.Sprintf("v%d", k), func(t *testing.T) {
				db := openURL(t, releasedDB(t, dialect, k))
				if err := models.Migrate(ctx, db); err != nil {
					t.Fatalf("migrate: %v", err)
				}
				checkVersions(t, db)
				if diff := diffLines(want, schemaOf(t, db)); diff != "" {
					t.Fatalf("the schema upgraded from version %d is not the fresh one:\n%s", k, diff)
				}
			})
		}
	})
}

// TestFreshSchemaIsTheReleasedOne compares a fresh database with the schema that the last release before
// goose gave a fresh database (testdata/released/v7): version 1 is that schema, goose's table aside (what
// the versions after it add is compared by TestUpgradeFromEveryReleasedVersion).
func TestFreshSchemaIsTheReleasedOne(t *testing.T) {
	dialects(t, func(t *testing.T, dialect models.Dialect) {
		fresh := openURL(t, emptyURL(t, dialect))
		if err := models.MigrateTo(context.Background(), fresh, 1); err != nil {
			t.Fatal(err)
		}
		released := openURL(t, releasedDB(t, dialect, migrations.LegacyLast))
		var got []string
		for _, l := range schemaOf(t, fresh) {
			if !strings.Contains(l, "goose_db_version") && !strings.HasPrefix(l, "goose ") {
				got = append(got, l)
			}
		}
		if diff := diffLines(schemaOf(t, released), got); diff != "" {
			t.Fatalf("version 1 differs from the released schema:\n%s", diff)
		}
	})
}

// TestMigrateTwiceIsANoOp migrates a database again, fresh and upgraded: nothing changes, nothing is
// recorded.
func TestMigrateTwiceIsANoOp(t *testing.T) {
	dialects(t, func(t *testing.T, dialect models.Dialect) {
		ctx := context.Background()
		for _, from := range []string{"fresh", "v3"} {
			dbURL := emptyURL(t, dialect)
			if from == "v3" {
				dbURL = releasedDB(t, dialect, 3)
			}
			db := openURL(t, dbURL)
			if err := models.Migrate(ctx, db); err != nil {
				t.Fatalf("%s: %v", from, err)
			}
			schema, records := schemaOf(t, db), versionRows(t, db)
			if err := models.Migrate(ctx, db); err != nil {
				t.Fatalf("%s, again: %v", from, err)
			}
			if diff := diffLines(schema, schemaOf(t, db)); diff != "" {
				t.Fatalf("%s: the second Migrate changed the schema:\n%s", from, diff)
			}
			if diff := diffLines(records, versionRows(t, db)); diff != "" {
				t.Fatalf("%s: the second Migrate recorded versions:\n%s", from, diff)
			}
		}
	})
}

// TestUpgradeFromTwoReplicasAtOnce starts two migrations of a database of version 1 of the numbering
// before goose together: one hands it over while the other waits, and both succeed.
func TestUpgradeFromTwoReplicasAtOnce(t *testing.T) {
	modelstest.RequirePostgres(t)
	ctx := context.Background()
	dbURL := releasedDB(t, models.Postgres, 1)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			db, err := models.OpenDB(ctx, dbURL)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			errs[i] = models.Migrate(ctx, db)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	checkVersions(t, openURL(t, dbURL))
}

// TestMigrateRefusesAnUnknownNumbering: a schema_migrations that no release left (no version 1, or a
// version past the last one) stops the start instead of being guessed at.
func TestMigrateRefusesAnUnknownNumbering(t *testing.T) {
	ctx := context.Background()
	for _, stmt := range []string{
		"DELETE FROM schema_migrations WHERE version = 1",
		fmt.Sprintf("INSERT INTO schema_migrations (version, name) VALUES (%d, 'unknown')", migrations.LegacyLast+1),
	} {
		db := openURL(t, releasedDB(t, models.SQLite, 4))
		if err := db.Gorm.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
		if err := models.Migrate(ctx, db); err == nil || !strings.Contains(err.Error(), "not a database of a released version") {
			t.Fatalf("after %q: Migrate = %v, want a refusal", stmt, err)
		}
	}
}

// TestNothingAutoMigratesAtRunTime fails when a Go file of the module other than a test calls GORM's
// AutoMigrate: the schema is the SQL of models/migrations only.
func TestNothingAutoMigratesAtRunTime(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "AutoMigrate" {
				found = append(found, fset.Position(sel.Sel.Pos()).String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d Go files from %s: not the module", files, root)
	}
	if len(found) > 0 {
		t.Fatalf("AutoMigrate is called at run time (append a numbered SQL file to models/migrations instead):\n%s",
			strings.Join(found, "\n"))
	}
}

// versionRows are the records of both numberings (goose's when it has its table), without their times.
func versionRows(t *testing.T, db *models.DB) []string {
	t.Helper()
	var out []string
	var goose []struct {
		VersionID int64
		IsApplied bool
	}
	if db.Gorm.Migrator().HasTable("goose_db_version") {
		if err := db.Gorm.Raw("SELECT version_id, is_applied FROM goose_db_version ORDER BY id").Scan(&goose).Error; err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range goose {
		out = append(out, fmt.Sprintf("goose %d applied=%v", g.VersionID, g.IsApplied))
	}
	var legacy []struct {
		Version int
		Name    string
	}
	if err := db.Gorm.Raw("SELECT version, name FROM schema_migrations ORDER BY version").Scan(&legacy).Error; err != nil {
		t.Fatal(err)
	}
	for _, l := range legacy {
		out = append(out, fmt.Sprintf("schema_migrations %d %s", l.Version, l.Name))
	}
	return out
}

// schemaOf reads a database's schema as sorted lines: tables, columns (type, nullability, default),
// primary keys, indexes (columns, uniqueness, predicate), unique and foreign keys, and on PostgreSQL
// sequences and other constraints; the rows recording versions are added (versionRows). Column order
// is left out: a column added to a released table comes last there.
func schemaOf(t *testing.T, db *models.DB) []string {
	t.Helper()
	var out []string
	if db.Dialect == models.SQLite {
		out = sqliteSchema(t, db)
	} else {
		out = postgresSchema(t, db)
	}
	sort.Strings(out)
	return append(out, versionRows(t, db)...)
}

func sqliteSchema(t *testing.T, db *models.DB) []string {
	t.Helper()
	var objects []struct{ Type, Name, TblName, SQL string }
	err := db.Gorm.Raw("SELECT type, name, tbl_name, coalesce(sql, '') AS sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").
		Scan(&objects).Error
	if err != nil {
		t.Fatal(err)
	}
	indexSQL := map[string]string{}
	for _, o := range objects {
		if o.Type == "index" {
			indexSQL[o.Name] = o.SQL
		}
	}
	where := regexp.MustCompile(`(?is)\sWHERE\s(.*)$`)
	var out []string
	for _, o := range objects {
		switch o.Type {
		case "table":
		case "index":
			continue
		default:
			out = append(out, fmt.Sprintf("%s %s on %s: %s", o.Type, o.Name, o.TblName, normSpace(o.SQL)))
			continue
		}
		tbl := o.Name
		out = append(out, fmt.Sprintf("table %s autoincrement=%v", tbl, strings.Contains(strings.ToUpper(o.SQL), "AUTOINCREMENT")))
		var cols []struct {
			Name      string
			Type      string
			NotNull   int
			DfltValue sql.NullString
			PK        int
		}
		if err := db.Gorm.Raw(`SELECT name, type, "notnull" AS not_null, dflt_value, pk FROM pragma_table_info(?)`, tbl).Scan(&cols).Error; err != nil {
			t.Fatal(err)
		}
		pk := map[int]string{}
		for _, c := range cols {
			out = append(out, fmt.Sprintf("column %s.%s %s notnull=%d default=%s", tbl, c.Name, c.Type, c.NotNull, nullText(c.DfltValue)))
			if c.PK > 0 {
				pk[c.PK] = c.Name
			}
		}
		var pkCols []string
		for i := 1; i <= len(pk); i++ {
			pkCols = append(pkCols, pk[i])
		}
		out = append(out, fmt.Sprintf("primary key %s (%s)", tbl, strings.Join(pkCols, ", ")))
		var indexes []struct {
			Name    string
			Unique  int
			Origin  string
			Partial int
		}
		if err := db.Gorm.Raw("SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)", tbl).Scan(&indexes).Error; err != nil {
			t.Fatal(err)
		}
		for _, ix := range indexes {
			if ix.Origin == "pk" {
				continue
			}
			var cols []string
			if err := db.Gorm.Raw("SELECT name FROM pragma_index_info(?) ORDER BY seqno", ix.Name).Scan(&cols).Error; err != nil {
				t.Fatal(err)
			}
			pred := ""
			if m := where.FindStringSubmatch(indexSQL[ix.Name]); ix.Partial == 1 && m != nil {
				pred = " where " + normSpace(m[1])
			}
			out = append(out, fmt.Sprintf("index %s on %s (%s) unique=%d origin=%s%s", ix.Name, tbl, strings.Join(cols, ", "), ix.Unique, ix.Origin, pred))
		}
		var fks []struct {
			ID                            int
			Seq                           int
			Table, From, To               string
			OnUpdate, OnDelete, MatchRule string
		}
		if err := db.Gorm.Raw(`SELECT id, seq, "table", "from", "to", on_update, on_delete, "match" AS match_rule FROM pragma_foreign_key_list(?)`, tbl).Scan(&fks).Error; err != nil {
			t.Fatal(err)
		}
		for _, fk := range fks {
			out = append(out, fmt.Sprintf("foreign key %s #%d.%d (%s) references %s (%s) on update %s on delete %s match %s",
				tbl, fk.ID, fk.Seq, fk.From, fk.Table, fk.To, fk.OnUpdate, fk.OnDelete, fk.MatchRule))
		}
	}
	return out
}

func postgresSchema(t *testing.T, db *models.DB) []string {
	t.Helper()
	queries := []string{
		`SELECT 'table ' || c.relname || ' kind=' || c.relkind::text
		 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm')`,
		`SELECT 'column ' || c.table_name || '.' || c.column_name || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod) ||
		 ' nullable=' || c.is_nullable || ' default=' || coalesce(c.column_default, 'NULL') || ' identity=' || c.is_identity
		 FROM information_schema.columns c
		 JOIN pg_catalog.pg_attribute a ON a.attrelid = (quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))::regclass
		  AND a.attname = c.column_name
		 WHERE c.table_schema = current_schema()`,
		`SELECT 'constraint ' || c.relname || ' ' || con.conname || ' ' || con.contype::text || ': ' || pg_get_constraintdef(con.oid)
		 FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = current_schema()`,
		`SELECT 'index ' || tablename || ' ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()`,
		`SELECT 'sequence ' || sequencename || ' ' || data_type::text || ' start=' || start_value || ' increment=' || increment_by ||
		 ' min=' || min_value || ' max=' || max_value || ' cache=' || cache_size || ' cycle=' || cycle::text
		 FROM pg_sequences WHERE schemaname = current_schema()`,
		`SELECT 'sequence owner ' || s.relname || ' ' || t.relname || '.' || a.attname
		 FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
		 JOIN pg_class t ON t.oid = d.refobjid JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
		 JOIN pg_namespace n ON n.oid = s.relnamespace
		 WHERE n.nspname = current_schema() AND d.deptype IN ('a', 'i')`,
	}
	var out []string
	for _, q := range queries {
		var lines []string
		if err := db.Gorm.Raw(q).Scan(&lines).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, lines...)
	}
	return out
}

func nullText(s sql.NullString) string {
	if !s.Valid {
		return "NULL"
	}
	return s.String
}

func normSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// diffLines lists the lines only one side has; "" when they agree.
func diffLines(want, got []string) string {
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range got {
		count[l]--
	}
	var b strings.Builder
	for _, l := range want {
		if count[l] > 0 {
			fmt.Fprintf(&b, "- %s\n", l)
			count[l]--
		}
	}
	for _, l := range got {
		if count[l] < 0 {
			fmt.Fprintf(&b, "+ %s\n", l)
			count[l]++
		}
	}
	return b.String()
}

// TestEntitiesHaveTheirColumns checks the structs against the SQL, now that nothing derives one from the
// other: every table of an entity and every column of its fields exist in a fresh database.
func TestEntitiesHaveTheirColumns(t *testing.T) {
	db := modelstest.NewDB(t)
	m := db.Gorm.Migrator()
	for _, ent := range append(models.AllEntities(), &models.UpstreamTask{}, &models.Replica{}) {
		if !m.HasTable(ent) {
			t.Errorf("%T: no table", ent)
			continue
		}
		stmt := &gorm.Statement{DB: db.Gorm}
		if err := stmt.Parse(ent); err != nil {
			t.Fatal(err)
		}
		for _, f := range stmt.Schema.Fields {
			if f.DBName != "" && !m.HasColumn(ent, f.DBName) {
				t.Errorf("%T.%s: no column %s.%s", ent, f.Name, stmt.Schema.Table, f.DBName)
			}
		}
	}
}
