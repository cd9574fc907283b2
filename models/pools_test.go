package models_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"studio/models"
	"studio/models/modelstest"
)

// On PostgreSQL, background work has its own connections: with every one of them busy, a request's
// statement and transaction still run at once.
func TestBusyWorkDoesNotHoldRequestsBack(t *testing.T) {
	modelstest.RequirePostgres(t)
	db := modelstest.NewDB(t)
	ctx := context.Background()
	work := models.WorkContext(ctx)
	n := db.Work.Stats().MaxOpenConnections
	if n <= 0 || db.Work == db.SQL {
		t.Fatalf("work pool: %d connections, separate %v", n, db.Work != db.SQL)
	}
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			err := db.WithContext(work).Transaction(func(tx *gorm.DB) error {
				started <- struct{}{}
				return tx.Exec("SELECT pg_sleep(1.5)").Error
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	for range n {
		<-started
	}
	if got := db.Work.Stats().InUse; got != n {
		t.Errorf("work pool: %d connections in use, want %d", got, n)
	}
	if got := db.SQL.Stats().InUse; got != 0 {
		t.Errorf("request pool: %d connections in use by work, want 0", got)
	}
	t0 := time.Now()
	var one int
	if err := db.WithContext(ctx).Raw("SELECT 1").Scan(&one).Error; err != nil || one != 1 {
		t.Fatalf("request statement: %v %d", err, one)
	}
	if err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return tx.Exec("SELECT 1").Error }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("a request waited %s behind busy work", d)
	}
	wg.Wait()
}
