package models_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lib/pq"

	"studio/models/modelstest"
)

// River enqueues through lib/pq array wrappers; on PostgreSQL they are encoded as the slices they hold
// (models/pqarrays.go). What reaches the database must be what the wrappers' own text form says.
func TestPQArrayParametersKeepTheirValues(t *testing.T) {
	modelstest.RequirePostgres(t)
	db := modelstest.NewDB(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456000, time.UTC)
	var (
		texts, jsons, states, none []string
		timesEqual                 bool
		smalls, ints, bigs         []int64
		blobs                      [][]byte
	)
	err := db.SQL.QueryRowContext(ctx, `SELECT $1::text[], array(SELECT x::text FROM unnest($2::jsonb[]) x), $3::timestamptz[] = ARRAY[$10::timestamptz, $11::timestamptz],
		$4::smallint[], $5::integer[], $6::bigint[], $7::bytea[], $8::text[], $9::text[]`,
		pq.Array([]string{"a", "b,c", `"q"`, "", "{}"}),
		pq.Array([]string{`{"job_id": "x"}`, `{}`}),
		pq.Array([]time.Time{at, at.Add(time.Hour)}),
		pq.Array([]int16{1, -25}),
		pq.Array([]int32{0, 7}),
		pq.Array([]int64{1 << 40}),
		pq.Array([][]byte{[]byte("k\x00\xff"), {}}),
		pq.Array([]string{"available"}),
		pq.Array([]string(nil)),
		at, at.Add(time.Hour),
	).Scan(pq.Array(&texts), pq.Array(&jsons), &timesEqual, pq.Array(&smalls), pq.Array(&ints), pq.Array(&bigs),
		pq.Array(&blobs), pq.Array(&states), pq.Array(&none))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b,c", `"q"`, "", "{}"}; !slices.Equal(texts, want) {
		t.Errorf("text[] = %q, want %q", texts, want)
	}
	if want := []string{`{"job_id": "x"}`, `{}`}; !slices.Equal(jsons, want) {
		t.Errorf("jsonb[] = %q, want %q (documents, not JSON strings)", jsons, want)
	}
	if !timesEqual {
		t.Error("timestamptz[] differs from the times sent")
	}
	if !slices.Equal(smalls, []int64{1, -25}) || !slices.Equal(ints, []int64{0, 7}) || !slices.Equal(bigs, []int64{1 << 40}) {
		t.Errorf("integers = %v %v %v", smalls, ints, bigs)
	}
	if len(blobs) != 2 || string(blobs[0]) != "k\x00\xff" || len(blobs[1]) != 0 {
		t.Errorf("bytea[] = %q", blobs)
	}
	if !slices.Equal(states, []string{"available"}) || none != nil {
		t.Errorf("states %q, nil array %q (want NULL)", states, none)
	}
}
