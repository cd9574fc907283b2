package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// dist is the p50, p99 and maximum of some durations (n of them).
type dist struct {
	n             int
	p50, p99, max time.Duration
}

func distOf(d []time.Duration) dist {
	if len(d) == 0 {
		return dist{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[int(float64(len(s)-1)*p)] }
	return dist{n: len(s), p50: at(0.5), p99: at(0.99), max: s[len(s)-1]}
}

// secs formats a distribution in seconds ("-" when empty).
func (d dist) secs() string {
	if d.n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f", d.p50.Seconds(), d.p99.Seconds(), d.max.Seconds())
}

// millis formats a distribution in milliseconds.
func (d dist) millis() string {
	if d.n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f", ms(d.p50), ms(d.p99), ms(d.max))
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// slice is the submits due in one slice of an open-loop run.
type slice struct {
	n, errors int
	lat       dist
}

// verdict is one target's outcome.
type verdict struct {
	name string
	ok   bool
	na   bool // not judged: the figure was not measured, or the target not set up
	text string
}

// result is the figures of one run.
type result struct {
	sc      scenario
	db      string
	run     int
	o       options
	refused string // studio did not start: why

	accepted   int
	submitLat  dist
	errs       map[string]int
	slices     []slice
	first      time.Time
	drained    bool
	drain      time.Duration // first submit to the last job done (at least, when not drained)
	lateness   dist          // job latency minus the upstream latency
	afterAns   dist          // upstream answer (a video task's end) to job done
	pickup     dist          // submit answered to the job's upstream call arriving (image jobs)
	withinAns  int           // jobs done within -after-answer of their answer
	noAnswer   int           // jobs done without a recorded answer
	done       int
	failed     int
	pending    int
	lost       int // accepted, but no row
	peaks      peaks
	ledger     string
	logErrors  []string
	fakeCalls  int64
	fakeImg    int64
	fakeH2     int64
	fakePeak   int64 // image calls in flight at most (video: calls of any kind)
	fakeCut    int64
	unmatched  int64
	retried    int   // jobs whose prompt reached the fake more than once
	videoPolls int64 // status requests of video tasks
	seenLag    dist  // a video task's end to the first status answer that said so
	verdicts   []verdict
}

// compute derives the figures from the submits, the fake's records and the database's rows.
func (r *result) compute(sub *submitter, f *fake, rows map[string]row) {
	L := r.sc.latency
	r.errs = map[string]int{}
	var lat, late, after, seen, picked []time.Duration
	r.first = sub.first()
	var last time.Time
	for i := range sub.subs {
		s := &sub.subs[i]
		if s.err != "dropped" {
			lat = append(lat, s.latency())
		}
		if s.err != "" {
			r.errs[s.err]++
			continue
		}
		r.accepted++
		row, ok := rows[s.id]
		if !ok {
			r.lost++
			continue
		}
		switch row.status {
		case "done":
			r.done++
		case "failed", "cancelled":
			r.failed++
		default:
			r.pending++
			continue
		}
		if row.finished.After(last) {
			last = row.finished
		}
		if row.status != "done" {
			continue
		}
		late = append(late, row.finished.Sub(s.sent)-L)
		var answer time.Time
		if r.sc.video {
			end, seenAt, ok := f.videoEnd(row.upstreamTaskID)
			if ok {
				answer = end
				if !seenAt.IsZero() {
					seen = append(seen, seenAt.Sub(end))
				}
			}
		} else if ns := f.answered[i].Load(); ns > 0 {
			answer = time.Unix(0, ns)
		}
		if !r.sc.video {
			if ns := f.arrived[i].Load(); ns > 0 {
				picked = append(picked, time.Unix(0, ns).Sub(s.end))
			}
		}
		if answer.IsZero() {
			r.noAnswer++
			continue
		}
		d := row.finished.Sub(answer)
		after = append(after, d)
		if d <= r.o.afterAnswer {
			r.withinAns++
		}
	}
	for i := range f.perJob {
		if f.perJob[i].Load() > 1 {
			r.retried++
		}
	}
	r.submitLat, r.lateness, r.afterAns, r.seenLag = distOf(lat), distOf(late), distOf(after), distOf(seen)
	r.pickup = distOf(picked)
	r.drained = r.pending == 0 && r.lost == 0
	if r.drained && !last.IsZero() {
		r.drain = last.Sub(r.first)
	} else {
		r.drain = time.Since(r.first)
	}
	if r.sc.open {
		for i := range sub.subs {
			s := &sub.subs[i]
			k := int(s.due.Sub(sub.subs[0].due) / r.o.slice)
			for len(r.slices) <= k {
				r.slices = append(r.slices, slice{})
			}
			r.slices[k].n++
			if s.err != "" {
				r.slices[k].errors++
			}
		}
		per := make([][]time.Duration, len(r.slices))
		for i := range sub.subs {
			s := &sub.subs[i]
			if s.err != "dropped" {
				k := int(s.due.Sub(sub.subs[0].due) / r.o.slice)
				per[k] = append(per[k], s.latency())
			}
		}
		for k := range r.slices {
			r.slices[k].lat = distOf(per[k])
		}
	}
	r.fakeCalls, r.fakeImg, r.fakeH2, r.fakePeak = f.calls.Load(), f.imgCalls.Load(), f.h2.Load(), f.peak.Load()
	if r.sc.video {
		r.fakePeak = f.allPeak.Load()
	}
	r.fakeCut, r.unmatched, r.videoPolls = f.cut.Load(), f.unmatched.Load(), f.vidPolls.Load()
}

// errorsText is "0" or "12 (429 10, transport 2)".
func (r *result) errorsText() string {
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.errs)) {
		total += r.errs[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, r.errs[k]))
	}
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

