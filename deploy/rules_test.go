package deploy_test

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const rulesFile = "prometheus/slidelog-rules.yml"

// loadRules parses the rules file as Prometheus does when it loads it,
// rejecting unknown fields.
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Empty(t, errs, "rulefmt errors")
	require.NotNil(t, groups)
	return groups
}

func TestRulesParse(t *testing.T) {
	groups := loadRules(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "rule %q: every rule is an alert", r.Expr)
			alerts = append(alerts, r.Alert)
			assert.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], "%s: severity", r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], "%s: summary", r.Alert)
			if r.Alert != "SlidelogStoreLostData" {
				// An event that already happened: one scrape is enough.
				assert.Positive(t, r.For, "%s: a for duration, so that one scrape does not page", r.Alert)
			}
		}
	}
	// Falling back, breaker open, slow store calls, fail-open decisions,
	// errors, a master that lost its keys.
	for _, want := range []string{"SlidelogFallingBack", "SlidelogBreakerOpen", "SlidelogSlowStore", "SlidelogFailOpen", "SlidelogErrors", "SlidelogStoreLostData"} {
		assert.True(t, slices.Contains(alerts, want), "got alerts %v, want %s among them", alerts, want)
	}
}

func TestRulesUseRegisteredMetrics(t *testing.T) {
	series := registeredSeries(t)
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			used, problems, err := checkQuery(r.Expr, series)
			require.NoError(t, err, r.Alert)
			assert.Empty(t, problems, "%s: %s", r.Alert, r.Expr)
			assert.NotEmpty(t, used, "%s: names no metric", r.Alert)
		}
	}
}
