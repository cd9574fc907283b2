package rest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientIsUpToDate regenerates the client from rest/openapi.yaml into a temporary file and fails
// when the committed client.gen.go differs (as CI does), so that a change of the document without
// `go generate ./rest` is caught by go test too.
func TestClientIsUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerating the client is skipped in -short mode")
	}
	cfg, err := os.ReadFile("client/oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "client.gen.go")
	tmpCfg := filepath.Join(t.TempDir(), "oapi-codegen.yaml")
	if err := os.WriteFile(tmpCfg, []byte(strings.Replace(string(cfg), "output: client/client.gen.go", "output: "+out, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", tmpCfg, "openapi.yaml")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, msg)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("client/client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatal("rest/client/client.gen.go is stale: rest/openapi.yaml changed; run `go generate ./rest` and commit")
	}
}
