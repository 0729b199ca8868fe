module github.com/slidelog/slidelog/adapters/connect

go 1.26.0

replace github.com/slidelog/slidelog/core => ../../core

require (
	connectrpc.com/connect v1.21.1
	github.com/slidelog/slidelog/core v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/prometheus/common v0.72.1 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
