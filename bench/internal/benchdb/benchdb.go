// Package benchdb gives each benchmark a fresh database: a SQLite file in the run's directory, or a new
// database on the PostgreSQL server of a postgres:// URL, dropped afterwards.
package benchdb

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver of the administration connection

	"studio/models"
)

// Fresh returns the DATABASE_URL of a new database for -db dbFlag ("sqlite" or a postgres:// server
// URL, pool settings allowed) and a function that drops it; name prefixes the PostgreSQL database.
func Fresh(dbFlag, dir, name string) (string, func(), error) {
	if dbFlag == "sqlite" {
		return "sqlite://" + filepath.Join(dir, "studio.db"), func() {}, nil
	}
	if !strings.HasPrefix(dbFlag, "postgres") {
		return "", nil, errors.New("-db: sqlite or a postgres:// URL")
	}
	db := fmt.Sprintf("%s_%d", name, time.Now().UnixNano())
	admin, err := sql.Open("pgx", models.PoolURL(dbFlag)) // the admin connection takes no pool settings
	if err != nil {
		return "", nil, err
	}
	if _, err := admin.Exec("CREATE DATABASE " + db); err != nil {
		admin.Close()
		return "", nil, err
	}
	u, _ := url.Parse(dbFlag)
	u.Path = "/" + db
	return u.String(), func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)")
		admin.Close()
	}, nil
}