func (r *result) submitErrors() int {
	n := 0
	for _, v := range r.errs {
		n += v
	}
	return n
}

// queueRowsText describes the peak of queue rows in state running (studio_queue_jobs), which is not a
// count of busy workers: River records the end of runs in batches, so a row stays running for a while
// after its worker is free (with 50 workers, peaks of 100 were seen).
func (r *result) queueRowsText() string {
	return fmt.Sprintf("queue rows in state running (studio_queue_jobs, not busy workers: River records ends in batches): peak %s", gauge(r.peaks.queueRunning))
}

// rssMiB is studio's peak resident memory (the larger of the sampled VmRSS and VmHWM).
func (r *result) rssMiB() float64 { return max(r.peaks.rss, r.peaks.hwm) / (1 << 20) }

// judge sets the verdicts of the scenario's targets.
func (r *result) judge() {
	add := func(name string, ok bool, format string, args ...any) {
		r.verdicts = append(r.verdicts, verdict{name: name, ok: ok, text: fmt.Sprintf(format, args...)})
	}
	na := func(name string, format string, args ...any) {
		r.verdicts = append(r.verdicts, verdict{name: name, na: true, text: fmt.Sprintf(format, args...)})
	}
	sc, o := r.sc, r.o
	if r.refused != "" {
		add(sc.name, false, "studio did not start: %s", r.refused)
		return
	}
	counts := fmt.Sprintf("done %d, failed %d, pending %d, lost %d of %d submitted (%d accepted)", r.done, r.failed, r.pending, r.lost, sc.jobs, r.accepted)
	switch sc.name {
	case "burst":
		ok := r.drained && r.done == sc.jobs && r.drain <= o.within
		add("burst", ok, "all %d jobs of a %s upstream done within %s of the first submit: drain %s; %s",
			sc.jobs, sc.latency, o.within, r.drainText(), counts)
	case "open":
		add("open jobs", r.withinAns == sc.jobs, "every job done within %s of its upstream's answer: %d of %d (answer → done max %s; %d done without a recorded answer; %s; "+
			"upstream calls in flight at most %d, where the load asks for %d)",
			o.afterAnswer, r.withinAns, sc.jobs, maxText(r.afterAns), r.noAnswer, counts, r.fakePeak, min(sc.jobs, int(sc.rate*sc.latency.Seconds())))
		worst, at := time.Duration(0), 0
		for k, s := range r.slices {
			if s.lat.p99 > worst {
				worst, at = s.lat.p99, k
			}
		}
		if within, p50, p99, n := r.peaks.startQuantiles(0.1); n > 0 {
			add("open pick-up", within >= 0.99,
				"commit to the upstream call p99 under 100 ms (studio_generation_start_seconds): %.2f %% of %.0f within 100 ms, p50 ≤ %s s, p99 ≤ %s s; seen at the fake (submit answered → call arrived): p50 / p99 / max %s ms",
				100*within, n, p50, p99, r.pickup.millis())
		} else {
			add("open pick-up", r.pickup.n > 0 && r.pickup.p99 < 100*time.Millisecond,
				"a job's upstream call starts within 100 ms of its submit's answer at p99: p50 / p99 / max %s ms", r.pickup.millis())
		}
		add("open submits", worst < o.submitP99 && r.submitErrors() == 0,
			"submit p99 under %s in every %s slice and no error: worst slice p99 %.1f ms (%s–%s), overall p99 %.1f ms, errors %s",
			o.submitP99, o.slice, ms(worst), time.Duration(at)*o.slice, time.Duration(at+1)*o.slice, ms(r.submitLat.p99), r.errorsText())
		add("open memory", r.rssMiB() > 0 && r.rssMiB() < o.maxRSSMB, "studio's resident memory under %.0f MiB: peak %.0f MiB", o.maxRSSMB, r.rssMiB())
		switch {
		case r.peaks.pgConns >= 0:
			add("open connections", r.peaks.pgConns <= o.dbMaxConns, "database connections within the budget of %d (SERVICE_DB_MAX_CONNS): peak %d in pg_stat_activity%s",
				o.dbMaxConns, r.peaks.pgConns, r.poolText(", "))
		case r.peaks.poolOpen >= 0:
			add("open connections", int(r.peaks.poolOpen) <= o.dbMaxConns, "database connections within the budget of %d: peak %.0f open in studio_db_connections (SQLite)",
				o.dbMaxConns, r.peaks.poolOpen)
		default:
			na("open connections", "database connections within the budget of %d: not measured (SQLite has no pg_stat_activity, and studio has no studio_db_connections gauge)", o.dbMaxConns)
		}
	case "video":
		add("video done", r.drained && r.done == sc.jobs, "all %d tasks of a %s provider done: %s; drain %s", sc.jobs, sc.latency, counts, r.drainText())
		if r.peaks.busy >= 0 {
			add("video workers", r.peaks.busyFollowing >= 0 && r.peaks.busyFollowing <= float64(o.maxBusy),
				"at most %d busy queue workers following the tasks once all were started (studio_queue_running, every %s): peak %.0f (%.0f while the tasks were being submitted)",
				o.maxBusy, o.sample, r.peaks.busyFollowing, r.peaks.busy)
		} else {
			na("video workers", "at most %d busy queue workers: studio has no studio_queue_running gauge (%s)", o.maxBusy, r.queueRowsText())
		}
	case "limit":
		if sc.maxConcurrency > 0 {
			add("limit", r.fakePeak <= int64(sc.maxConcurrency) && r.done == sc.jobs,
				"at most %d calls in flight at the upstream (max_concurrency), every job done: peak %d in flight; %s",
				sc.maxConcurrency, r.fakePeak, counts)
		} else {
			na("limit", "no max_concurrency in the upstreams file (-max-concurrency 0): peak %d calls in flight; %s", r.fakePeak, counts)
		}
	}
}

