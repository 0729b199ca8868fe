// Package deploy holds slidelog's operations kit, checked by its tests:
// a Grafana dashboard (grafana/slidelog.json) and Prometheus alert rules
// (prometheus/slidelog-rules.yml) for the metrics that prommetrics.New
// registers. The rules are parsed with Prometheus's own rulefmt, and every
// metric and label the dashboard's queries and the rules' expressions use
// is one the code registers. It is its own module so that Prometheus's
// server packages never enter the library's go.mod.
package deploy
