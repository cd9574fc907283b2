// Package metrics holds the service's Prometheus collectors; the core, the workers and the surfaces
// record into them and cmd/ exposes them at /metrics.
package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry is the registry every studio collector is registered in.
var Registry = prometheus.NewRegistry()

var (
	// HTTPRequests counts HTTP requests by route template, method and status.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "studio_http_requests_total", Help: "HTTP requests by route, method and status.",
	}, []string{"route", "method", "status"})
	// HTTPDuration observes HTTP request latency by route template and method.
	HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "studio_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method"})
	// JobsEnded counts jobs and video tasks that reached an end state.
	JobsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "studio_jobs_ended_total", Help: "Jobs that ended, by kind and status.",
	}, []string{"kind", "status"})
	// JobsSubmitted counts accepted jobs by kind.
	JobsSubmitted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "studio_jobs_submitted_total", Help: "Accepted jobs by kind.",
	}, []string{"kind"})
	// UpstreamAttempts counts calls to upstream channels by outcome class.
	UpstreamAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "studio_upstream_attempts_total", Help: "Upstream attempts by channel and outcome (ok, transient, revoked, unpaid, capability, other).",
	}, []string{"channel", "outcome"})
	// CallbackDeliveries counts callback delivery attempts by outcome.
	CallbackDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "studio_callback_deliveries_total", Help: "Callback delivery attempts by outcome (delivered, retry, failed).",
	}, []string{"outcome"})
	// GenerationsWaiting is the generations this process holds while they wait on their upstreams
	// (jobs/inflight.go), outside the queue's workers.
	GenerationsWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "studio_generations_waiting", Help: "Generations this process holds while they wait on an upstream (no queue worker held).",
	})
	// QueueRunning is the queue's runs executing in this process now: its busy workers.
	QueueRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "studio_queue_running", Help: "Runs of the queue executing in this process now (busy workers).",
	})
	// GenerationStart observes, for each generation, the time from its job's submission to its first
	// upstream call (or submission to a task protocol): the queue's pick-up, the claim and the start of the
	// call; a wait for a max_concurrency slot and a job queued again after a crash count in it too.
	GenerationStart = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "studio_generation_start_seconds", Help: "Time from a job's submission to its first upstream call.",
		Buckets: []float64{.005, .01, .025, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	})
	// Credits counts credits moved, by ledger kind (charge, refund, grant, claim, ...).
	Credits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "studio_credits_total", Help: "Credits moved by ledger kind (absolute values).",
	}, []string{"kind"})
)

func init() {
	Registry.MustRegister(HTTPRequests, HTTPDuration, JobsEnded, JobsSubmitted, UpstreamAttempts, CallbackDeliveries, Credits,
		GenerationsWaiting, QueueRunning, GenerationStart, poolCollector{},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Pool is one database connection pool's figures at a scrape.
type Pool struct {
	Name        string // requests, work, queue
	Open, InUse int
}

var pools atomic.Pointer[func() []Pool]

// ObservePools sets what studio_db_connections reports: the pools of the process's database, read at
// each scrape.
func ObservePools(read func() []Pool) { pools.Store(&read) }

var poolDesc = prometheus.NewDesc("studio_db_connections", "Database connections of this process by pool and state (open, in_use).",
	[]string{"pool", "state"}, nil)

// poolCollector reports the pools of ObservePools.
type poolCollector struct{}

func (poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- poolDesc }

func (poolCollector) Collect(ch chan<- prometheus.Metric) {
	read := pools.Load()
	if read == nil {
		return
	}
	for _, p := range (*read)() {
		ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(p.Open), p.Name, "open")
		ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(p.InUse), p.Name, "in_use")
	}
}
