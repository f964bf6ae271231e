// Package stats turns the counters of segfs's packages into the one flat
// map of integers that a mount serves at /stats.
//
// Each package declares its counters once, as fields of a struct with a
// `stat:"name"` tag: the tag is the counter's name in /stats, so a counter
// has one declaration and one name. Collect reads any such struct by
// reflection; fields without a tag are not served.
package stats

import (
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"
)

// Collect adds to dst the tagged fields of v, a struct or a pointer to
// one. A field may be an int, int64, bool (0 or 1), time.Duration (in
// nanoseconds) or atomic.Int64, or an array of ints or int64s whose tag
// names each element, separated by commas. Any other tagged field is a
// programming error and panics, as does a name collected twice.
func Collect(dst map[string]int64, v any) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		panic(fmt.Sprintf("stats: Collect of %s, not a struct", rv.Type()))
	}
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := f.Tag.Get("stat")
		if tag == "" {
			continue
		}
		fv := rv.Field(i)
		if fv.Kind() == reflect.Array {
			names := strings.Split(tag, ",")
			if len(names) != fv.Len() {
				panic(fmt.Sprintf("stats: field %s.%s has %d elements and %d names", rt, f.Name, fv.Len(), len(names)))
			}
			for j, name := range names {
				put(dst, name, scalar(rt, f, fv.Index(j)))
			}
			continue
		}
		put(dst, tag, scalar(rt, f, fv))
	}
}

var (
	atomicType   = reflect.TypeFor[atomic.Int64]()
	durationType = reflect.TypeFor[time.Duration]()
)

func scalar(rt reflect.Type, f reflect.StructField, v reflect.Value) int64 {
	switch {
	case v.Type() == atomicType:
		return v.Addr().Interface().(*atomic.Int64).Load()
	case v.Type() == durationType, v.Kind() == reflect.Int64, v.Kind() == reflect.Int:
		return v.Int()
	case v.Kind() == reflect.Bool:
		if v.Bool() {
			return 1
		}
		return 0
	}
	panic(fmt.Sprintf("stats: field %s.%s of type %s cannot be collected", rt, f.Name, v.Type()))
}

func put(dst map[string]int64, name string, v int64) {
	if _, dup := dst[name]; dup {
		panic(fmt.Sprintf("stats: counter %q collected twice", name))
	}
	dst[name] = v
}
