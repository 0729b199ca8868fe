package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestScheduleFor(t *testing.T) {
	exact := scheduleFor(10_000, time.Hour, 0)
	if exact.cost != 1 || exact.step != 360*time.Millisecond || exact.steps != 10_002 || exact.tail != 0 {
		t.Errorf("exact 10,000/hour: %+v", exact)
	}
	b := scheduleFor(1_000_000, 24*time.Hour, 24*time.Hour/1000)
	// 1,000 buckets of 1,000 units: 90% of each, one request per bucket.
	if b.cost != 900 || b.step != 24*time.Hour/1000 || b.steps != 1002 || b.tail != recentTail || b.tailStep != 86400*time.Microsecond {
		t.Errorf("bucketed 1,000,000/day at W/1000: %+v", b)
	}
	// Every step of a window stays under the limit, so the tail is admitted.
	if got := b.cost * (b.steps - 2); got+recentTail > 1_000_000 {
		t.Errorf("a window's fill is %d units, leaving no room for the tail", got)
	}
}

func TestUtilisation(t *testing.T) {
	a := Accuracy{Limit: 100, Window: Duration(2 * time.Second), Span: Duration(20 * time.Second), Admitted: make([]float64, 920)}
	if got := utilisation(a); got != 0.92 {
		t.Errorf("utilisation = %v, want 0.92", got)
	}
	a.Span = 0
	if got := utilisation(a); got != 0 {
		t.Errorf("utilisation without a span = %v, want 0", got)
	}
}

func TestWriteScalingSizing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scaling.md")
	doc := "# Doc\n\nbefore\n<!-- bucketed-sizing:begin (generated) -->\nold table\n<!-- bucketed-sizing:end -->\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Results{Sizing: []Sizing{
		{Case: quotaCases[0].name, Limit: 10_000, Window: Duration(time.Hour), Model: sizingGCRA, Store: "redis", BytesPerKey: 120, UsecPerDecision: 9},
		{Case: quotaCases[0].name, Limit: 10_000, Window: Duration(time.Hour), Model: "P = W/100 (36s)", Precision: Duration(36 * time.Second),
			Store: "redis", BytesPerKey: 1200, UsecPerDecision: 30, Parts: map[string]float64{":b": 1000, ":r": 200}, Encodings: ":b listpack, :r listpack"},
	}}
	for range 2 { // twice: the markers survive a rewrite
		if err := writeScalingSizing(path, r); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"before\n<!-- bucketed-sizing:begin (generated) -->\n", "<!-- bucketed-sizing:end -->\nafter\n",
		"| 10,000 per hour | slidelog, P = W/100 (36s), non-default option | 1200 B | buckets 1000 B (listpack), recent 200 B (listpack) | 10x | 30.0 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("doc lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old table") || strings.Count(got, "| Quota |") != 1 {
		t.Errorf("old section not replaced exactly once:\n%s", got)
	}
	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeScalingSizing(path, r); err == nil {
		t.Error("no error without markers")
	}
}
