package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	slidechi "github.com/slidelog/slidelog/adapters/chi"
	slidelog "github.com/slidelog/slidelog/core"
)

func main() {
	r := chi.NewRouter()
	r.Use(slidechi.LimitByIP(slidelog.PerMinute(100)))
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	_ = http.ListenAndServe("127.0.0.1:0", r)
}
