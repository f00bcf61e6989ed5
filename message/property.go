package message

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Type is the type of an application property value. Its numeric value is
// the tag written on the wire, so the constants must never be renumbered.
type Type uint8

// The property types. The zero Type is invalid, so a zero Value is caught
// instead of being sent as something plausible.
const (
	TypeBool Type = iota + 1
	TypeByte
	TypeBytes
	TypeInt16
	TypeInt32
	TypeInt64
	TypeFloat32
	TypeFloat64
	TypeString
)

var typeNames = [...]string{
	TypeBool: "bool", TypeByte: "byte", TypeBytes: "bytes",
	TypeInt16: "int16", TypeInt32: "int32", TypeInt64: "int64",
	TypeFloat32: "float32", TypeFloat64: "float64", TypeString: "string",
}

// String returns the type's name as ParseType reads it, or "type(N)".
func (t Type) String() string {
	if t.valid() {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType reads a type name as String writes it, ignoring case. Errors wrap
// ErrPropertyType.
func ParseType(s string) (Type, error) {
	for t := TypeBool; t <= TypeString; t++ {
		if strings.EqualFold(s, typeNames[t]) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("property type %s: want one of %s: %w",
		clip(s), strings.Join(typeNames[1:], ", "), ErrPropertyType)
}

func (t Type) valid() bool {
	return t >= TypeBool && t <= TypeString
}

// width is the size of a value of type t on the wire, not counting its type
// tag; 0 for the variable-length types and for invalid ones.
func (t Type) width() int {
	switch t {
	case TypeBool, TypeByte:
		return 1
	case TypeInt16:
		return 2
	case TypeInt32, TypeFloat32:
		return 4
	case TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Value is a typed property value. Make one with Bool, Int32, String, ...
//
// A Value is immutable: Bytes copies its argument and BytesVal returns a copy,
// so a Value can be shared freely. Numbers are held as raw bits, which is why
// two Values compare equal (with == or reflect.DeepEqual) exactly when they
// have the same type and the same bits, NaN payloads included.
type Value struct {
	t Type
	n uint64 // bool, byte and integers (sign-extended), or IEEE-754 bits
	s string // string and bytes
}

// Bool returns a bool value.
func Bool(v bool) Value {
	if v {
		return Value{t: TypeBool, n: 1}
	}
	return Value{t: TypeBool}
}

// Byte returns a byte value.
func Byte(v byte) Value { return Value{t: TypeByte, n: uint64(v)} }

// Bytes returns a bytes value holding a copy of v. Nil and empty v give the
// same Value.
func Bytes(v []byte) Value { return Value{t: TypeBytes, s: string(v)} }

// Int16 returns an int16 value.
func Int16(v int16) Value { return Value{t: TypeInt16, n: uint64(v)} }

// Int32 returns an int32 value.
func Int32(v int32) Value { return Value{t: TypeInt32, n: uint64(v)} }

// Int64 returns an int64 value.
func Int64(v int64) Value { return Value{t: TypeInt64, n: uint64(v)} }

// Float32 returns a float32 value; its bits are kept exactly.
func Float32(v float32) Value { return Value{t: TypeFloat32, n: uint64(math.Float32bits(v))} }

// Float64 returns a float64 value; its bits are kept exactly.
func Float64(v float64) Value { return Value{t: TypeFloat64, n: math.Float64bits(v)} }

// String returns a string value.
func String(v string) Value { return Value{t: TypeString, s: v} }

// Type returns the value's type; 0 for the zero Value.
func (v Value) Type() Type { return v.t }

// The accessors below each return the zero value of their Go type when v
// holds another type, so a caller that must know checks Type first.

// Bool returns a bool value; false for other types.
func (v Value) Bool() bool { return v.t == TypeBool && v.n != 0 }

// ByteVal returns a byte value; 0 for other types.
func (v Value) ByteVal() byte { return byte(v.num(TypeByte)) }

// Int16 returns an int16 value; 0 for other types.
func (v Value) Int16() int16 { return int16(v.num(TypeInt16)) }

// Int32 returns an int32 value; 0 for other types.
func (v Value) Int32() int32 { return int32(v.num(TypeInt32)) }

// Int64 returns an int64 value; 0 for other types (an int32 is not widened).
func (v Value) Int64() int64 { return int64(v.num(TypeInt64)) }

// Float32 returns a float32 value; 0 for other types.
func (v Value) Float32() float32 { return math.Float32frombits(uint32(v.num(TypeFloat32))) }

// Float64 returns a float64 value; 0 for other types.
func (v Value) Float64() float64 { return math.Float64frombits(v.num(TypeFloat64)) }

// Str returns a string value; "" for other types.
func (v Value) Str() string {
	if v.t != TypeString {
		return ""
	}
	return v.s
}

// BytesVal returns a copy of a bytes value; nil for other types and for an
// empty bytes value (empty and nil bytes are the same Value).
func (v Value) BytesVal() []byte {
	if v.t != TypeBytes || v.s == "" {
		return nil
	}
	return []byte(v.s)
}

func (v Value) num(t Type) uint64 {
	if v.t != t {
		return 0
	}
	return v.n
}

// Any returns the value as its Go type (bool, byte, []byte, int16, int32,
// int64, float32, float64 or string); nil for the zero Value.
func (v Value) Any() any {
	switch v.t {
	case TypeBool:
		return v.Bool()
	case TypeByte:
		return v.ByteVal()
	case TypeBytes:
		return v.BytesVal()
	case TypeInt16:
		return v.Int16()
	case TypeInt32:
		return v.Int32()
	case TypeInt64:
		return v.Int64()
	case TypeFloat32:
		return v.Float32()
	case TypeFloat64:
		return v.Float64()
	case TypeString:
		return v.s
	}
	return nil
}

// String returns the value in the form ParseValue reads back: decimal
// numbers, the shortest float that round-trips, standard base64 for bytes,
// and a string as it is (unquoted). The zero Value prints as "<invalid>".
func (v Value) String() string {
	switch v.t {
	case TypeBool:
		return strconv.FormatBool(v.Bool())
	case TypeByte:
		return strconv.FormatUint(uint64(v.ByteVal()), 10)
	case TypeBytes:
		return base64.StdEncoding.EncodeToString([]byte(v.s))
	case TypeInt16, TypeInt32, TypeInt64:
		return strconv.FormatInt(int64(v.n), 10)
	case TypeFloat32:
		return strconv.FormatFloat(float64(v.Float32()), 'g', -1, 32)
	case TypeFloat64:
		return strconv.FormatFloat(v.Float64(), 'g', -1, 64)
	case TypeString:
		return v.s
	}
	return "<invalid>"
}

// ParseValue reads s as a value of type t, for command lines such as
// `--prop key=int32:42`. It reads what Value.String writes: bools as
// strconv.ParseBool, integers in decimal, floats as strconv.ParseFloat
// (including "NaN" and "Inf"), bytes as standard padded base64. Errors wrap
// ErrPropertyType.
func ParseValue(t Type, s string) (Value, error) {
	var v Value
	var err error
	switch t {
	case TypeBool:
		var b bool
		b, err = strconv.ParseBool(s)
		v = Bool(b)
	case TypeByte:
		var u uint64
		u, err = strconv.ParseUint(s, 10, 8)
		v = Byte(byte(u))
	case TypeBytes:
		var b []byte
		b, err = base64.StdEncoding.DecodeString(s)
		v = Bytes(b)
	case TypeInt16, TypeInt32, TypeInt64:
		var i int64
		i, err = strconv.ParseInt(s, 10, 8*t.width())
		v = Value{t: t, n: uint64(i)}
	case TypeFloat32:
		var f float64
		f, err = strconv.ParseFloat(s, 32)
		v = Float32(float32(f))
	case TypeFloat64:
		var f float64
		f, err = strconv.ParseFloat(s, 64)
		v = Float64(f)
	case TypeString:
		v = String(s)
	default:
		return Value{}, fmt.Errorf("parse value %s: %s is not a property type: %w", clip(s), t, ErrPropertyType)
	}
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			err = ne.Err // "invalid syntax" or "value out of range", without the strconv noise
		}
		return Value{}, fmt.Errorf("value %s is not a valid %s (%v): %w", clip(s), t, err, ErrPropertyType)
	}
	return v, nil
}

// size is how many bytes the value counts against Limits.MaxPropertyBytes:
// its wire width for fixed types, its length for bytes and strings.
func (v Value) size() int {
	if v.t == TypeBytes || v.t == TypeString {
		return len(v.s)
	}
	return v.t.width()
}

// Property is one application property.
type Property struct {
	Key   string
	Value Value
}

// Properties are a message's application properties, in insertion order
// with unique keys. A slice rather than a map keeps order stable on the wire
// and costs less for the handful of properties a message usually has.
type Properties []Property

// Get returns the value under key.
func (p Properties) Get(key string) (Value, bool) {
	if i := p.index(key); i >= 0 {
		return p[i].Value, true
	}
	return Value{}, false
}

// Set puts v under key, replacing an existing value in place so that the
// key keeps its position.
func (p *Properties) Set(key string, v Value) {
	if i := p.index(key); i >= 0 {
		(*p)[i].Value = v
		return
	}
	*p = append(*p, Property{Key: key, Value: v})
}

// Delete removes key, keeping the order of the others. Deleting the last
// property leaves nil, which is what Decode returns for no properties.
func (p *Properties) Delete(key string) {
	i := p.index(key)
	if i < 0 {
		return
	}
	*p = slices.Delete(*p, i, i+1)
	if len(*p) == 0 {
		*p = nil
	}
}

func (p Properties) index(key string) int {
	for i := range p {
		if p[i].Key == key {
			return i
		}
	}
	return -1
}

// smallKeys is how many keys are checked for duplicates pairwise; past it
// a map keeps a hostile or huge property count from making the check
// quadratic.
const smallKeys = 8

// duplicate returns the first key that appears twice in p.
func (p Properties) duplicate() (string, bool) {
	if len(p) <= smallKeys {
		for i := 1; i < len(p); i++ {
			for j := range i {
				if p[j].Key == p[i].Key {
					return p[i].Key, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(p))
	for i := range p {
		if _, dup := seen[p[i].Key]; dup {
			return p[i].Key, true
		}
		seen[p[i].Key] = struct{}{}
	}
	return "", false
}

// keySet is duplicate for keys that arrive one at a time (the decoder's scan
// pass, which builds no Properties).
type keySet struct {
	small [smallKeys]string
	n     int
	big   map[string]struct{}
}

// add records key and reports whether it was new.
func (s *keySet) add(key string) bool {
	if s.big == nil && s.n < len(s.small) {
		for _, k := range s.small[:s.n] {
			if k == key {
				return false
			}
		}
		s.small[s.n] = key
		s.n++
		return true
	}
	if s.big == nil {
		s.big = make(map[string]struct{}, 2*len(s.small))
		for _, k := range s.small {
			s.big[k] = struct{}{}
		}
	}
	if _, dup := s.big[key]; dup {
		return false
	}
	s.big[key] = struct{}{}
	return true
}
