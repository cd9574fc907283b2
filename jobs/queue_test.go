package jobs_test

import (
	"context"
	"slices"
	"testing"

	"studio/jobs"
	"studio/models"
	"studio/models/modelstest"
)

// On PostgreSQL, River's GIN indexes take each insert directly: no pending list for an enqueue to merge
// (a stall of every submit behind it). Migrating again keeps the setting.
func TestQueueIndexesTakeInsertsDirectly(t *testing.T) {
	modelstest.RequirePostgres(t)
	db := modelstest.NewDB(t)
	ctx := context.Background()
	if err := models.Migrate(ctx, db, jobs.MigrateQueue(db)); err != nil {
		t.Fatal(err)
	}
	var off []string
	if err := db.Gorm.Raw(`SELECT relname FROM pg_class WHERE relkind = 'i' AND reloptions @> ARRAY['fastupdate=off'] ORDER BY relname`).
		Scan(&off).Error; err != nil {
		t.Fatal(err)
	}
	if want := []string{"river_job_args_index", "river_job_metadata_index"}; !slices.Equal(off, want) {
		t.Errorf("indexes without a pending list: %q, want %q", off, want)
	}
}

// The queue's stored rows name their worker by River kind: the kinds must keep their values, and the
// core's work kinds map onto them one to one.
func TestQueueKindsKeepTheirStoredValues(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{jobs.ImageJobArgs{}.Kind(), "image_job"},
		{jobs.CallbackArgs{}.Kind(), "callback"},
		{jobs.VideoTaskArgs{}.Kind(), "video_task"},
		{jobs.ProbeArgs{}.Kind(), "upstream_probe"},
		{jobs.SweepArgs{}.Kind(), "job_sweep"},
		{jobs.ImageJobArgs{}.Kind(), string(models.WorkImage)},
		{jobs.CallbackArgs{}.Kind(), string(models.WorkCallback)},
		{jobs.VideoTaskArgs{}.Kind(), string(models.WorkVideoTask)},
		{jobs.MailArgs{}.Kind(), string(models.WorkMail)},
	} {
		if c.got != c.want {
			t.Errorf("River kind %q, want %q", c.got, c.want)
		}
	}
}
