package fakeupstream

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestFaultsAndCounts(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetModelFault("m1", Fault{Mode: ServerError, Times: 2})
	s.SetChannelFault("c1", Fault{Mode: Unauthorized})
	body := `{"model":"m1","prompt":"x"}`
	for i, want := range []int{500, 500, 200} {
		if got := post(t, s.URL+"/images/generations", body); got != want {
			t.Errorf("request %d: got %d, want %d", i, got, want)
		}
	}
	if got := post(t, s.ChannelURL("c1")+"/images/generations", body); got != 401 {
		t.Errorf("channel fault: got %d, want 401 (the channel's fault wins)", got)
	}
	if s.Count("/v1/images/generations") != 4 || s.ChannelCount("c1", "/v1/images/generations") != 1 {
		t.Errorf("counts: %d in all, %d on c1", s.Count("/v1/images/generations"), s.ChannelCount("c1", "/v1/images/generations"))
	}
	if s.LastRequest("/v1/images/generations").Channel != "c1" {
		t.Error("the last request does not record its channel")
	}
}

func TestSlowAndHang(t *testing.T) {
	s := New()
	s.SetFault(Fault{Mode: Slow, Delay: 30 * time.Millisecond})
	start := time.Now()
	if got := post(t, s.URL+"/chat/completions", `{"model":"x","messages":[]}`); got != 200 || time.Since(start) < 30*time.Millisecond {
		t.Errorf("slow: got %d after %v", got, time.Since(start))
	}
	s.SetFault(Fault{Mode: Hang})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/models", nil)
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Error("a hanging request answered")
	}
	done := make(chan struct{})
	go func() {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/models", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close() // must release the hanging handler
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Error("Close did not release a hanging request")
	}
}
