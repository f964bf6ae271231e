package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestFormatRatio(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		in   *float64
		want string
	}{
		{nil, "-"},
		{f(0.0123), "0.012x"},
		{f(0.5), "0.50x"},
		{f(1), "1.00x"},
		{f(9.994), "9.99x"},
		{f(12.34), "12.3x"},
		{f(250.4), "250x"},
	} {
		if got := FormatRatio(tc.in); got != tc.want {
			t.Errorf("FormatRatio(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestApplyRatios(t *testing.T) {
	lat := func(p50, p99 float64) *Latencies { return &Latencies{Count: 1, P50: p50, P99: p99, Max: p99} }
	recs := []Record{
		{System: sysFileBased, Case: caseSeqRead, MBps: 50},
		{System: sysLimit, Case: caseSeqRead, MBps: 500},
		{System: sysFileBased, Case: caseCopy, MBps: 40},
		{System: sysLimit, Case: caseCopy, Error: "boom"}, // a failed baseline gives no ratio
		{System: sysSingleGet, Case: caseRandom, Latency: lat(20, 40)},
		{System: sysSegfs, Case: caseSeqRead, MBps: 100},
		{System: sysSegfs, Case: caseWarmSeq, MBps: 250},
		{System: sysSegfs, Case: caseCopy, MBps: 60},
		{System: sysSegfs, Case: caseRandom, Latency: lat(150, 400)},
		{System: sysSegfs, Case: caseRandomBusy, MBps: 20, Latency: lat(300, 800)},
		{System: sysLocal, Case: caseWarmRandom, Latency: lat(0.1, 0.2)},
		{System: sysSegfs, Case: caseWarmRandom, Latency: lat(0.5, 0.75), LocalPaired: lat(0.25, 0.5)},
		{System: sysSegfsPassthrough, Case: caseWarmRandom, Latency: lat(0.1, 0.5)},
		{System: sysLocal, Case: caseWarmSeq, MBps: 1000},
		{System: sysSegfsPassthrough, Case: caseWarmSeq, MBps: 300, LocalPairedMBps: 600},
		{System: sysLocal, Case: caseLuceneOpenMmap, Seconds: 0.05},
		{System: sysSegfs, Case: caseLuceneOpenMmap, Seconds: 0.5},
		{System: sysLocal, Case: caseLuceneQueriesMmap, Seconds: 1, Latency: lat(1, 4)},
		{System: sysSegfsOpenSearch, Case: caseLuceneQueriesMmap, Seconds: 2, Latency: lat(2, 10)},
	}
	ApplyRatios(recs)
	get := func(system, c string) Record {
		for _, r := range recs {
			if r.System == system && r.Case == c {
				return r
			}
		}
		t.Fatalf("no record %s %s", system, c)
		return Record{}
	}
	check := func(name string, got *float64, want float64) {
		t.Helper()
		if want == 0 {
			if got != nil {
				t.Errorf("%s = %v, want missing", name, *got)
			}
			return
		}
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("segfs seq vs file-based", get(sysSegfs, caseSeqRead).RatioFileBased, 2)
	check("segfs seq vs limit", get(sysSegfs, caseSeqRead).RatioLimit, 0.2)
	check("warm seq vs file-based", get(sysSegfs, caseWarmSeq).RatioFileBased, 5)
	check("limit vs file-based", get(sysLimit, caseSeqRead).RatioFileBased, 10)
	check("file-based vs limit", get(sysFileBased, caseSeqRead).RatioLimit, 0.1)
	check("file-based vs itself", get(sysFileBased, caseSeqRead).RatioFileBased, 0)
	check("copy vs file-based", get(sysSegfs, caseCopy).RatioFileBased, 1.5)
	check("copy vs failed limit", get(sysSegfs, caseCopy).RatioLimit, 0)
	check("random p50", get(sysSegfs, caseRandom).RatioP50, 7.5)
	check("random p99", get(sysSegfs, caseRandom).RatioP99, 10)
	check("busy copy vs file-based", get(sysSegfs, caseRandomBusy).RatioFileBased, 0.5)
	check("busy p50", get(sysSegfs, caseRandomBusy).RatioP50, 15)
	check("single-get vs itself", get(sysSingleGet, caseRandom).RatioP50, 0)
	// Warm preads: against the local reads paired with them when there
	// are, else against the local-file record.
	check("warm p99 vs paired local", get(sysSegfs, caseWarmRandom).RatioLocal, 1.5)
	check("warm p50 vs paired local", get(sysSegfs, caseWarmRandom).RatioLocalP50, 2)
	check("warm p99 vs local record", get(sysSegfsPassthrough, caseWarmRandom).RatioLocal, 2.5)
	check("warm seq vs paired local", get(sysSegfsPassthrough, caseWarmSeq).RatioLocal, 0.5)
	check("warm seq vs local record", get(sysSegfs, caseWarmSeq).RatioLocal, 0.25)
	// A Lucene open is compared by its time, its queries by their p99.
	check("lucene open vs local", get(sysSegfs, caseLuceneOpenMmap).RatioLocal, 10)
	check("lucene queries p99 vs local", get(sysSegfsOpenSearch, caseLuceneQueriesMmap).RatioLocal, 2.5)
	check("lucene queries vs single GET", get(sysSegfsOpenSearch, caseLuceneQueriesMmap).RatioP99, 0)
}

func TestWriteTable(t *testing.T) {
	r := 2.0
	recs := []Record{
		{System: sysFileBased, Case: caseSeqRead, Seconds: 20, MBps: 50},
		{System: sysSegfs, Case: caseSeqRead, Seconds: 10, MBps: 100, RatioFileBased: &r},
		{System: sysSegfs, Case: caseCopy, Error: "cp failed\nmore"},
		{System: sysSegfs, Case: caseResources, Resources: &Resources{}},
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, recs); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 { // header + 3 rows; case 6 goes to the resources table
		t.Fatalf("table has %d lines:\n%s", len(lines), out)
	}
	if strings.Count(out, caseSeqRead) != 1 {
		t.Errorf("a case's id is repeated on its second row:\n%s", out)
	}
	for _, want := range []string{"2.00x", "100.0", "FAILED"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestSortRecords(t *testing.T) {
	recs := []Record{
		{System: sysSegfs, Case: caseWarmSeq},
		{System: sysSegfs, Case: caseSeqRead},
		{System: sysSegfs, Case: caseCopy},
		{System: sysLimit, Case: caseSeqRead},
		{System: sysFileBased, Case: caseSeqRead},
		{System: sysSingleGet, Case: caseRandom},
		{System: sysSegfs, Case: caseRandom},
	}
	SortRecords(recs)
	var got []string
	for _, r := range recs {
		got = append(got, r.Case+"/"+r.System)
	}
	want := []string{
		caseSeqRead + "/" + sysFileBased, caseSeqRead + "/" + sysLimit, caseSeqRead + "/" + sysSegfs,
		caseCopy + "/" + sysSegfs,
		caseRandom + "/" + sysSingleGet, caseRandom + "/" + sysSegfs,
		caseWarmSeq + "/" + sysSegfs,
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order:\n got %v\nwant %v", got, want)
	}
}

func TestCompressionRatiosAndTable(t *testing.T) {
	lat := func(p50, p99 float64) *Latencies { return &Latencies{Count: 1, P50: p50, P99: p99, Max: p99} }
	recs := []Record{
		{System: sysRaw, Case: casePush, Seconds: 10, Compression: &Compression{StoredBytes: 1000, CPUSeconds: 2}},
		{System: sysHybrid, Case: casePush, Seconds: 8, Compression: &Compression{StoredBytes: 600, CPUSeconds: 5}},
		{System: sysRaw, Case: caseCmpSeq, Seconds: 4, MBps: 100, Compression: &Compression{StoredBytes: 900, FetchedBytes: 900, CPUSeconds: 1}},
		{System: sysHybrid, Case: caseCmpSeq, Seconds: 1, MBps: 400, Compression: &Compression{StoredBytes: 100, FetchedBytes: 100, CPUSeconds: 0.5, DecodeSeconds: 0.25}},
		{System: sysRaw, Case: caseCmpRandom, Error: "boom"}, // a failed raw record gives no ratio
		{System: sysHybrid, Case: caseCmpRandom, Latency: lat(1, 2), Compression: &Compression{CPUSeconds: 1}},
		{System: sysSegfs, Case: caseSeqRead, MBps: 100},
	}
	ApplyRatios(recs)
	check := func(name string, got *float64, want float64) {
		t.Helper()
		if want == 0 {
			if got != nil {
				t.Errorf("%s = %v, want missing", name, *got)
			}
			return
		}
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	push, seq, rnd := recs[1].Compression, recs[3].Compression, recs[5].Compression
	check("push time", push.SecondsToRaw, 0.8)
	check("push stored", push.StoredToRaw, 0.6)
	check("push CPU", push.CPUToRaw, 2.5)
	check("seq MB/s", seq.MBpsToRaw, 4)
	check("seq time", seq.SecondsToRaw, 0.25)
	check("seq fetched", seq.FetchedToRaw, 1.0/9)
	check("seq CPU", seq.CPUToRaw, 0.5)
	check("random p50 with a failed raw", rnd.P50ToRaw, 0)
	check("random CPU with a failed raw", rnd.CPUToRaw, 0)
	if recs[0].Compression.SecondsToRaw != nil {
		t.Error("a raw record got a ratio to itself")
	}

	var buf bytes.Buffer
	if err := WriteTable(&buf, recs); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "7-") {
		t.Errorf("case 7 rows in the main table:\n%s", buf.String())
	}
	buf.Reset()
	if err := WriteCompression(&buf, recs); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(strings.TrimRight(out, "\n"), "\n"); n != 6 { // header + 6 rows
		t.Errorf("compression table has %d lines:\n%s", n+1, out)
	}
	for _, want := range []string{"0.60x", "4.00x", "0.250", "FAILED", "0.80x"} {
		if !strings.Contains(out, want) {
			t.Errorf("compression table lacks %q:\n%s", want, out)
		}
	}
}

func TestParseCases(t *testing.T) {
	got, err := parseCases("7, 1")
	if err != nil || len(got) != 2 || !got[1] || !got[7] {
		t.Errorf("parseCases(7, 1) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "12", "x", "1,,2"} {
		if _, err := parseCases(bad); err == nil {
			t.Errorf("parseCases(%q) succeeded", bad)
		}
	}
}
