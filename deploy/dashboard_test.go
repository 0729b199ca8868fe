package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const dashboardFile = "grafana/slidelog.json"

// dashboard is the part of a Grafana dashboard model the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	require.NoError(t, dec.Decode(&d), "the dashboard is JSON")
	require.NotEmpty(t, d.UID)
	require.NotEmpty(t, d.Panels)
	return d
}

// grafanaVariables are the interval variables Grafana substitutes in a
// query before Prometheus sees it; the tests put a duration in their place.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

func TestDashboardUsesRegisteredMetrics(t *testing.T) {
	series := registeredSeries(t)
	d := loadDashboard(t)
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "panel id %d used twice", p.ID)
		ids[p.ID] = true
		assert.Equal(t, "${datasource}", p.Datasource.UID, "%s: data source", p.Title)
		require.NotEmpty(t, p.Targets, "%s: no query", p.Title)
		for _, q := range p.Targets {
			names, problems, err := checkQuery(grafanaVariables.Replace(q.Expr), series)
			require.NoError(t, err, "%s %s: %s", p.Title, q.RefID, q.Expr)
			assert.Empty(t, problems, "%s %s: %s", p.Title, q.RefID, q.Expr)
			require.NotEmpty(t, names, "%s %s names no metric", p.Title, q.RefID)
			for _, n := range names {
				used[n] = true
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		text, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(text)
		require.NotNil(t, m, "variable %s: got query %q, want label_values(metric, label)", v.Name, text)
		require.Contains(t, series, m[1], "variable %s", v.Name)
		assert.True(t, slices.Contains(series[m[1]], m[2]), "variable %s: %s has no label %s", v.Name, m[1], m[2])
	}

	// Every metric the code registers is on the dashboard (a histogram
	// through its series).
	for _, name := range metricConstants(t) {
		on := used[name] || used[name+"_bucket"] || used[name+"_count"] || used[name+"_sum"]
		assert.True(t, on, "metric %s is on no panel", name)
	}
}

// checkQuery finds an unregistered name: the checks above can fail.
func TestCheckQueryFindsUnregisteredNames(t *testing.T) {
	series := registeredSeries(t)
	for _, give := range []string{
		`rate(slidelog_decision_total[5m])`,
		`sum by (limiter) (slidelog_breaker_state{nodes="a"})`,
		`sum by (instanse) (slidelog_fallback_keys)`,
		`histogram_quantile(0.9, sum by (le) (rate(slidelog_command_duration_seconds_buckets[5m])))`,
	} {
		_, problems, err := checkQuery(give, series)
		require.NoError(t, err, give)
		assert.NotEmpty(t, problems, "got no problem in %s, want one", give)
	}
	_, problems, err := checkQuery(`histogram_quantile(0.9, sum by (le) (rate(slidelog_command_duration_seconds_bucket[5m])))`, series)
	require.NoError(t, err)
	assert.Empty(t, problems)
}
