package rest

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"studio/models"
)

// TestWithOKEncodesTheViewWithOKFirst checks that an answer with the success flag is, byte for byte, the
// view with an `OK bool json:"ok"` first field (the form the core's views had before the flag moved to
// the surface), HTML characters unescaped as in every answer.
func TestWithOKEncodesTheViewWithOKFirst(t *testing.T) {
	errText := "upstream said <no> & left"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	job := models.JobView{JobID: "j1", Status: "failed", Error: &errText, CreatedAt: now, UpdatedAt: now}
	pool := &models.PoolView{TenantID: "t1", Name: "Acme <&>", Balance: 5}
	cases := []struct {
		name string
		v    any
		want any
	}{
		{"job", job, struct {
			OK bool `json:"ok"`
			models.JobView
		}{true, job}},
		{"pool", pool, struct {
			OK bool `json:"ok"`
			*models.PoolView
		}{true, pool}},
		{"empty object", struct{}{}, struct {
			OK bool `json:"ok"`
		}{true}},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		writeOK(rec, c.v)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(c.want); err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != want.String() || rec.Code != 200 {
			t.Errorf("%s: %d %s, want %s", c.name, rec.Code, got, want.String())
		}
	}
	if _, err := json.Marshal(withOK{[]int{1}}); err == nil {
		t.Error("withOK of an array encoded; want an error")
	}
}
