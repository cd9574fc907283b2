package models_test

import (
	"go/ast"
	"go/types"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// maxExportedMethods bounds the exported methods of any exported type of the module: the core offers
// small domain services (app.Jobs(), app.Claims(), ...), not one type with every operation.
const maxExportedMethods = 40

// TestNoTypeHasMoreThanFortyExportedMethods type-checks the whole module and counts the exported methods
// of every exported type (its own and those promoted by embedding; an interface's methods). Code a
// generator wrote (a "Code generated ... DO NOT EDIT." file: the OpenAPI client, gqlgen's executor) is
// left out: its shape is the generator's, one method per operation of the schema.
func TestNoTypeHasMoreThanFortyExportedMethods(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedFiles, Dir: ".."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		generated := map[string]bool{}
		for _, f := range p.Syntax {
			if ast.IsGenerated(f) {
				generated[p.Fset.Position(f.Pos()).Filename] = true
			}
		}
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || !tn.Exported() || generated[p.Fset.Position(tn.Pos()).Filename] {
				continue
			}
			checked++
			var set *types.MethodSet
			if _, isIface := tn.Type().Underlying().(*types.Interface); isIface {
				set = types.NewMethodSet(tn.Type())
			} else {
				set = types.NewMethodSet(types.NewPointer(tn.Type()))
			}
			n := 0
			for i := range set.Len() {
				if set.At(i).Obj().Exported() {
					n++
				}
			}
			if n > maxExportedMethods {
				t.Errorf("%s.%s has %d exported methods, more than %d: split it into smaller services", p.PkgPath, name, n, maxExportedMethods)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d exported types checked: the module was not loaded", checked)
	}
}

// TestSurfacesHoldTheCoreAndInfrastructureImportsNoneOfIt checks the import rules of the architecture:
// the surfaces (rest, graph, web) import nothing of jobs (they call the core's domain services), and the
// infrastructure packages under models import nothing of the core.
func TestSurfacesHoldTheCoreAndInfrastructureImportsNoneOfIt(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedImports, Dir: ".."}
	pkgs, err := packages.Load(cfg, "./rest/...", "./graph/...", "./web/...", "./models/...")
	if err != nil {
		t.Fatal(err)
	}
	infrastructure := []string{"studio/models/config", "studio/models/mail", "studio/models/media", "studio/models/metrics", "studio/models/oidc", "studio/models/pglisten"}
	seen := 0
	for _, p := range pkgs {
		surface := strings.HasPrefix(p.PkgPath, "studio/rest") || strings.HasPrefix(p.PkgPath, "studio/graph") || strings.HasPrefix(p.PkgPath, "studio/web")
		infra := slices.Contains(infrastructure, p.PkgPath)
		if infra {
			seen++
		}
		for path := range p.Imports {
			if surface && (path == "studio/jobs" || strings.HasPrefix(path, "studio/jobs/")) {
				t.Errorf("the surface %s imports %s: call the core (models.App) instead", p.PkgPath, path)
			}
			if infra && strings.HasPrefix(path, "studio/") && !strings.HasPrefix(path, p.PkgPath+"/") {
				t.Errorf("the infrastructure package %s imports %s: it must import nothing of the core", p.PkgPath, path)
			}
		}
	}
	if seen != len(infrastructure) {
		t.Fatalf("found %d of the %d infrastructure packages", seen, len(infrastructure))
	}
}
