package jobs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

// River's tables are River's: the service reads them (metrics, index settings) but never writes their
// rows. A live job is kept from being rescued by River's own settings (a bounded run, a snooze for work
// that waits), not by moving its attempted_at.
func TestNothingWritesRiversTables(t *testing.T) {
	write := regexp.MustCompile(`(?i)\b(update|insert\s+into|delete\s+from|truncate(\s+table)?)\s+"?river_`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if m := write.Find(src); m != nil {
			t.Errorf("%s writes River's table: %q", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A video task being polled runs one poll at a time, snoozed in between, and its job says so in River's
// metadata (the run's output "waiting"), which gives the next run the short bound of a poll; the run that
// downloads the result clears it.
func TestPollingRunsAreRecordedAsWaiting(t *testing.T) {
	up := &scriptedVideos{polls: []pollAnswer{{state: "in_progress", progress: 10}}, content: fakeupstream.MP4}
	e := newVideoEnv(t, up)
	task := e.submit()
	output := func() string {
		t.Helper()
		var meta []string
		if err := e.app.DB.Gorm.Raw("SELECT CAST(metadata AS TEXT) FROM river_job WHERE kind = ?", "video_task").Scan(&meta).Error; err != nil || len(meta) != 1 {
			t.Fatalf("river_job metadata: %v %v", meta, err)
		}
		return gjson.Get(meta[0], "output").String()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, _, polled := up.counts(); polled >= 2 && output() == "waiting" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("polled, but the job's output is %q", output())
		}
	}
	up.mu.Lock()
	up.polls = []pollAnswer{{state: "completed", progress: 100}}
	up.mu.Unlock()
	e.wait(task.ID, models.VideoDone)
	for deadline := time.Now().Add(5 * time.Second); output() != ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the finished job's output is still %q", output())
		}
	}
}
