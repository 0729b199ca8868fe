// Package e2e holds the end-to-end test of the examples: it builds each
// example, starts it as a process on a loopback port and drives it over
// HTTP: on the memory store, and on the Redis Cluster and the standalone
// Redis of scripts/redis-rig.sh.
//
//	make cluster-up && eval "$(scripts/redis-rig.sh env)"
//	cd examples && go test -race ./e2e
//
// Without SLIDELOG_CLUSTER_ADDRS and SLIDELOG_REDIS_ADDR (standalone) the
// Redis runs fail, unless -short.
package e2e