func (r *result) drainText() string {
	if r.drained {
		return fmt.Sprintf("%.1f s", r.drain.Seconds())
	}
	return fmt.Sprintf("not drained (%d not ended %.0f s after the first submit)", r.pending+r.lost, r.drain.Seconds())
}

func maxText(d dist) string {
	if d.n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.max.Seconds())
}

// gauge formats a peak that may not have been read (-1).
func gauge(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// poolText describes studio's own pool gauge, when present.
func (r *result) poolText(prefix string) string {
	if r.peaks.poolOpen < 0 {
		return prefix + "studio_db_connections: -"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.peaks.poolByName)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, r.peaks.poolByName[k]))
	}
	return fmt.Sprintf("%sstudio_db_connections: peak %.0f open, %.0f in use (by pool, open: %s)", prefix, r.peaks.poolOpen, r.peaks.poolInUse, strings.Join(parts, ", "))
}

func printHeader(r *result) {
	sc := r.sc
	what := fmt.Sprintf("%d image jobs submitted at once by %d clients, upstream latency %s", sc.jobs, r.o.clients, sc.latency)
	switch {
	case sc.open:
		what = fmt.Sprintf("open loop, %.0f image submits/s for %s (%d jobs, at most %d in flight), upstream latency %s",
			sc.rate, sc.duration, sc.jobs, r.o.clients, sc.latency)
	case sc.video:
		what = fmt.Sprintf("%d video tasks (%d s clips) submitted at once by %d clients, provider tasks run %s", sc.jobs, r.o.videoSeconds, r.o.clients, sc.latency)
	}
	if sc.name == "limit" {
		if sc.maxConcurrency > 0 {
			what += fmt.Sprintf(", max_concurrency %d", sc.maxConcurrency)
		} else {
			what += ", no max_concurrency written"
		}
	}
	fmt.Printf("== %s, run %d of %d, db=%s: %s\n", sc.name, r.run, r.o.runs, r.db, what)
}

