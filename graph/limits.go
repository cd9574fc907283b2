package graph

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"studio/models"
)

// listEstimate is the number of rows assumed for a list whose size the query does not set.
const listEstimate = 10

// setComplexity weighs the list fields by how many rows they return: a page of jobs by its size, other
// lists by listEstimate, so that aliases cannot multiply a query's work unnoticed.
func setComplexity(c *ComplexityRoot) {
	c.Query.Jobs = func(child int, first *int, _ *string, _ *string) int {
		n := 20
		if first != nil {
			n = min(max(*first, 1), 100)
		}
		return 1 + n*child
	}
	list := func(child int) int { return 1 + listEstimate*child }
	c.Query.Accounts = list
	c.Query.Skills = list
	c.Query.Templates = func(child int, _ *string, _ *string) int { return list(child) }
	c.Query.VideoTemplates = func(child int, _ *string) int { return list(child) }
	c.Query.TemplateHooks = func(child int, _ *string) int { return list(child) }
	c.Query.VideoTasks = func(child int, _ *int, pageSize *int, _ *string) int {
		n := 20
		if pageSize != nil {
			n = min(max(*pageSize, 1), 100)
		}
		return 1 + n*child
	}
	c.Mutation.GenerateBatch = func(child int, items []models.GenerateRequest) int {
		return 1 + max(len(items), 1)*child
	}
}

// depthLimit refuses operations nested deeper than max fields (introspection fields are not counted, so
// that GraphiQL's introspection query passes).
type depthLimit struct{ max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = depthLimit{}

// ExtensionName names the extension.
func (depthLimit) ExtensionName() string { return "DepthLimit" }

// Validate accepts any schema.
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext measures the operation before it runs.
func (d depthLimit) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if depth := selectionDepth(oc.Operation.SelectionSet, map[string]bool{}); depth > d.max {
		err := gqlerror.Errorf("operation is %d levels deep, which exceeds the limit of %d", depth, d.max)
		err.Extensions = map[string]any{"code": "DEPTH_LIMIT_EXCEEDED"}
		return err
	}
	return nil
}

// selectionDepth returns the deepest nesting of fields in set, following fragments (each once per path).
func selectionDepth(set ast.SelectionSet, visiting map[string]bool) int {
	deepest := 0
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			if strings.HasPrefix(s.Name, "__") {
				continue
			}
			d = 1 + selectionDepth(s.SelectionSet, visiting)
		case *ast.InlineFragment:
			d = selectionDepth(s.SelectionSet, visiting)
		case *ast.FragmentSpread:
			if s.Definition == nil || visiting[s.Name] {
				continue
			}
			visiting[s.Name] = true
			d = selectionDepth(s.Definition.SelectionSet, visiting)
			delete(visiting, s.Name)
		default:
			panic(fmt.Sprintf("graph: unknown selection %T", sel))
		}
		deepest = max(deepest, d)
	}
	return deepest
}
