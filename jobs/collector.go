package jobs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"

	"studio/models"
)

// Collector reports, at scrape time, the figures that live in the database and the routing engine:
// jobs by status, queue depth and age, and upstream health scores.
type Collector struct {
	s        *Service
	pending  *prometheus.Desc
	queue    *prometheus.Desc
	queueAge *prometheus.Desc
	score    *prometheus.Desc
	state    *prometheus.Desc
}

// NewCollector returns the scrape-time collector of the service.
func NewCollector(s *Service) *Collector {
	return &Collector{s: s,
		pending:  prometheus.NewDesc("studio_jobs_pending", "Image jobs and video tasks not yet ended.", []string{"kind"}, nil),
		queue:    prometheus.NewDesc("studio_queue_jobs", "Queued work by state.", []string{"state"}, nil),
		queueAge: prometheus.NewDesc("studio_queue_oldest_available_seconds", "Age of the oldest work waiting to run.", nil, nil),
		score:    prometheus.NewDesc("studio_upstream_health_score", "Health score of each upstream channel (D5).", []string{"channel", "media"}, nil),
		state:    prometheus.NewDesc("studio_upstream_active", "1 when the channel is in rotation, 0 when disabled or removed.", []string{"channel", "media"}, nil),
	}
}

// Describe sends the descriptors.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.queue
	ch <- c.queueAge
	ch <- c.score
	ch <- c.state
}

// Collect reads the current figures.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	db := c.s.App.DB.WithContext(ctx)
	var n int64
	if db.Model(&models.Job{}).Where("status = ?", models.JobPending).Count(&n).Error == nil {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), "image")
	}
	if db.Model(&models.VideoTask{}).Where("status IN ?", []string{"pending", "running"}).Count(&n).Error == nil {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), "video")
	}
	var rows []struct {
		State string
		N     int64
	}
	if db.Raw("SELECT state, COUNT(*) AS n FROM river_job GROUP BY state").Scan(&rows).Error == nil {
		// Every state, 0 when no row has it: an empty queue (jobs held from their submit) still shows.
		byState := map[string]int64{}
		for _, r := range rows {
			byState[r.State] = r.N
		}
		for _, st := range rivertype.JobStates() {
			ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(byState[string(st)]), string(st))
		}
	}
	ageSQL := "SELECT COALESCE(EXTRACT(EPOCH FROM now() - MIN(scheduled_at)), 0) AS age FROM river_job WHERE state = 'available'"
	if c.s.App.DB.Dialect == models.SQLite {
		ageSQL = "SELECT COALESCE((julianday('now') - julianday(MIN(scheduled_at))) * 86400, 0) AS age FROM river_job WHERE state = 'available'"
	}
	var oldest struct{ Age float64 }
	if err := db.Raw(ageSQL).Scan(&oldest).Error; err == nil {
		ch <- prometheus.MustNewConstMetric(c.queueAge, prometheus.GaugeValue, max(oldest.Age, 0))
	}
	for _, u := range c.s.Engine.List() {
		ch <- prometheus.MustNewConstMetric(c.score, prometheus.GaugeValue, u.Score, u.Name, string(u.Media))
		active := 0.0
		if u.State == "active" {
			active = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, active, u.Name, string(u.Media))
	}
}