// print prints the figures of a run and its verdicts.
func (r *result) print(sub *submitter, f *fake) {
	L := r.sc.latency
	fmt.Printf("submit latency (from due) p50 / p99 / max: %s ms; errors %s\n", r.submitLat.millis(), r.errorsText())
	for _, k := range slices.Sorted(maps.Keys(sub.sample)) {
		fmt.Printf("  %s, e.g.: %s\n", k, sub.sample[k])
	}
	if len(r.slices) > 0 {
		fmt.Printf("submit p99 by %s slice of due time (ms):", r.o.slice)
		for _, s := range r.slices {
			fmt.Printf(" %.1f", ms(s.lat.p99))
			if s.errors > 0 {
				fmt.Printf(" (%d errors)", s.errors)
			}
		}
		fmt.Println()
	}
	fmt.Printf("drain (first submit → last job done): %s\n", r.drainText())
	kind := "jobs"
	if r.sc.video {
		kind = "video tasks"
	}
	fmt.Printf("%s: done %d, failed %d, pending %d, lost %d (accepted %d)\n", kind, r.done, r.failed, r.pending, r.lost, r.accepted)
	fmt.Printf("job latency − L (%s), p50 / p99 / max: %s s\n", L, r.lateness.secs())
	if r.sc.video {
		fmt.Printf("task's end at the provider → done in studio, p50 / p99 / max: %s s (%d tasks; first status answer saying so after the end: %s s; %d status requests)\n",
			r.afterAns.secs(), r.afterAns.n, r.seenLag.secs(), r.videoPolls)
	} else {
		fmt.Printf("upstream answer → job done, p50 / p99 / max: %s s (%d jobs; %d done without a recorded answer)\n", r.afterAns.secs(), r.afterAns.n, r.noAnswer)
		fmt.Printf("pick-up (submit answered → its upstream call arrived), p50 / p99 / max: %s ms\n", r.pickup.millis())
		if within, p50, p99, n := r.peaks.startQuantiles(0.1); n > 0 {
			fmt.Printf("studio_generation_start_seconds (commit → upstream call): %.0f starts, %.2f %% within 100 ms, p50 ≤ %s s, p99 ≤ %s s\n", n, 100*within, p50, p99)
		}
	}
	if r.sc.video {
		fmt.Printf("fake upstream: %d calls (%d over HTTP/2), peak %d in flight, peak %d connections\n", r.fakeCalls, r.fakeH2, r.fakePeak, f.peakConns.Load())
	} else {
		fmt.Printf("fake upstream: %d calls (%d over HTTP/2), peak %d connections; %d image calls, peak %d in flight, %d cut before the answer, %d jobs called more than once, %d unmatched prompts\n",
			r.fakeCalls, r.fakeH2, f.peakConns.Load(), r.fakeImg, r.fakePeak, r.fakeCut, r.retried, r.unmatched)
	}
	if r.fakeCalls > 0 && r.fakeH2 < r.fakeCalls {
		fmt.Printf("  WARNING: %d calls reached the fake over HTTP/1.1\n", r.fakeCalls-r.fakeH2)
	}
	fmt.Printf("studio: peak RSS %.0f MiB (sampled %.0f, VmHWM %.0f), peak goroutines %s, peak open files %d\n",
		r.rssMiB(), r.peaks.rss/(1<<20), r.peaks.hwm/(1<<20), gauge(r.peaks.goroutines), r.peaks.fds)
	fmt.Printf("  busy queue workers (studio_queue_running): peak %s; generations waiting (studio_generations_waiting): peak %s\n",
		gauge(r.peaks.busy), gauge(r.peaks.waiting))
	fmt.Printf("  %s\n", r.queueRowsText())
	if r.peaks.pgConns >= 0 {
		fmt.Printf("  database connections: peak %d in pg_stat_activity (budget %d)%s\n", r.peaks.pgConns, r.o.dbMaxConns, r.poolText("; "))
	} else {
		fmt.Printf("  database connections (SQLite)%s\n", r.poolText(": "))
	}
	sc := distOf(r.peaks.scrapes)
	fmt.Printf("  /metrics read %d times, p50 / p99 / max %s ms, %d failed\n", sc.n, sc.millis(), r.peaks.scrapeFailures)
	for _, l := range r.logErrors {
		fmt.Printf("  studio log: %s\n", snippet([]byte(l)))
	}
	fmt.Printf("ledger: %s\n", r.ledger)
	r.printVerdicts()
	fmt.Println()
}

