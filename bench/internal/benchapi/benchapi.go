// Package benchapi holds what several benchmarks ask of a running studio over its API.
package benchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// CreateTenant creates a metered tenant with credits through POST /api/admin and returns its key.
func CreateTenant(ctx context.Context, base, adminKey, name string, credits int64) (string, error) {
	body, _ := json.Marshal(map[string]any{"action": "tenant-create", "name": name, "credits": credits})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/admin", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("X-API-Key", adminKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.APIKey == "" {
		return "", fmt.Errorf("tenant-create answered %d: %s", res.StatusCode, Snippet(b, 200))
	}
	return out.APIKey, nil
}

// Snippet shortens an answer to at most n bytes for an error message.
func Snippet(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
