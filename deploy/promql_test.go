package deploy_test

import (
	"fmt"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

var promql = parser.NewParser(parser.Options{})

// checkQuery parses a PromQL expression and returns what in it is not
// registered: metric names that series does not hold, label matchers
// naming a label the metric does not carry, and grouping labels that none
// of the metrics under the aggregation carries. It also returns the
// metric names the expression uses.
func checkQuery(expr string, series map[string][]string) (used []string, problems []string, err error) {
	ast, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, nil, err
	}
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := n.Name
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			if name == "" {
				problems = append(problems, fmt.Sprintf("%s: selector without a metric name", n))
				return nil
			}
			used = append(used, name)
			have, ok := series[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("metric %q is not registered", name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !slices.Contains(have, m.Name) {
					problems = append(problems, fmt.Sprintf("%s has no label %q", name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			var under []string
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				if vs, ok := inner.(*parser.VectorSelector); ok {
					under = append(under, series[vs.Name]...)
				}
				return nil
			})
			for _, g := range n.Grouping {
				if !slices.Contains(under, g) {
					problems = append(problems, fmt.Sprintf("%s: grouping label %q is on none of its metrics", n.Op, g))
				}
			}
		}
		return nil
	})
	return used, problems, nil
}
