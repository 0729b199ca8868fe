package slidelog_test

import (
	"testing"

	slidelog "github.com/slidelog/slidelog/core"
)

func TestResultUnchecked(t *testing.T) {
	for _, tt := range []struct {
		give slidelog.Source
		want bool
	}{
		{slidelog.SourceFailOpen, true},
		{slidelog.SourceFailClosed, true},
		{slidelog.SourceFallback, false},
		{slidelog.SourceDenyCache, false},
		{slidelog.SourceNone, false},
		{"redis", false},
	} {
		if got := (slidelog.Result{Source: tt.give}).Unchecked(); got != tt.want {
			t.Errorf("Result{Source: %q}.Unchecked() = %v, want %v", tt.give, got, tt.want)
		}
	}
}
