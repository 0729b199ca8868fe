// Command demo sends a burst of requests to a running example and prints
// each response's status and rate-limit header fields, one denied body,
// a health and a readiness check and, with -metrics, how many decisions
// came from the store and how many from the failure mode, read from the
// example's /metrics. scripts/demo.sh (make demo) runs it.
//
//	demo -url http://127.0.0.1:8080 -metrics http://127.0.0.1:9090 -n 14
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

var headers = []string{"RateLimit-Policy", "RateLimit", "Retry-After"}

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "base URL of the example")
	n := flag.Int("n", 14, "requests to send to /hello")
	metrics := flag.String("metrics", "", "base URL of the example's metrics address (-metrics-addr); empty: no decision count")
	flag.Parse()
	if err := run(strings.TrimSuffix(*base, "/"), strings.TrimSuffix(*metrics, "/"), *n); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(base, metrics string, n int) error {
	client := &http.Client{Timeout: 5 * time.Second}
	var denied []byte
	for i := 1; i <= n; i++ {
		resp, body, err := get(client, base+"/hello")
		if err != nil {
			return err
		}
		fmt.Printf("GET /hello #%-3d %d", i, resp.StatusCode)
		for _, h := range headers {
			if v := resp.Header.Get(h); v != "" {
				fmt.Printf("  %s: %s", h, v)
			}
		}
		fmt.Println()
		if resp.StatusCode == http.StatusTooManyRequests && denied == nil {
			denied = body
			fmt.Printf("    Content-Type: %s\n", resp.Header.Get("Content-Type"))
		}
	}
	if denied != nil {
		fmt.Printf("\nfirst 429 body:\n%s\n", denied)
	} else {
		fmt.Println("\nno request was denied: raise -n above the example's -limit")
	}
	resp, _, err := get(client, base+"/healthz")
	if err != nil {
		return err
	}
	fmt.Printf("\nGET /healthz    %d  (skipped by the limiter: RateLimit %q)\n", resp.StatusCode, resp.Header.Get("RateLimit"))
	resp, body, err := get(client, base+"/readyz")
	if err != nil {
		return err
	}
	fmt.Printf("GET /readyz     %d  %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
	if metrics == "" {
		return nil
	}
	return printDecisions(client, metrics+"/metrics")
}

// failureSources are the decision sources of the failure mode.
var failureSources = map[string]bool{"fallback": true, "fail_open": true, "fail_closed": true}

// printDecisions reads slidelog_decisions_total from the example's
// metrics and prints how many decisions each source made, the store's
// and the failure mode's apart.
func printDecisions(client *http.Client, url string) error {
	resp, body, err := get(client, url)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	bySource := map[string]float64{}
	var sources []string
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "slidelog_decisions_total{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, "slidelog_decisions_total{"), "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("metrics line %q: %w", strings.TrimSpace(line), err)
		}
		_, src, ok := strings.Cut(labels, `source="`)
		if !ok {
			continue
		}
		src, _, _ = strings.Cut(src, `"`)
		if _, seen := bySource[src]; !seen {
			sources = append(sources, src)
		}
		bySource[src] += v
	}
	sort.Strings(sources)
	var store, failure float64
	var parts []string
	for _, src := range sources {
		v := bySource[src]
		if v == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %g", src, v))
		if failureSources[src] {
			failure += v
		} else {
			store += v
		}
	}
	fmt.Printf("\ndecisions (slidelog_decisions_total): from the store %g, from the failure mode %g  [%s]\n", store, failure, strings.Join(parts, ", "))
	if failure > 0 {
		fmt.Println("    the failure mode decided: each instance enforced the limit on its own")
	}
	return nil
}

func get(client *http.Client, url string) (*http.Response, []byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}
