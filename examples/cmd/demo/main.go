// Command demo sends a burst of requests to a running example and prints
// each response's status and rate-limit header fields, one denied body,
// and a health check. scripts/demo.sh (make demo) runs it.
//
//	demo -url http://127.0.0.1:8080 -n 14
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

var headers = []string{"RateLimit-Policy", "RateLimit", "Retry-After"}

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "base URL of the example")
	n := flag.Int("n", 14, "requests to send to /hello")
	flag.Parse()
	if err := run(strings.TrimSuffix(*base, "/"), *n); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(base string, n int) error {
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
