package models_test

import (
	"net/http"
	"testing"

	"studio/models"
)

func TestCredentialFromHeader(t *testing.T) {
	const key = "sk-studio-AAAAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct {
		apiKey, authorization, want string
	}{
		{key, "", key},
		{key, "Bearer other", key}, // X-API-Key wins
		{"", "Bearer " + key, key},
		{"", "bearer " + key, key},
		{"", "BEARER " + key, key},
		{"", "BeArEr " + key, key},
		{"", "Basic " + key, ""},
		{"", "Bearer ", ""},
		{"", "Bearer", ""},
		{"", "Bearer_" + key, ""},
		{"", key, ""},
		{"", "", ""},
	} {
		h := http.Header{}
		if c.apiKey != "" {
			h.Set("X-API-Key", c.apiKey)
		}
		if c.authorization != "" {
			h.Set("Authorization", c.authorization)
		}
		if got := models.CredentialFromHeader(h); got != c.want {
			t.Errorf("CredentialFromHeader(X-API-Key %q, Authorization %q) = %q, want %q", c.apiKey, c.authorization, got, c.want)
		}
	}
}
