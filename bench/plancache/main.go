// Command plancache measures GET /api/jobs?limit=20 and GET /api/jobs?id= right after a tenant's jobs
// grow from a few rows to -jobs rows, before PostgreSQL has analysed the table again. Beside the service,
// the same two statements run as cached prepared statements on a connection of their own (pgx's default,
// which is how studio ran every read before): that is the figure before the fix.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/cmd/server"
	"studio/models"
)

func main() {
	dbFlag := flag.String("db", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "a postgres:// server URL (a fresh database is created on it per run)")
	n := flag.Int("jobs", 100000, "jobs the tenant has when measuring")
	reqs := flag.Int("requests", 300, "requests of each kind measured")
	flag.Parse()
	if err := run(*dbFlag, *n, *reqs); err != nil {
		fmt.Fprintln(os.Stderr, "plancache:", err)
		os.Exit(1)
	}
}

func run(server0 string, n, reqs int) error {
	ctx := context.Background()
	name := fmt.Sprintf("studio_plancache_%d", time.Now().UnixNano())
	admin, err := sql.Open("pgx", server0)
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		return err
	}
	defer func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") }()
	u, _ := url.Parse(server0)
	u.Path = "/" + name
	dir, err := os.MkdirTemp("", "plancache")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	adminKey := models.NewAPIKey()
	vars := map[string]string{"SERVICE_ADDR": ln.Addr().String(), "DATABASE_URL": u.String(), "SERVICE_DATA_DIR": dir,
		"SERVICE_ADMIN_KEY": adminKey, "SERVICE_GENERATE_RATE": "100000000"}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
	if err != nil {
		return err
	}
	svc, err := server.Open(ctx, cfg, server.Options{})
	if err != nil {
		return err
	}
	defer svc.Close()
	srv := &http.Server{Handler: svc.Handler(server.Options{})}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	call := func(method, path, key string, body any) (int, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("X-API-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			return res.StatusCode, out, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, out)
		}
		return res.StatusCode, out, nil
	}
	_, out, err := call("POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Plans", "credits": 1000})
	if err != nil {
		return err
	}
	var created struct {
		APIKey string `json:"api_key"`
		Tenant struct{ ID string }
	}
	_ = json.Unmarshal(out, &created)
	key := created.APIKey
	// A small tenant: a few jobs, listed and read often enough for plans to be cached (PostgreSQL
	// considers a generic plan from the sixth execution of a prepared statement).
	var first string
	for i := 0; i < 5; i++ {
		_, out, err := call("POST", "/api/generate", key, map[string]any{"prompt": fmt.Sprintf("job %d", i)})
		if err != nil {
			return err
		}
		var j struct{ JobID string }
		_ = json.Unmarshal(out, &j)
		first = j.JobID
	}
	// Autovacuum analyses a table after its first 50 changes: the planner then knows it as small.
	// Autovacuum is off for the table (an ALTER TABLE later would drop cached plans), so that nothing but
	// the statements measured runs on it.
	db := svc.DB.Gorm
	if err := db.Exec("ALTER TABLE jobs SET (autovacuum_enabled = false)").Error; err != nil {
		return err
	}
	if err := db.Exec("ANALYZE jobs").Error; err != nil {
		return err
	}
	// The statements of the service's two reads, as GORM sends them, on a connection that caches them.
	cached, err := sql.Open("pgx", u.String())
	if err != nil {
		return err
	}
	defer cached.Close()
	cached.SetMaxOpenConns(1)
	direct := func(ids []string, n int) [2]stats {
		return measureWith(n, func(k, i int) error {
			var rows *sql.Rows
			var err error
			if k == 0 {
				rows, err = cached.Query(`SELECT * FROM "jobs" WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT 21`, created.Tenant.ID)
			} else {
				rows, err = cached.Query(`SELECT * FROM "jobs" WHERE tenant_id = $1 AND id = $2 ORDER BY "jobs"."id" LIMIT 1`, created.Tenant.ID, ids[i%len(ids)])
			}
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			return rows.Close()
		})
	}
	small := measure(call, key, []string{first}, 50)
	smallDirect := direct([]string{first}, 50)
	// Growth without an ANALYZE in between (as between two autovacuum runs): copies of one job.
	var cols []string
	if err := db.Raw(`SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()
		AND table_name = 'jobs' AND column_name NOT IN ('id', 'created_at') ORDER BY ordinal_position`).Scan(&cols).Error; err != nil {
		return err
	}
	list := strings.Join(cols, ", ")
	start := time.Now()
	if err := db.Exec(fmt.Sprintf(`INSERT INTO jobs (id, created_at, %s) SELECT gen_random_uuid()::text,
		created_at - g * interval '1 second', %s FROM jobs, generate_series(1, ?) g WHERE id = ?`, list, list), n-5, first).Error; err != nil {
		return err
	}
	var ids []string
	if err := db.Raw("SELECT id FROM jobs ORDER BY random() LIMIT ?", reqs).Scan(&ids).Error; err != nil {
		return err
	}
	var total int64
	db.Raw("SELECT count(*) FROM jobs WHERE tenant_id = ?", created.Tenant.ID).Scan(&total)
	fmt.Printf("seeded %d jobs in %s (the table was analysed at 5 jobs, not since)\n", total, time.Since(start).Round(time.Millisecond))
	largeDirect := direct(ids, reqs)
	large := measure(call, key, ids, reqs)
	fmt.Printf("\n%-44s %-30s %s\n", "", "list (limit 20)", "get (by id)")
	fmt.Printf("%-44s %-30s %s\n", "before: cached prepared statements, 5 jobs", smallDirect[0], smallDirect[1])
	fmt.Printf("%-44s %-30s %s\n", fmt.Sprintf("before: cached prepared statements, %d", total), largeDirect[0], largeDirect[1])
	fmt.Printf("%-44s %-30s %s\n", "studio, GET /api/jobs, 5 jobs", small[0], small[1])
	fmt.Printf("%-44s %-30s %s\n", fmt.Sprintf("studio, GET /api/jobs, %d jobs", total), large[0], large[1])
	ok := large[0].p50 < 2*time.Millisecond && large[1].p50 < 2*time.Millisecond
	fmt.Printf("  target (p50 under 2 ms at %d jobs without ANALYZE): %v\n", total, map[bool]string{true: "met", false: "NOT met"}[ok])
	return nil
}

type stats struct{ p50, p99, mean time.Duration }

func (s stats) String() string {
	return fmt.Sprintf("p50 %6.2f ms  p99 %6.2f ms", ms(s.p50), ms(s.p99))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// measure times GET /api/jobs?limit=20 and GET /api/jobs?id= (ids in turn), n of each, one at a time.
func measure(call func(method, path, key string, body any) (int, []byte, error), key string, ids []string, n int) [2]stats {
	return measureWith(n, func(k, i int) error {
		path := "/api/jobs?limit=20"
		if k == 1 {
			path = "/api/jobs?id=" + ids[i%len(ids)]
		}
		_, _, err := call("GET", path, key, nil)
		return err
	})
}

// measureWith times n runs of each of the two reads (k = 0 list, 1 get), one at a time.
func measureWith(n int, do func(k, i int) error) [2]stats {
	var out [2]stats
	for k := range 2 {
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			t0 := time.Now()
			if err := do(k, i); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		out[k] = stats{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], mean: sum / time.Duration(len(lat))}
	}
	return out
}
