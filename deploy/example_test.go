package deploy_test

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// The alert rules load as Prometheus loads them.
func Example() {
	groups, errs := rulefmt.ParseFile("prometheus/slidelog-rules.yml", false, model.UTF8Validation,
		parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		fmt.Println(errs)
		return
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			fmt.Println(r.Alert, r.Labels["severity"])
		}
	}
	// Output:
	// SlidelogFallingBack warning
	// SlidelogBreakerOpen warning
	// SlidelogSlowStore warning
	// SlidelogFailOpen critical
	// SlidelogFailClosed critical
	// SlidelogErrors warning
	// SlidelogStoreLostData critical
}
