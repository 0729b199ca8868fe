package slidelog_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	slidelog "github.com/slidelog/slidelog/core"
)

func TestParsePolicy(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		give string
		want slidelog.Policy
	}{
		{"5/s", slidelog.PerSecond(5)},
		{"5/second", slidelog.PerSecond(5)},
		{"100/min", slidelog.PerMinute(100)},
		{"100/1m", slidelog.PerMinute(100)},
		{"1000/hour", slidelog.PerHour(1000)},
		{"10000/day", slidelog.PerDay(10000)},
		{"10_000/Day", slidelog.PerDay(10000)},
		{"50000/week", slidelog.PerWeek(50000)},
		{"  7/h  ", slidelog.PerHour(7)},
		{"100/30s", slidelog.Policy{Limit: 100, Window: 30 * time.Second}},
		{"100/500ms", slidelog.Policy{Limit: 100, Window: 500 * time.Millisecond}},
		{"100/1m30s", slidelog.Policy{Limit: 100, Window: 90 * time.Second}},
		{"1000000/30d precision=1h", slidelog.Policy{Limit: 1_000_000, Window: 30 * day, Precision: time.Hour}},
		{"10000/day precision=15m", slidelog.Policy{Name: "per-day", Limit: 10000, Window: day, Precision: 15 * time.Minute}},
		{"10000/day precision=0", slidelog.PerDay(10000)},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := slidelog.ParsePolicy(tt.give)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParsePolicyErrors(t *testing.T) {
	tests := []struct {
		give string
		want string // a part of the message
	}{
		{"", "empty"},
		{"100", "no '/'"},
		{"/min", "limit"},
		{"abc/min", "limit"},
		{"-5/min", "limit"},
		{"1_/min", "limit"},
		{"0/min", "limit 0"},
		{"99999999999999999999/min", "above"},
		{"100/", "window"},
		{"100/month", "window"},
		{"100/-1s", "window -1s"},
		{"100/0s", "window 0s"},
		{"100/200y", "window"},
		{"100/999999999999999999d", "too long"},
		{"100/min precision", "precision=DURATION"},
		{"100/min precision=fast", "precision"},
		{"100/min precision=1m", "precision 1m0s"},
		{"100/day precision=1s", "precision 1s"},
		{"100/min a b", "want LIMIT/WINDOW"},
		{strings.Repeat("9", 300) + "/s", "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := slidelog.ParsePolicy(tt.give)
			if !errors.Is(err, slidelog.ErrInvalidPolicy) {
				t.Fatalf("got error %v, want one wrapping ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"5/s", "10_000/day precision=15m", "100/1m30s", "1/ms", "x/y", "9/99999999999d", "1/1h precision=-1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := slidelog.ParsePolicy(s)
		if err != nil {
			if !errors.Is(err, slidelog.ErrInvalidPolicy) {
				t.Fatalf("got error %v, want one wrapping ErrInvalidPolicy", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParsePolicy(%q) = %+v, which Validate refuses: %v", s, p, err)
		}
		// A parsed policy survives being written back in the same form.
		text := fmt.Sprintf("%d/%s", p.Limit, p.Window)
		if p.Precision != 0 {
			text += " precision=" + p.Precision.String()
		}
		q, err := slidelog.ParsePolicy(text)
		if err != nil {
			t.Fatalf("ParsePolicy(%q) of %+v: %v", text, p, err)
		}
		if q.Limit != p.Limit || q.Window != p.Window || q.Precision != p.Precision {
			t.Fatalf("ParsePolicy(%q) = %+v, want the policy %+v it was written from", text, q, p)
		}
	})
}

func ExampleParsePolicy() {
	// A monthly quota: 1,000,000 per rolling 30 days, counted in buckets
	// of an hour (720 buckets per key, whatever the limit).
	p, err := slidelog.ParsePolicy("1000000/30d precision=1h")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Limit, p.Window, p.Precision)

	_, err = slidelog.ParsePolicy("100/month")
	fmt.Println(err)
	// Output:
	// 1000000 720h0m0s 1h0m0s
	// slidelog: invalid policy: "100/month": window: "month", want a unit such as s, min, hour, day, an optional count as in 30d, or a duration such as 1m30s
}
