package readiness_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/memstore"
	"github.com/slidelog/slidelog/core/readiness"
)

func Example() {
	ready := readiness.New()
	store := memstore.New()
	defer store.Close()
	limiter, err := slidelog.New(store, slidelog.PerMinute(100), slidelog.WithObserver(ready))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	if _, err := limiter.Allow(context.Background(), "client"); err != nil {
		panic(err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /readyz", ready)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output: 200 ok
}
