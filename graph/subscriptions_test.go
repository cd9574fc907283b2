package graph_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/graph"
	"studio/jobs/events"
	"studio/models"
	"studio/models/modelstest"
)

const generateMutation = `mutation($input: GenerateInput!) { generate(input: $input) { jobId status } }`

const progressSubscription = `subscription($id: ID!) {
  jobProgress(id: $id) { jobId status progress steps { name status } cdnUrl error updatedAt }
}`

// generate submits a prompt over GraphQL and returns the job id.
func (e *env) generate(key string, input map[string]any) string {
	e.t.Helper()
	d := e.gql(key, generateMutation, map[string]any{"input": input}).must(e.t)
	job := d["generate"].(map[string]any)
	if job["status"] != "pending" || job["jobId"] == "" {
		e.t.Fatalf("generate = %v", job)
	}
	return job["jobId"].(string)
}

// checkProgress asserts the states a jobProgress stream went through: pending first, the fallback note,
// and done with a result link last.
func checkProgress(t *testing.T, states []map[string]any) {
	t.Helper()
	if len(states) < 2 {
		t.Fatalf("got %d states, want at least pending and done: %v", len(states), states)
	}
	job := func(i int) map[string]any { return states[i]["jobProgress"].(map[string]any) }
	if s := job(0)["status"]; s != "pending" {
		t.Fatalf("first state %v, want pending (the current state)", job(0))
	}
	sawNote := false
	for i := range states {
		if strings.HasPrefix(job(i)["progress"].(string), "upstream failed, switching to backup channel (") {
			sawNote = true
			if job(i)["status"] != "pending" {
				t.Fatalf("note on a %v job", job(i)["status"])
			}
		}
	}
	if !sawNote {
		t.Fatalf("the switch to a backup channel was never pushed: %v", states)
	}
	last := job(len(states) - 1)
	if last["status"] != "done" || !strings.HasPrefix(last["cdnUrl"].(string), "http") || last["error"] != nil {
		t.Fatalf("last state %v, want done with a cdnUrl", last)
	}
	for i := 1; i < len(states); i++ {
		prev, cur := job(i-1), job(i)
		if cur["updatedAt"].(string) < prev["updatedAt"].(string) {
			t.Fatalf("states out of order: %v then %v", prev, cur)
		}
	}
}

func TestGenerateThenJobProgress(t *testing.T) {
	for _, proto := range []string{transportWS, legacyWS} {
		t.Run(proto, func(t *testing.T) {
			e := newEnv(t, upstreams(t, 300*time.Millisecond, true))
			_, key := e.tenant("Acme", 10)
			jobID := e.generate(key, map[string]any{"prompt": "a red fox", "model": "gen2"})

			c := dial(t, e.srv.URL, proto, nil)
			c.mustInit(map[string]any{"X-API-Key": key})
			c.subscribe("1", progressSubscription, map[string]any{"id": jobID})
			states := c.collect("1", 20*time.Second)
			checkProgress(t, states)
			for _, leak := range []string{"img-a", "img-b", "prov-", "model-img", "a red fox"} {
				raw, _ := json.Marshal(states)
				if strings.Contains(string(raw), leak) {
					t.Fatalf("subscription leaks %q: %s", leak, raw)
				}
			}
			// Following a job that already ended sends its final state and completes at once.
			c.subscribe("2", progressSubscription, map[string]any{"id": jobID})
			again := c.collect("2", 5*time.Second)
			if len(again) != 1 || again[0]["jobProgress"].(map[string]any)["status"] != "done" {
				t.Fatalf("ended job stream = %v, want one done state", again)
			}
		})
	}
}

func TestJobProgressOfAnotherTenantsJobIsNotFound(t *testing.T) {
	e := newEnv(t, upstreams(t, 50*time.Millisecond, false))
	_, keyA := e.tenant("A", 10)
	_, keyB := e.tenant("B", 10)
	jobID := e.generate(keyA, map[string]any{"prompt": "x"})
	c := dial(t, e.srv.URL, transportWS, nil)
	c.mustInit(map[string]any{"apiKey": keyB})
	c.subscribe("1", progressSubscription, map[string]any{"id": jobID})
	m, ok := c.next(5 * time.Second)
	if !ok || m.Type == "complete" || !strings.Contains(string(m.Payload), `"code":"NOT_FOUND"`) || strings.Contains(string(m.Payload), jobID) {
		t.Fatalf("got %s %s, want an error NOT_FOUND", m.Type, m.Payload)
	}
}

