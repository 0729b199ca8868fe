// Command slidebench measures slidelog and its Go peers side by side on the
// same Redis (standalone and Cluster) and in memory, and renders the
// results as docs/benchmarks.md with PNG charts.
//
//	slidebench run    [flags]   measure, write results JSON
//	slidebench report [flags]   render the markdown and charts from it, keeping it in recorded/
//	slidebench rediscpu [flags] Redis CPU per decision (INFO commandstats)
//	slidebench scaling [flags]  decisions/s against Redis Cluster masters (docs/scaling.md)
//	slidebench sizing [flags]   bytes per key and Redis µs per decision at large quotas, exact and bucketed
//
// The Redis servers come from SLIDELOG_REDIS_ADDR (host:port) and
// SLIDELOG_CLUSTER_ADDRS (comma-separated seeds). Every key written starts
// with "slidebench:<run id>:" and is deleted after its cell; nothing else
// on the servers is touched.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runMain(os.Args[2:])
	case "report":
		err = reportMain(os.Args[2:])
	case "rediscpu":
		err = rediscpuMain(os.Args[2:])
	case "scaling":
		err = scalingMain(os.Args[2:])
	case "sizing":
		err = sizingMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slidebench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: slidebench run|report|rediscpu|scaling|sizing [flags]; -h for flags")
	os.Exit(2)
}

func newFlagSet(name string) *flag.FlagSet {
	return flag.NewFlagSet("slidebench "+name, flag.ExitOnError)
}
