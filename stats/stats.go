// Package stats turns the counters of segfs's packages into the one flat
// map of integers that a mount serves at /stats, and into the metrics it
// serves to Prometheus at /metrics.
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
// names each element, separated by commas. Histogram fields are left
// out (Histograms reads them). Any other tagged field is a programming
// error and panics, as does a name collected twice.
func Collect(dst map[string]int64, v any) {
	Each(v, func(c Counter) { put(dst, c.Name, c.Value) })
}

// Kind says how a value behaves over time, for exporters that need to
// know (Prometheus): a counter only grows while the process lives; a
// gauge goes up and down. A field is a counter unless tagged
// `kind:"gauge"`.
type Kind int

const (
	CounterKind Kind = iota
	GaugeKind
)

// Counter is one collected value.
type Counter struct {
	Name  string // its /stats name
	Kind  Kind
	Value int64
	Nanos bool // a time.Duration field, or a name ending in _ns: Value is nanoseconds
}

// Each calls fn for every tagged value of v (as Collect) in field order.
func Each(v any, fn func(Counter)) {
	rv, rt := structOf(v)
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := f.Tag.Get("stat")
		if tag == "" || isHistogram(f.Type) {
			continue
		}
		kind := CounterKind
		if f.Tag.Get("kind") == "gauge" {
			kind = GaugeKind
		}
		fv := rv.Field(i)
		emit := func(name string, v reflect.Value) {
			fn(Counter{Name: name, Kind: kind, Value: scalar(rt, f, v),
				Nanos: v.Type() == durationType || strings.HasSuffix(name, "_ns")})
		}
		if fv.Kind() == reflect.Array {
			names := strings.Split(tag, ",")
			if len(names) != fv.Len() {
				panic(fmt.Sprintf("stats: field %s.%s has %d elements and %d names", rt, f.Name, fv.Len(), len(names)))
			}
			for j, name := range names {
				emit(name, fv.Index(j))
			}
			continue
		}
		emit(tag, fv)
	}
}

// Histograms calls fn for every tagged Histogram field of v, a struct
// or a pointer to one (a pointer, for the histograms to be the live
// ones). An array of histograms is one labelled family: its tag
// `label:"name=v0,v1,..."` names the label and each element's value.
// label and value are "" for a single histogram.
func Histograms(v any, fn func(name, label, value string, h *Histogram)) {
	rv, rt := structOf(v)
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := f.Tag.Get("stat")
		if tag == "" || !isHistogram(f.Type) {
			continue
		}
		fv := rv.Field(i)
		if fv.Kind() != reflect.Array {
			fn(tag, "", "", fv.Addr().Interface().(*Histogram))
			continue
		}
		label, vals, ok := strings.Cut(f.Tag.Get("label"), "=")
		values := strings.Split(vals, ",")
		if !ok || len(values) != fv.Len() {
			panic(fmt.Sprintf("stats: histogram array %s.%s needs a label tag naming its %d values", rt, f.Name, fv.Len()))
		}
		for j, value := range values {
			fn(tag, label, value, fv.Index(j).Addr().Interface().(*Histogram))
		}
	}
}

var histogramType = reflect.TypeFor[Histogram]()

func isHistogram(t reflect.Type) bool {
	return t == histogramType || (t.Kind() == reflect.Array && t.Elem() == histogramType)
}

// structOf returns v's struct, addressable when v is a pointer.
func structOf(v any) (reflect.Value, reflect.Type) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		panic(fmt.Sprintf("stats: Collect of %s, not a struct", rv.Type()))
	}
	return rv, rv.Type()
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
