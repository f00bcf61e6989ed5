package conf

import (
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/queue"
)

// diffBase sets a value for most keys, so that a change to any of them is
// a change of a written value, not only from absent to present.
const diffBase = `
node: {name: n1, data_dir: /data}
listen: 127.0.0.1:7400
secret: s3cret
nodes:
  - {name: hub-1, connector: 'tcp://127.0.0.1:7401'}
  - {name: hub-2, connector: 'tcp://127.0.0.1:7402'}
routes:
  - {node: plant-9, via: hub-1}
link: {window: 10, max_frame: 1MiB}
store: {sync: full, max_bytes: 1GiB}
limits: {max_body: 1MiB}
addresses:
  - name: orders
  - {name: out, role: send, node: plant-9}
log: {level: info, format: text}
`

func mustParse(t *testing.T, doc string) *File {
	t.Helper()
	f, err := Parse("petrel.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *File)
		want   Diff
	}{
		{"nothing", func(*File) {}, Diff{}},
		{"listen", func(f *File) { f.Listen = ":7500" }, Diff{Restart: []string{"listen"}}},
		{"node name", func(f *File) { f.Node.Name = "n2" }, Diff{Restart: []string{"node.name"}}},
		{"data dir", func(f *File) { f.Node.DataDir = "/other" }, Diff{Restart: []string{"node.data_dir"}}},
		{"store keys each", func(f *File) { f.Store.Sync = queue.SyncNormal; f.Store.PrefetchMessages = 3 },
			Diff{Restart: []string{"store.sync", "store.prefetch_messages"}}},
		{"log format needs restart", func(f *File) { f.Log.Format = LogJSON }, Diff{Restart: []string{"log.format"}}},
		{"log level is live", func(f *File) { f.Log.Level = slog.LevelDebug }, Diff{Changed: []string{SectionLog}}},
		{"secret", func(f *File) { f.Secret = "other" }, Diff{Changed: []string{SectionSecret}}},
		{"secret_file counts as secret", func(f *File) { f.SecretFile = "/etc/secret" }, Diff{Changed: []string{SectionSecret}}},
		{"connector", func(f *File) { f.Nodes[1].Connector = mustConnectors(t, "tcp://127.0.0.1:9") },
			Diff{Changed: []string{SectionNodes}}},
		{"route added", func(f *File) { f.Routes = append(f.Routes, RouteSection{Node: "plant-10", Via: "hub-2"}) },
			Diff{Changed: []string{SectionRoutes}}},
		{"link tuning", func(f *File) { f.Link.Window = 11 }, Diff{Restart: []string{"link.window"}}},
		{"limits", func(f *File) { f.Limits.MaxBody = 2 << 20 }, Diff{Restart: []string{"limits.max_body"}}},
		{"discovery is live", func(f *File) { f.Discovery.Enabled = true }, Diff{Changed: []string{SectionDiscovery}}},
		{"auto_create", func(f *File) { no := false; f.AutoCreate = &no }, Diff{Changed: []string{SectionAutoCreate}}},
		{"relay added", func(f *File) {
			f.Addresses = append(f.Addresses, AddressSection{Name: "telemetry", Role: address.RoleRelay})
		}, Diff{Changed: []string{SectionAddresses}}},
		{"role changed", func(f *File) { f.Addresses[0].Role = address.RoleRelay }, Diff{Changed: []string{SectionAddresses}}},
		{"reordered addresses", func(f *File) { slices.Reverse(f.Addresses) }, Diff{Changed: []string{SectionAddresses}}},
		{"several live, in file order", func(f *File) {
			f.Addresses[0].MaxDeliveries = 3
			f.Routes = nil
			f.Nodes = f.Nodes[:1]
		}, Diff{Changed: []string{SectionNodes, SectionRoutes, SectionAddresses}}},
		{"restart and live together", func(f *File) {
			f.Listen = ":7500"
			f.Routes = nil
			f.Store.Sync = queue.SyncNormal
			f.Log.Level = slog.LevelWarn
		}, Diff{Restart: []string{"listen", "store.sync"}, Changed: []string{SectionRoutes, SectionLog}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, new := mustParse(t, diffBase), mustParse(t, diffBase)
			tt.change(new)
			got := Compare(old, new)
			if !reflect.DeepEqual(got, tt.want) && !(got.Empty() && tt.want.Empty()) {
				t.Errorf("Compare = %#v, want %#v", got, tt.want)
			}
			if got.Empty() != tt.want.Empty() || got.NeedsRestart() != tt.want.NeedsRestart() {
				t.Errorf("Empty, NeedsRestart = %v, %v; want %v, %v", got.Empty(), got.NeedsRestart(), tt.want.Empty(), tt.want.NeedsRestart())
			}
		})
	}
}

