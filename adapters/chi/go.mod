module github.com/slidelog/slidelog/adapters/chi

go 1.26.0

replace github.com/slidelog/slidelog/core => ../../core

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/slidelog/slidelog/core v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