func TestJobsSubscriptionSeesOnlyTheCallersJobs(t *testing.T) {
	e := newEnv(t, upstreams(t, 50*time.Millisecond, false))
	_, keyA := e.tenant("A", 10)
	_, keyB := e.tenant("B", 10)
	c := dial(t, e.srv.URL, transportWS, nil)
	c.mustInit(map[string]any{"Authorization": "Bearer " + keyA})
	c.subscribe("all", `subscription { jobs { jobId status cdnUrl } }`, nil)
	time.Sleep(100 * time.Millisecond) // the subscription is registered before the jobs change
	mine := e.generate(keyA, map[string]any{"prompt": "mine"})
	other := e.generate(keyB, map[string]any{"prompt": "theirs"})
	deadline := time.Now().Add(15 * time.Second)
	for {
		m, ok := c.next(time.Until(deadline))
		if !ok {
			t.Fatalf("no done event for the caller's job %s", mine)
		}
		if !isData(m) {
			t.Fatalf("unexpected %s %s", m.Type, m.Payload)
		}
		var p struct {
			Data struct {
				Jobs map[string]any `json:"jobs"`
			} `json:"data"`
		}
		_ = json.Unmarshal(m.Payload, &p)
		switch p.Data.Jobs["jobId"] {
		case other:
			t.Fatalf("tenant A was told about tenant B's job: %s", m.Payload)
		case mine:
			if p.Data.Jobs["status"] == "done" {
				return
			}
		}
	}
}

func TestConnectionInitAuthentication(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 1)
	refused := []struct {
		name    string
		payload map[string]any
		code    int
	}{
		{"no credential", map[string]any{}, 4401},
		{"unknown key", map[string]any{"X-API-Key": "sk-studio-AAAAAAAAAAAAAAAAAAAAAAAA"}, 4401},
		{"malformed bearer", map[string]any{"Authorization": "Bearer nonsense"}, 4401},
		{"administrator key", map[string]any{"apiKey": e.adminKey}, 4403},
	}
	for _, c := range refused {
		t.Run("graphql-transport-ws/"+c.name, func(t *testing.T) {
			ws := dial(t, e.srv.URL, transportWS, nil)
			if m, ok := ws.init(c.payload); ok {
				t.Fatalf("got %s %s, want the connection closed", m.Type, m.Payload)
			}
			if code := ws.waitClosed(5 * time.Second); code != c.code {
				t.Fatalf("close code %d (%q), want %d", code, ws.closeText, c.code)
			}
		})
		t.Run("graphql-ws/"+c.name, func(t *testing.T) {
			ws := dial(t, e.srv.URL, legacyWS, nil)
			m, ok := ws.init(c.payload)
			if !ok || m.Type != "connection_error" {
				t.Fatalf("got %+v, want connection_error", m)
			}
			if code := ws.waitClosed(5 * time.Second); code != c.code {
				t.Fatalf("close code %d, want %d", code, c.code)
			}
		})
	}
	accepted := []struct {
		name    string
		payload map[string]any
		header  http.Header
	}{
		{"X-API-Key", map[string]any{"X-API-Key": key}, nil},
		{"Authorization", map[string]any{"Authorization": "Bearer " + key}, nil},
		{"apiKey", map[string]any{"apiKey": key}, nil},
		{"upgrade request header", nil, http.Header{"X-Api-Key": {key}}},
	}
	for _, c := range accepted {
		t.Run("accepted/"+c.name, func(t *testing.T) {
			ws := dial(t, e.srv.URL, transportWS, c.header)
			ws.mustInit(c.payload)
		})
	}
	t.Run("subscribe before init", func(t *testing.T) {
		ws := dial(t, e.srv.URL, transportWS, nil)
		ws.subscribe("1", `subscription { jobs { jobId } }`, nil)
		if code := ws.waitClosed(5 * time.Second); code != 4401 {
			t.Fatalf("close code %d, want 4401", code)
		}
	})
	t.Run("second init", func(t *testing.T) {
		ws := dial(t, e.srv.URL, transportWS, nil)
		ws.mustInit(map[string]any{"X-API-Key": key})
		ws.init(map[string]any{"X-API-Key": key})
		if code := ws.waitClosed(5 * time.Second); code != 4429 {
			t.Fatalf("close code %d, want 4429", code)
		}
	})
	t.Run("no init in time", func(t *testing.T) {
		srv := httptest.NewServer(graph.NewHandler(e.svc.Jobs.App, graph.Options{InitTimeout: 200 * time.Millisecond}))
		defer srv.Close()
		ws := dial(t, srv.URL, transportWS, nil)
		if code := ws.waitClosed(5 * time.Second); code != 4408 {
			t.Fatalf("close code %d, want 4408", code)
		}
	})
}

