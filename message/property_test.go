package message_test

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/petrelmq/petrel/message"
)

func TestParseType(t *testing.T) {
	names := []string{"bool", "byte", "bytes", "int16", "int32", "int64", "float32", "float64", "string"}
	for i, name := range names {
		want := message.Type(i + 1)
		if got := want.String(); got != name {
			t.Errorf("Type(%d).String() = %q, want %q", i+1, got, name)
		}
		if got, err := message.ParseType(name); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v", name, got, err)
		}
	}
	if got := message.TypeString; got != 9 || message.TypeBool != 1 {
		t.Fatal("type tags are wire values and must not move")
	}
	if got := message.Type(0).String(); got != "type(0)" {
		t.Errorf("Type(0).String() = %q", got)
	}
	for _, in := range []string{"", "int", "uint8", "type(1)", "[]byte"} {
		if _, err := message.ParseType(in); !errors.Is(err, message.ErrPropertyType) {
			t.Errorf("ParseType(%q) err = %v, want ErrPropertyType", in, err)
		}
	}
}

func TestParseValue(t *testing.T) {
	cases := []struct {
		typ  message.Type
		in   string
		want message.Value
		ok   bool
	}{
		{message.TypeBool, "true", message.Bool(true), true},
		{message.TypeBool, "0", message.Bool(false), true},
		{message.TypeBool, "yes", message.Value{}, false},
		{message.TypeByte, "255", message.Byte(255), true},
		{message.TypeByte, "256", message.Value{}, false},
		{message.TypeByte, "-1", message.Value{}, false},
		{message.TypeByte, "0x10", message.Value{}, false},
		{message.TypeBytes, "AAH+/w==", message.Bytes([]byte{0, 1, 0xfe, 0xff}), true},
		{message.TypeBytes, "", message.Bytes(nil), true},
		{message.TypeBytes, "AAH-_w", message.Value{}, false},
		{message.TypeInt16, "-32768", message.Int16(math.MinInt16), true},
		{message.TypeInt16, "32768", message.Value{}, false},
		{message.TypeInt32, "42", message.Int32(42), true},
		{message.TypeInt32, "2147483648", message.Value{}, false},
		{message.TypeInt32, "4.2", message.Value{}, false},
		{message.TypeInt64, "-9223372036854775808", message.Int64(math.MinInt64), true},
		{message.TypeInt64, "", message.Value{}, false},
		{message.TypeFloat32, "1.5", message.Float32(1.5), true},
		{message.TypeFloat32, "-Inf", message.Float32(float32(math.Inf(-1))), true},
		{message.TypeFloat32, "1e39", message.Value{}, false},
		{message.TypeFloat64, "1e-320", message.Float64(1e-320), true},
		{message.TypeFloat64, "x", message.Value{}, false},
		{message.TypeString, "", message.String(""), true},
		{message.TypeString, "int32:42 ü", message.String("int32:42 ü"), true},
		{0, "1", message.Value{}, false},
		{10, "1", message.Value{}, false},
	}
	for _, c := range cases {
		t.Run(c.typ.String()+":"+c.in, func(t *testing.T) {
			got, err := message.ParseValue(c.typ, c.in)
			if !c.ok {
				if !errors.Is(err, message.ErrPropertyType) {
					t.Fatalf("err = %v, want ErrPropertyType", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %#v, %v; want %#v", got, err, c.want)
			}
		})
	}
}

// String writes what ParseValue reads back, for every type and edge value.
func TestValueStringRoundTrip(t *testing.T) {
	for _, p := range allTypes() {
		s := p.Value.String()
		back, err := message.ParseValue(p.Value.Type(), s)
		if err != nil || back != p.Value {
			t.Errorf("%s: ParseValue(%s, %q) = %v, %v", p.Key, p.Value.Type(), s, back, err)
		}
	}
	for v, want := range map[message.Value]string{
		message.Bool(true): "true", message.Byte(7): "7", message.Int16(-3): "-3",
		message.Float32(0.1): "0.1", message.Float64(0.1): "0.1", message.String("a b"): "a b",
		message.Bytes([]byte("hi")): "aGk=", {}: "<invalid>",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// Each accessor returns its zero value for any other type.
func TestValueAccessors(t *testing.T) {
	get := func(v message.Value) []any {
		return []any{v.Bool(), v.ByteVal(), v.BytesVal(), v.Int16(), v.Int32(), v.Int64(),
			v.Float32(), v.Float64(), v.Str()}
	}
	values := []message.Value{
		message.Bool(true), message.Byte(1), message.Bytes([]byte{1}), message.Int16(1), message.Int32(1),
		message.Int64(1), message.Float32(1), message.Float64(1), message.String("1"),
	}
	ones := []any{true, byte(1), []byte{1}, int16(1), int32(1), int64(1), float32(1), float64(1), "1"}
	zeros := []any{false, byte(0), []byte(nil), int16(0), int32(0), int64(0), float32(0), float64(0), ""}
	for i, v := range values {
		if v.Type() != message.Type(i+1) {
			t.Errorf("%v.Type() = %v", v, v.Type())
		}
		for j, got := range get(v) {
			want := zeros[j]
			if i == j {
				want = ones[j]
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s value, accessor %d: got %#v, want %#v", v.Type(), j, got, want)
			}
		}
		if !reflect.DeepEqual(v.Any(), ones[i]) {
			t.Errorf("%s Any() = %#v", v.Type(), v.Any())
		}
	}
	if got := (message.Value{}).Any(); got != nil {
		t.Errorf("zero Value Any() = %#v", got)
	}
}

// Bytes copies in and BytesVal copies out, so a Value cannot be changed
// through a slice.
func TestBytesValueIsImmutable(t *testing.T) {
	b := []byte("abc")
	v := message.Bytes(b)
	b[0] = 'X'
	out := v.BytesVal()
	out[1] = 'Y'
	if got := string(v.BytesVal()); got != "abc" {
		t.Fatalf("value changed to %q", got)
	}
}

func TestProperties(t *testing.T) {
	var p message.Properties
	if _, ok := p.Get("a"); ok {
		t.Fatal("Get on nil Properties found a key")
	}
	p.Set("a", message.Int32(1))
	p.Set("b", message.String("x"))
	p.Set("c", message.Bool(true))
	p.Set("a", message.Int64(2)) // replaces in place
	want := message.Properties{{"a", message.Int64(2)}, {"b", message.String("x")}, {"c", message.Bool(true)}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("after Set: %v", p)
	}
	if v, ok := p.Get("b"); !ok || v.Str() != "x" {
		t.Fatalf("Get(b) = %v, %v", v, ok)
	}
	p.Delete("b")
	p.Delete("missing")
	if want := (message.Properties{{"a", message.Int64(2)}, {"c", message.Bool(true)}}); !reflect.DeepEqual(p, want) {
		t.Fatalf("after Delete: %v", p)
	}
	p.Delete("a")
	p.Delete("c")
	if p != nil {
		t.Fatalf("deleting every key left %#v, want nil", p)
	}
}
