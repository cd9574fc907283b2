package graph_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"gopkg.in/yaml.v3"
)

// camel maps a REST field name to its GraphQL name: created_at -> createdAt (jobId stays jobId).
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// TestJobVideoAndBalanceShapesAgree compares the job, video task and balance shapes of the REST
// document (rest/openapi.yaml) and the GraphQL schema (graph/*.graphqls, the schema gqlgen serves),
// snake_case mapped to camelCase: the same fields for the same thing. Intended differences are listed
// with their reason.
func TestJobVideoAndBalanceShapesAgree(t *testing.T) {
	raw, err := os.ReadFile("../rest/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*.graphqls")
	var sources []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, &ast.Source{Name: f, Input: string(b)})
	}
	schema, gerr := gqlparser.LoadSchema(sources...)
	if gerr != nil {
		t.Fatalf("schema: %v", gerr)
	}
	// The balance answer is described inline under GET /api/balance.
	balance := map[string]any{}
	if get, ok := doc.Paths["/api/balance"]["get"].(map[string]any); ok {
		s := get["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		balance = s["properties"].(map[string]any)
	}
	// REST-only fields, with the reason.
	restOnly := map[string]string{
		"ok": "the REST surface adds \"ok\": true where the spec shows it (README, Architecture); GraphQL answers carry no envelope flag",
	}
	for _, c := range []struct{ rest, graph string }{{"Job", "Job"}, {"VideoTask", "VideoTask"}, {"GET /api/balance", "Balance"}} {
		props := doc.Components.Schemas[c.rest].Properties
		if c.graph == "Balance" {
			props = balance
		}
		var rest []string
		for name := range props {
			if _, skip := restOnly[name]; !skip {
				rest = append(rest, camel(name))
			}
		}
		def := schema.Types[c.graph]
		if def == nil || len(rest) == 0 {
			t.Fatalf("%s: REST fields %v, GraphQL type %v", c.rest, rest, def)
		}
		var graph []string
		for _, f := range def.Fields {
			if !strings.HasPrefix(f.Name, "__") {
				graph = append(graph, f.Name)
			}
		}
		slices.Sort(rest)
		slices.Sort(graph)
		if !slices.Equal(rest, graph) {
			t.Errorf("%s: REST %v, GraphQL %s %v", c.rest, rest, c.graph, graph)
		}
	}
	// The README names these fields of these shapes: each must be a field of its REST schema.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct{ phrase, field, schema string }{
		{"(cdn_url is the picture)", "cdn_url", "Job"}, {"jq -r .jobId", "jobId", "Job"}, {"(video_url is the file)", "video_url", "VideoTask"},
	} {
		if !strings.Contains(string(readme), n.phrase) {
			t.Errorf("the README no longer says %q: update this test", n.phrase)
		}
		if _, ok := doc.Components.Schemas[n.schema].Properties[n.field]; !ok {
			t.Errorf("the README names %s of %s, which the REST schema lacks", n.field, n.schema)
		}
	}
}
