package models_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"studio/models"
)

// A transaction the database rolled back for a deadlock or a serialization failure is run again from
// the start, a bounded number of times; any other error is returned at once; and the ledger rows of an
// attempt that was rolled back are gone with it.
func TestTxRetriesDeadlocksAndSerializationFailures(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(100))})
	for _, code := range []string{"40P01", "40001"} {
		runs := 0
		err := app.Tx(ctx, func(tx *gorm.DB) error {
			runs++
			if _, err := app.Credits().ChargeTx(tx, tenant, 1, "ref", "retry test"); err != nil {
				return err
			}
			if runs < 3 {
				// As the driver reports it, wrapped the way the core wraps database errors.
				return models.Internal("test", fmt.Errorf("write: %w", &pgconn.PgError{Code: code, Message: "deadlock detected"}))
			}
			return nil
		})
		if err != nil || runs != 3 {
			t.Fatalf("SQLSTATE %s: err %v after %d runs, want success on the third", code, err, runs)
		}
	}
	if p := pool(t, app, tenant); p.Spendable != 98 {
		t.Fatalf("spendable %d after two committed charges, want 98: a rolled-back attempt left its charge", p.Spendable)
	}
	assertLedgerSound(t, app)

	runs := 0
	err := app.Tx(ctx, func(*gorm.DB) error {
		runs++
		return &pgconn.PgError{Code: "40P01"}
	})
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || runs < 2 || runs > 10 {
		t.Fatalf("a deadlock every time: err %v after %d runs, want it returned after a bounded number of runs", err, runs)
	}

	runs = 0
	err = app.Tx(ctx, func(*gorm.DB) error {
		runs++
		return &pgconn.PgError{Code: "23505"} // unique violation: running it again cannot help
	})
	if err == nil || runs != 1 {
		t.Fatalf("unique violation: err %v after %d runs, want it returned after one run", err, runs)
	}
	runs = 0
	if err := app.Tx(ctx, func(*gorm.DB) error { runs++; return models.Invalid("no") }); err == nil || runs != 1 {
		t.Fatalf("a refusal: err %v after %d runs, want it returned after one run", err, runs)
	}
}
