package httpmw

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"studio/models/metrics"
)

// Metrics records every routed request by its route template (not its raw path, which would explode
// the label space), method and status. It is a gorilla/mux middleware (router.Use): it reads the matched
// route.
func Metrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec, ok := w.(*statusRecorder)
		if !ok {
			rec = &statusRecorder{ResponseWriter: w}
			w = rec
		}
		next.ServeHTTP(w, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		m := routeMetricsOf(mux.CurrentRoute(r), r.Method, status)
		m.requests.Inc()
		m.duration.Observe(time.Since(start).Seconds())
	})
}

// routeMetrics are the collectors of one route, method and status.
type routeMetrics struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// routeMetricsKey identifies the collectors of a matched route (a route takes only its own methods, so
// the keys are few).
type routeMetricsKey struct {
	route  *mux.Route
	method string
	status int
}

// routeMetricsCache keeps the collectors of matched routes: looking them up by their labels hashes
// the label values on every request.
var routeMetricsCache sync.Map // routeMetricsKey -> *routeMetrics

// routeMetricsOf returns the collectors of a request's route (nil: unmatched), method and status.
func routeMetricsOf(cr *mux.Route, method string, status int) *routeMetrics {
	key := routeMetricsKey{cr, method, status}
	if cr != nil {
		if m, ok := routeMetricsCache.Load(key); ok {
			return m.(*routeMetrics)
		}
	}
	route := "unmatched"
	if cr != nil {
		if tpl, err := cr.GetPathTemplate(); err == nil {
			route = tpl
		}
	}
	m := &routeMetrics{
		requests: metrics.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(status)),
		duration: metrics.HTTPDuration.WithLabelValues(route, method),
	}
	if cr != nil {
		routeMetricsCache.Store(key, m)
	}
	return m
}

// MetricsHandler serves the Prometheus metrics of the process plus the service's scrape-time collector.
func MetricsHandler(extra prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	if extra != nil {
		reg.MustRegister(extra)
	}
	return promhttp.HandlerFor(prometheus.Gatherers{metrics.Registry, reg}, promhttp.HandlerOpts{})
}
