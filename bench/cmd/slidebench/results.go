package main

import (
	"encoding/json"
	"os"
	"time"
)

// Results is everything one run measured; run writes it as JSON and
// report reads it back.
type Results struct {
	Env      Env        `json:"env"`
	Cells    []Cell     `json:"cells"`
	Accuracy []Accuracy `json:"accuracy"`
	Memory   []Memory   `json:"memory_usage"`
	// Overload is the steady-overload accuracy run (utilisation).
	Overload []Accuracy `json:"overload,omitempty"`
	// Sizing is bytes per key and Redis time per decision at large
	// quotas, exact, bucketed and GCRA (sizing.go).
	Sizing []Sizing `json:"sizing,omitempty"`
}

// Env describes where and how the run happened.
type Env struct {
	Date          time.Time `json:"date"`
	CPU           string    `json:"cpu"`
	NumCPU        int       `json:"num_cpu"`
	GOMAXPROCS    int       `json:"gomaxprocs"`
	GoVersion     string    `json:"go_version"`
	Standalone    string    `json:"standalone"`
	Cluster       []string  `json:"cluster"`
	ClusterNodes  string    `json:"cluster_nodes"`
	RedisVersion  string    `json:"redis_version"`
	Command       string    `json:"command"`
	CoreRevision  string    `json:"core_revision"`
	CellDuration  Duration  `json:"cell_duration"`
	MemoryCell    Duration  `json:"memory_cell_duration"`
	Warmup        Duration  `json:"warmup"`
	Keys          int       `json:"keys"`
	MemKeys       int       `json:"mem_keys"`
	Limit         int       `json:"limit"`
	Window        Duration  `json:"window"`
	ElapsedTotal  Duration  `json:"elapsed_total"`
	Rounds        int       `json:"rounds"`
	LoadStart     string    `json:"load_start"`
	LoadEnd       string    `json:"load_end"`
	GoRedis       string    `json:"go_redis"`
	PeerVersions  []string  `json:"peer_versions"`
	RunIDPrefix   string    `json:"run_id_prefix"`
	SkippedReason []string  `json:"skipped,omitempty"`
	RTTCallers    int       `json:"rtt_callers,omitempty"`
}

// Cell is one contender at one concurrency in one scenario on one
// topology.
type Cell struct {
	Topology  string  `json:"topology"` // standalone, cluster or memory
	Scenario  string  `json:"scenario"` // many-keys or flood
	Callers   int     `json:"callers"`
	Contender string  `json:"contender"`
	Decisions int64   `json:"decisions"`
	Allowed   int64   `json:"allowed"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Seconds   float64 `json:"seconds"`
	PerSec    float64 `json:"per_sec"`
	P50       float64 `json:"p50_us"`
	P99       float64 `json:"p99_us"`
	P999      float64 `json:"p999_us"`
	Mean      float64 `json:"mean_us"`
	// Commands is the number of Redis commands the contender's client
	// sent during the measured part of the cell (go-redis hook, pipelined
	// commands counted one by one); -1 in memory.
	Commands int64 `json:"commands"`
	// RoundTrips is the number of single commands plus pipelines the
	// client sent; Commands/RoundTrips above 1 means pipelining. -1 in
	// memory.
	RoundTrips int64 `json:"round_trips"`

	// The cells of the round-trip sweep (topology cluster-rtt) also have
	// the latency added to every round trip, the median of PINGs through
	// it on an idle connection, and what the Cluster's masters spent:
	// RedisCmdUsec, the commandstats time of the commands the client
	// sent (CONFIG RESETSTAT before each slice), and RedisCPUUsec, the
	// processes' CPU time (user + system), both in microseconds.
	AddedRTT Duration `json:"added_rtt,omitempty"`
	ProbeRTT Duration `json:"probe_rtt,omitempty"`
	// AppliedP50 and AppliedP99 are the delay the proxies actually gave
	// the replies during the measured part (timer lateness included).
	AppliedP50   Duration `json:"applied_p50,omitempty"`
	AppliedP99   Duration `json:"applied_p99,omitempty"`
	RedisCmdUsec float64  `json:"redis_cmd_usec,omitempty"`
	RedisCPUUsec float64  `json:"redis_cpu_usec,omitempty"`
	// ClientCPUUsec is this process's CPU time (getrusage, user + system)
	// over the measured slices, in µs; RedisCommands the commands the
	// masters ran for the decisions (INFO commandstats, those inside
	// scripts included, script calls themselves not), for the cells of
	// the main run (RedisCPUUsec too).
	ClientCPUUsec float64 `json:"client_cpu_usec,omitempty"`
	// ReplicaCPUUsec is the replicas' CPU time (INFO cpu, user + system,
	// summed over them) over the measured slices, in µs: what applying
	// the masters' writes costs them, which the masters' figure leaves
	// out and which shares the machine with the rest.
	ReplicaCPUUsec float64 `json:"replica_cpu_usec,omitempty"`
	// ExpiredKeys is how many keys the masters expired during the
	// measured slices (INFO stats expired_keys).
	ExpiredKeys   int64 `json:"expired_keys,omitempty"`
	RedisCommands int64 `json:"redis_commands,omitempty"`
	// After the cell without added latency: the contender's keys in
	// Redis, their MEMORY USAGE (SAMPLES 0), and of those the sorted
	// sets, their bytes and entries.
	RedisKeys  int64 `json:"redis_keys,omitempty"`
	RedisBytes int64 `json:"redis_bytes,omitempty"`
	ZSets      int64 `json:"zsets,omitempty"`
	ZSetBytes  int64 `json:"zset_bytes,omitempty"`
	Entries    int64 `json:"entries,omitempty"`
}

// Accuracy is one limiter's admissions under the boundary attack.
type Accuracy struct {
	Contender string    `json:"contender"`
	Limit     int       `json:"limit"`
	Window    Duration  `json:"window"`
	Admitted  []float64 `json:"admitted_s"` // seconds since the attack began
	Sent      int       `json:"sent"`
	MaxInWin  int       `json:"max_in_window"`
	// Span is how long requests were sent, for the utilisation:
	// admitted / (Span / Window × Limit). Zero for the boundary attack.
	Span Duration `json:"span,omitempty"`
}

// Memory is the Redis memory one sorted-set log takes at one limit.
type Memory struct {
	Topology string  `json:"topology"`
	Limit    int     `json:"limit"`
	Entries  int64   `json:"entries"`
	Bytes    int64   `json:"bytes"`
	PerEntry float64 `json:"bytes_per_entry"`
	Encoding string  `json:"encoding"`
}

// Duration is a time.Duration that reads and writes as "3s" in JSON.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

func (d Duration) String() string { return time.Duration(d).String() }

func writeResults(path string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	return &r, json.Unmarshal(b, &r)
}
