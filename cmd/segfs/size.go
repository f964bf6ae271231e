package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag value in bytes written as a number with an optional
// unit: B, K/KiB, M/MiB, G/GiB, T/TiB (all powers of 1024).
type byteSize int64

func (s *byteSize) UnmarshalText(text []byte) error {
	v, err := parseByteSize(string(text))
	if err != nil {
		return err
	}
	*s = byteSize(v)
	return nil
}

func (s byteSize) String() string {
	units := []string{"TiB", "GiB", "MiB", "KiB"}
	for i, u := range units {
		m := int64(1) << (10 * (len(units) - i))
		if s != 0 && int64(s)%m == 0 {
			return fmt.Sprintf("%d%s", int64(s)/m, u)
		}
	}
	return fmt.Sprintf("%dB", int64(s))
}

func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q: want a number with an optional unit (KiB, MiB, GiB)", s)
	}
	var shift uint
	switch unit {
	case "", "b":
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	case "t", "tb", "tib":
		shift = 40
	default:
		return 0, fmt.Errorf("bad size %q: unknown unit %q", s, unit)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return n << shift, nil
}