// TestCompareSpelling checks that two files that configure the same node
// compare equal, however they write it.
func TestCompareSpelling(t *testing.T) {
	a := mustParse(t, diffBase)
	b := mustParse(t, "# a comment\nx-unused: 1\n"+strings.NewReplacer(
		"1GiB", "1073741824", "max_frame: 1MiB", "max_frame: 1024KiB", "'tcp://127.0.0.1:7401'", "'tcp://127.0.0.1:07401'",
	).Replace(diffBase))
	if d := Compare(a, b); !d.Empty() {
		t.Errorf("Compare = %v, want no change", d)
	}
	// An empty list says the same as none.
	a, b = mustParse(t, "node: {name: n1}\n"), mustParse(t, "node: {name: n1}\nroutes: []\naddresses: []\n")
	if d := Compare(a, b); !d.Empty() {
		t.Errorf("Compare(no lists, empty lists) = %v, want no change", d)
	}
}

// leafKeys lists the key paths of File that reloadRules decides, down to
// the keys of restart sections, with the rule of each.
func leafKeys(t reflect.Type, path string, out map[string]string) {
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		key, ft := join(path, name), t.Field(i).Type
		rule, ok := reloadRules[key]
		if !ok && path != "" {
			rule, ok = reloadRules[path], true // a key of a ruled section
		}
		switch {
		case ft.Kind() == reflect.Struct && (!ok || rule == needsRestart):
			leafKeys(ft, key, out)
		case ok:
			out[key] = rule
		default:
			out[key] = "no rule"
		}
	}
}

// TestReloadRulesCoverEveryKey asks whoever adds a key to File to decide
// whether it changes live, and checks that no rule names a key that is gone.
func TestReloadRulesCoverEveryKey(t *testing.T) {
	keys := map[string]string{}
	leafKeys(reflect.TypeFor[File](), "", keys)
	for key, rule := range keys {
		if rule == "no rule" {
			t.Errorf("key %s has no rule in reloadRules: decide whether it changes live", key)
		}
	}
	for key := range reloadRules {
		_, leaf := keys[key]
		parentOf := false
		for k := range keys {
			parentOf = parentOf || strings.HasPrefix(k, key+".")
		}
		if !leaf && !parentOf {
			t.Errorf("reloadRules names %s, which File does not have", key)
		}
	}
}

// TestCompareEveryKey changes each key on its own and checks that Compare
// reports it, under its rule.
func TestCompareEveryKey(t *testing.T) {
	keys := map[string]string{}
	leafKeys(reflect.TypeFor[File](), "", keys)
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		rule := keys[key]
		t.Run(key, func(t *testing.T) {
			old, new := mustParse(t, diffBase), mustParse(t, diffBase)
			v := reflect.ValueOf(new).Elem()
			for _, name := range strings.Split(key, ".") {
				v = v.Field(fieldIndex(v.Type())[name])
			}
			alter(t, v)
			want := Diff{Changed: []string{rule}}
			if rule == needsRestart {
				want = Diff{Restart: []string{key}}
			}
			if got := Compare(old, new); !reflect.DeepEqual(got, want) {
				t.Errorf("Compare = %#v, want %#v", got, want)
			}
		})
	}
}

// alter changes v to a different value of its type.
func alter(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "-changed")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if !v.IsNil() {
			p.Elem().Set(v.Elem())
		}
		alter(t, p.Elem())
		v.Set(p)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
	case reflect.Struct: // a live section: one key stands for all
		alter(t, v.Field(0))
	default:
		t.Fatalf("alter: no way to change a %s", v.Type())
	}
}

func TestDiffString(t *testing.T) {
	for _, tt := range []struct {
		d    Diff
		want string
	}{
		{Diff{}, "no change"},
		{Diff{Changed: []string{"routes", "nodes"}}, "changed: routes, nodes"},
		{Diff{Restart: []string{"listen"}, Changed: []string{"routes"}}, "changed: routes; needs restart: listen"},
	} {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.d, got, tt.want)
		}
	}
}
