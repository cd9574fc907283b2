package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/cmd/server"
	"studio/models"
	"studio/models/modelstest"
)

func TestMain(m *testing.M) { modelstest.Main(m) }

// TestAReplicaStaysWithinItsConnectionBudget starts a whole replica (requests, workers, queue,
// listeners) on PostgreSQL with pool settings in DATABASE_URL, drives concurrent requests and jobs,
// and counts the replica's connections in pg_stat_activity: never more than the budget.
func TestAReplicaStaysWithinItsConnectionBudget(t *testing.T) {
	modelstest.RequirePostgres(t)
	for _, c := range []struct {
		name    string
		query   string // added to DATABASE_URL
		setting string // SERVICE_DB_MAX_CONNS
		budget  int
	}{
		{"pool_max_conns in the URL", "pool_max_conns=12&pool_max_conn_idle_time=1m", "", 12},
		{"the setting", "", "14", 14},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbURL := modelstest.URLFor(t)
			if c.query != "" {
				dbURL += "&" + c.query
			}
			vars := map[string]string{"DATABASE_URL": dbURL, "SERVICE_ADMIN_KEY": models.NewAPIKey(), "SERVICE_DATA_DIR": t.TempDir()}
			if c.setting != "" {
				vars["SERVICE_DB_MAX_CONNS"] = c.setting
			}
			cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			svc, err := server.Open(ctx, cfg, server.Options{})
			if err != nil {
				t.Fatalf("open with %s: %v", c.name, err)
			}
			defer svc.Close()
			if svc.DB.Conns.Total != c.budget {
				t.Fatalf("budget %+v, want %d", svc.DB.Conns, c.budget)
			}
			srv := httptest.NewServer(svc.Handler(server.Options{}))
			defer srv.Close()
			if err := svc.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = svc.Stop(context.Background()) }()

			call := func(method, path, key, body string) (int, map[string]any) {
				req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
				req.Header.Set("X-API-Key", key)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return 0, nil
				}
				defer res.Body.Close()
				var out map[string]any
				_ = json.NewDecoder(res.Body).Decode(&out)
				return res.StatusCode, out
			}
			status, created := call("POST", "/api/admin", vars["SERVICE_ADMIN_KEY"], `{"action":"tenant-create","name":"Acme","credits":100000}`)
			if status != 200 {
				t.Fatalf("tenant: %d %v", status, created)
			}
			key := created["api_key"].(string)

			admin, err := sql.Open("pgx", modelstest.PostgresURL())
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			var dbName string
			if err := svc.DB.Gorm.Raw("SELECT current_database()").Scan(&dbName).Error; err != nil {
				t.Fatal(err)
			}
			peak := 0
			count := func() {
				var n int
				if err := admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'", dbName).Scan(&n); err == nil && n > peak {
					peak = n
				}
			}
			var wg sync.WaitGroup
			for i := range 60 {
				wg.Go(func() {
					for j := range 10 {
						if (i+j)%3 == 0 {
							call("POST", "/api/generate", key, fmt.Sprintf(`{"prompt":"load %d %d"}`, i, j))
						} else {
							call("GET", "/api/jobs?limit=5", key, "")
						}
					}
				})
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			for {
				count()
				select {
				case <-done:
					count()
					if peak == 0 || peak > c.budget {
						t.Fatalf("the replica held up to %d connections, budget %d", peak, c.budget)
					}
					t.Logf("peak %d connections of a budget of %d (%+v)", peak, c.budget, svc.DB.Conns)
					return
				default:
				}
			}
		})
	}
}

func TestSplitConnsGivesEveryPoolItsShare(t *testing.T) {
	for _, total := range []int{models.MinMaxConns, 14, models.DefaultMaxConns, 100} {
		b, err := models.SplitConns(total)
		if err != nil || b.Requests < 3 || b.Queue < 3 || b.Work < 2 || b.Listen != 2 || b.Requests+b.Queue+b.Work+b.Listen != total {
			t.Errorf("SplitConns(%d) = %+v, %v", total, b, err)
		}
	}
	if _, err := models.SplitConns(models.MinMaxConns - 1); err == nil || !strings.Contains(err.Error(), "SERVICE_DB_MAX_CONNS") {
		t.Errorf("a budget below the minimum: %v, want an error naming the setting", err)
	}
	if 3*models.DefaultMaxConns > 100-3-5 {
		t.Errorf("three replicas at the default (%d) do not fit PostgreSQL's default 100 with room for administration", models.DefaultMaxConns)
	}
}