// TestSubscriberOnAnotherReplica runs two replicas on one PostgreSQL database: the job runs on the
// worker replica, the subscriber is connected to the other one, and the events cross over
// LISTEN/NOTIFY. It then kills the listener's connection and checks the next job still arrives.
func TestSubscriberOnAnotherReplica(t *testing.T) {
	modelstest.RequirePostgres(t)
	dbURL := modelstest.URLFor(t)
	adminKey := models.NewAPIKey()
	worker := newEnv(t, onDatabase(dbURL, adminKey), upstreams(t, 300*time.Millisecond, true))
	front := newEnv(t, onDatabase(dbURL, adminKey), withoutWorkers, upstreams(t, 0, false))
	waitListening(t, worker, front)
	_, key := worker.tenant("Acme", 10)

	jobID := front.generate(key, map[string]any{"prompt": "a red fox", "model": "gen2"})
	c := dial(t, front.srv.URL, transportWS, nil)
	c.mustInit(map[string]any{"X-API-Key": key})
	c.subscribe("1", progressSubscription, map[string]any{"id": jobID})
	checkProgress(t, c.collect("1", 20*time.Second))

	// Lose the listeners' connections: they reconnect, and a change made meanwhile still arrives.
	second := front.generate(key, map[string]any{"prompt": "again", "model": "gen2"})
	c.subscribe("2", progressSubscription, map[string]any{"id": second})
	first, ok := c.next(5 * time.Second)
	if !ok || !isData(first) {
		t.Fatalf("no first state: %+v", first)
	}
	admin, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, events.ListenerName); err != nil {
		t.Fatal(err)
	}
	var done bool
	deadline := time.Now().Add(20 * time.Second)
	for !done {
		m, ok := c.next(time.Until(deadline))
		if !ok {
			t.Fatalf("the job's end never crossed to the other replica after the listener reconnected")
		}
		if m.ID == "2" && m.Type == "complete" {
			done = true
		}
		if m.ID == "2" && isData(m) && strings.Contains(string(m.Payload), `"done"`) {
			done = true
		}
	}
}

// waitListening waits until the PostgreSQL listener of every replica is connected.
func waitListening(t *testing.T, envs ...*env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, e := range envs {
		for !e.svc.Events.Listening() {
			if time.Now().After(deadline) {
				t.Fatalf("the event listener did not connect")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestKeepAlive(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 1)
	srv := httptest.NewServer(graph.NewHandler(e.svc.Jobs.App, graph.Options{KeepAlive: 100 * time.Millisecond}))
	defer srv.Close()

	t.Run("a client that answers pings stays", func(t *testing.T) {
		c := dial(t, srv.URL, transportWS, nil)
		c.mustInit(map[string]any{"X-API-Key": key})
		time.Sleep(700 * time.Millisecond)
		c.send(wsMsg{Type: "ping"})
		if m, ok := c.next(2 * time.Second); ok || m.Type != "" {
			t.Fatalf("unexpected %s %s", m.Type, m.Payload)
		}
		select {
		case <-c.done:
			t.Fatalf("closed (%d) although it answered every ping", c.closeCode)
		default:
		}
	})
	t.Run("graphql-ws gets ka messages", func(t *testing.T) {
		c := dial(t, srv.URL, legacyWS, nil)
		c.mustInit(map[string]any{"X-API-Key": key})
		time.Sleep(500 * time.Millisecond)
		if n := c.keepAlive.Load(); n < 3 {
			t.Fatalf("%d ka messages in 500 ms, want one per 100 ms", n)
		}
	})
	t.Run("a client that does not answer pings is closed", func(t *testing.T) {
		c := dial(t, srv.URL, transportWS, nil)
		c.conn.SetPingHandler(func(string) error { return nil }) // never pongs
		c.mustInit(map[string]any{"X-API-Key": key})
		start := time.Now()
		c.waitClosed(20 * time.Second)
		if waited := time.Since(start); waited > 15*time.Second {
			t.Fatalf("closed after %s", waited)
		}
	})
}

func TestReplacedKeyStopsNewOperationsOnAnOpenConnection(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 1)
	member := e.member(key, "m@example.com")
	c := dial(t, e.srv.URL, transportWS, nil)
	c.mustInit(map[string]any{"X-API-Key": member})
	accounts := e.gql(key, `{ accounts { id } }`, nil).must(t)["accounts"].([]any)
	e.gql(key, `mutation($id: ID!) { rekeyAccount(accountId: $id) { apiKey } }`, map[string]any{"id": accounts[0].(map[string]any)["id"]}).must(t)
	c.subscribe("1", `subscription { jobs { jobId } }`, nil)
	m, ok := c.next(5 * time.Second)
	if !ok || !strings.Contains(string(m.Payload), `"code":"UNAUTHENTICATED"`) {
		t.Fatalf("subscription with a replaced key: %s %s, want UNAUTHENTICATED", m.Type, m.Payload)
	}
}
