package gosrc

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Const is one package-level constant.
type Const struct {
	Name  string
	Value constant.Value
}

// Field is one field of a struct type, in declaration order.
type Field struct {
	Name   string // "_" for padding
	Offset int64
	Size   int64
}

// Struct is one package-level struct type.
type Struct struct {
	Name   string
	Size   int64
	Fields []Field
}

// Package is what Load found.
type Package struct {
	Consts  []Const          // C-named constants, sorted by name
	Sizeofs map[string]int64 // Sizeof<Type> constants by type name
	Structs []Struct         // sorted by name
}

// cName matches the constants that mirror C names (all upper case), as
// opposed to the Go-only Sizeof* constants.
var cName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// Load parses and type-checks the non-test Go files in dir (the uapi
// package) with amd64 sizes.
func Load(dir string) (*Package, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("gosrc: no Go files in %s", dir)
	}
	sizes := types.SizesFor("gc", "amd64")
	conf := types.Config{Importer: importer.Default(), Sizes: sizes}
	pkg, err := conf.Check("usb4verbs/uapi", fset, files, nil)
	if err != nil {
		return nil, fmt.Errorf("gosrc: type-check %s: %w", dir, err)
	}
	out := &Package{Sizeofs: map[string]int64{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() { // sorted
		switch obj := scope.Lookup(name).(type) {
		case *types.Const:
			c := Const{Name: name, Value: obj.Val()}
			if cName.MatchString(name) {
				out.Consts = append(out.Consts, c)
			} else if t, ok := strings.CutPrefix(name, "Sizeof"); ok {
				if v, ok := c.Int64(); ok {
					out.Sizeofs[t] = v
				}
			}
		case *types.TypeName:
			st, ok := obj.Type().Underlying().(*types.Struct)
			if !ok || !obj.Exported() {
				continue
			}
			s := Struct{Name: name, Size: sizes.Sizeof(st)}
			vars := make([]*types.Var, st.NumFields())
			for i := range vars {
				vars[i] = st.Field(i)
			}
			offs := sizes.Offsetsof(vars)
			for i, v := range vars {
				s.Fields = append(s.Fields, Field{Name: v.Name(), Offset: offs[i], Size: sizes.Sizeof(v.Type())})
			}
			out.Structs = append(out.Structs, s)
		}
	}
	sort.Slice(out.Consts, func(i, j int) bool { return out.Consts[i].Name < out.Consts[j].Name })
	return out, nil
}

// Int64 returns c's value as an int64, or false if it is not an integer
// that fits.
func (c Const) Int64() (int64, bool) {
	v := constant.ToInt(c.Value)
	if v.Kind() != constant.Int {
		return 0, false
	}
	return constant.Int64Val(v)
}
