package models

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lib/pq"
)

// River's database/sql driver, which enqueues jobs inside the service's GORM transactions, passes its
// array parameters wrapped for lib/pq (pq.Array). pgx would have each wrapper print its array as text,
// parse that text back and encode it in binary: on PostgreSQL this was most of the CPU of enqueueing a
// job. unwrapPQArrays lets pgx encode the slice inside the wrapper directly. Element types pgx does not
// know (River's job state enum) keep the wrapper's text path. It stays while jobs are enqueued through
// riverdriver/riverdatabasesql inside GORM transactions; it changes only how parameters are encoded.
func unwrapPQArrays(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryUnwrapPQArray}, m.TryWrapEncodePlanFuncs...)
	return nil
}

func tryUnwrapPQArray(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if v, ok := pqArraySlice(value); ok {
		return &pqArrayPlan{}, v, true
	}
	return nil, nil, false
}

// pqArraySlice returns the slice a lib/pq array wrapper holds, when pgx can encode it natively.
func pqArraySlice(value any) (any, bool) {
	switch v := value.(type) {
	case *pq.StringArray:
		return []string(*v), v != nil
	case *pq.Int64Array:
		return []int64(*v), v != nil
	case *pq.Int32Array:
		return []int32(*v), v != nil
	case *pq.ByteaArray:
		return [][]byte(*v), v != nil
	case *pq.BoolArray:
		return []bool(*v), v != nil
	case *pq.Float64Array:
		return []float64(*v), v != nil
	case pq.GenericArray:
		switch v.A.(type) {
		case []time.Time, []int16, []int32, []int64, []string, [][]byte:
			return v.A, true
		}
	}
	return nil, false
}

// pqArrayPlan encodes a lib/pq array wrapper with the plan of the slice it holds.
type pqArrayPlan struct{ next pgtype.EncodePlan }

func (p *pqArrayPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *pqArrayPlan) Encode(value any, buf []byte) ([]byte, error) {
	v, _ := pqArraySlice(value)
	return p.next.Encode(v, buf)
}
