package petrel

import (
	"flag"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateExports = flag.Bool("update-exports", false, "rewrite testdata/exports.golden from the package's exported identifiers")

// The module root is what an embedder reads (`go doc`), so every exported
// identifier is a promise. This test lists them and compares the list with
// testdata/exports.golden: a new export fails it until the golden file is
// updated on purpose (go test -run TestExports -update-exports .).
func TestExports(t *testing.T) {
	got := exportedIdentifiers(t)
	const golden = "testdata/exports.golden"
	if *updateExports {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read %s: %v (run with -update-exports to create it)", golden, err)
	}
	want := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("new export %q: unexport it, or add it to %s if embedders need it (-update-exports)", g, golden)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("export %q is gone: removing it breaks embedders; update %s if that is meant (-update-exports)", w, golden)
		}
	}
}

// exportedIdentifiers lists what `go doc` shows of the package: its
// exported constants, variables, functions, types, and the exported
// methods and fields of its exported types, one per line, sorted.
func exportedIdentifiers(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p := doc.New(pkgs["petrel"], "github.com/petrelmq/petrel", 0)
	var out []string
	values := func(kind string, vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				out = append(out, kind+" "+n)
			}
		}
	}
	values("const", p.Consts)
	values("var", p.Vars)
	for _, f := range p.Funcs {
		out = append(out, "func "+f.Name)
	}
	for _, ty := range p.Types {
		out = append(out, "type "+ty.Name)
		values("const", ty.Consts)
		values("var", ty.Vars)
		for _, f := range ty.Funcs {
			out = append(out, "func "+f.Name)
		}
		for _, m := range ty.Methods {
			out = append(out, "method "+ty.Name+"."+m.Name)
		}
		if st, ok := ty.Decl.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType); ok {
			for _, f := range st.Fields.List {
				for _, n := range f.Names {
					if n.IsExported() {
						out = append(out, "field "+ty.Name+"."+n.Name)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