func (r *result) printVerdicts() {
	for _, v := range r.verdicts {
		fmt.Printf("target %s: %s — %s\n", v.name, v.word(), v.text)
	}
}

func (v verdict) word() string {
	switch {
	case v.na:
		return "not judged"
	case v.ok:
		return "met"
	}
	return "NOT met"
}

// printTable prints the runs as a markdown table for bench/README.md.
func printTable(results []*result) {
	fmt.Println("| scenario | db | run | jobs | L | drain s | job − L p50 / p99 / max s | answer → done p50 / p99 / max s | pick-up p50 / p99 ms | submit p50 / p99 / max ms | submit errors | peak RSS MiB | goroutines | DB conns | busy workers | fake in flight | done / failed / pending | targets |")
	fmt.Println("|---|---|---:|---:|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|---|---|")
	for _, r := range results {
		name := r.sc.name
		if r.sc.open {
			name = fmt.Sprintf("open %.0f/s × %s", r.sc.rate, r.sc.duration)
		}
		if r.sc.name == "limit" {
			name = fmt.Sprintf("limit (max_concurrency %d)", r.sc.maxConcurrency)
		}
		var failed, unjudged []string
		for _, v := range r.verdicts {
			switch {
			case v.na:
				unjudged = append(unjudged, v.name)
			case !v.ok:
				failed = append(failed, v.name)
			}
		}
		var parts []string
		switch {
		case len(failed) > 0:
			parts = append(parts, "NOT met: "+strings.Join(failed, ", "))
		case len(unjudged) < len(r.verdicts):
			parts = append(parts, "met")
		}
		if len(unjudged) > 0 {
			parts = append(parts, "not judged: "+strings.Join(unjudged, ", "))
		}
		targets := strings.Join(parts, "; ")
		if r.refused != "" {
			fmt.Printf("| %s | %s | %d | %d | %s | - | - | - | - | - | - | - | - | - | - | - | NOT met: studio did not start (%s) |\n",
				name, r.db, r.run, r.sc.jobs, r.sc.latency, strings.ReplaceAll(snippet([]byte(r.refused)), "|", "/"))
			continue
		}
		drain := fmt.Sprintf("%.1f", r.drain.Seconds())
		if !r.drained {
			drain = "> " + fmt.Sprintf("%.0f", r.drain.Seconds())
		}
		conns := "-"
		switch {
		case r.peaks.pgConns >= 0:
			conns = fmt.Sprintf("%d", r.peaks.pgConns)
		case r.peaks.poolOpen >= 0:
			conns = gauge(r.peaks.poolOpen) + " (pool)"
		}
		busyText := gauge(r.peaks.busy)
		if r.peaks.busy < 0 && r.peaks.queueRunning >= 0 {
			busyText += fmt.Sprintf(" (running rows %.0f)", r.peaks.queueRunning)
		}
		pick := "-"
		if r.pickup.n > 0 {
			pick = fmt.Sprintf("%.0f / %.0f", ms(r.pickup.p50), ms(r.pickup.p99))
		}
		fmt.Printf("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %d | %d / %d / %d | %s |\n",
			name, r.db, r.run, r.sc.jobs, r.sc.latency, drain, r.lateness.secs(), r.afterAns.secs(), pick, r.submitLat.millis(), r.errorsText(),
			r.rssMiB(), gauge(r.peaks.goroutines), conns, busyText, r.fakePeak, r.done, r.failed, r.pending+r.lost, targets)
	}
}

// startQuantiles reads studio_generation_start_seconds: the share of starts within bound seconds, the
// bucket bounds holding the median and the 99th percentile, and the count.
func (p peaks) startQuantiles(bound float64) (within float64, p50, p99 string, n float64) {
	n = p.startBuckets[math.Inf(1)]
	if n <= 0 {
		return 0, "-", "-", 0
	}
	les := make([]float64, 0, len(p.startBuckets))
	for le := range p.startBuckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	at := func(q float64) string {
		for _, le := range les {
			if p.startBuckets[le] >= q*n {
				return strconv.FormatFloat(le, 'g', -1, 64)
			}
		}
		return "+Inf"
	}
	return p.startBuckets[bound] / n, at(0.5), at(0.99), n
}
