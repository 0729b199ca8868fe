package redisstore_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	slidelog "github.com/slidelog/slidelog/core"
	"github.com/slidelog/slidelog/core/internal/logbuf"
	"github.com/slidelog/slidelog/core/redisstore"
	"github.com/slidelog/slidelog/core/slidelogtest/redistest"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir and returns their files and a pool that trusts the
// certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "slidelog test"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600))
	return certFile, keyFile, pool
}

// envTLSServer names a redis-server built with TLS for
// TestTLSDialToAStoppedNode; unset, it is redistest.Binary's.
const envTLSServer = "SLIDELOG_TLS_REDIS_SERVER"

// freeTCPPort returns a loopback port no listener holds now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// A dial over TLS that the kernel has connected may still wait for the
// node: the handshake's hello is owed an answer, of which the kernel
// keeps no record. A stopped server's kernel still completes connects,
// so a decision that waits on such a dial ends by the stall timeout, not
// by the dial's own timeout, and its log line says the node was judged in
// alive time; a healthy server decides over TLS.
func TestTLSDialToAStoppedNode(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	tlsPort := freeTCPPort(t)
	// A server built with TLS: scripts/test-servers.sh, whose servers are
	// built without it, names the distribution's.
	srv := redistest.StartServer(t, redistest.ServerConfig{Bin: os.Getenv(envTLSServer), Args: []string{
		"--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", certFile, "--tls-auth-clients", "no",
	}})
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	// The server's version is read over its plain port, so that a store's
	// client dials only when it decides.
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = probe.Close() })

	// The dial's own timeout is far past the stall timeout, and the bound
	// the test holds the call to lies between them, with room for alive
	// time to pass slowly on a busy machine.
	const stall, dialTimeout = 200 * time.Millisecond, 75 * 200 * time.Millisecond
	var logs logbuf.Buffer
	newStore := func() *redisstore.Store {
		client := redis.NewClient(&redis.Options{
			Addr: tlsAddr, TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DialTimeout: dialTimeout, MaxRetries: -1,
		})
		t.Cleanup(func() { _ = client.Close() })
		s, err := redisstore.NewUnchecked(client, redisstore.WithStallTimeout(stall),
			redisstore.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
			redisstore.WithKeyPrefix("tlsdial-"+strconv.FormatInt(time.Now().UnixNano(), 36)+":"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.NoError(t, redisstore.MatchServer(t.Context(), s, probe))
		return s
	}
	req := func(key string) slidelog.Request {
		return slidelog.Request{Namespace: "tlsdial", Key: key, Cost: 1, ID: uint64(time.Now().UnixNano()),
			Policies: []slidelog.Policy{{Limit: 5, Window: time.Minute}}}
	}

	res, err := newStore().Take(t.Context(), req("healthy"))
	require.NoError(t, err, "a decision over TLS on a healthy server")
	require.True(t, res.Allowed)
	require.NotContains(t, logs.String(), "node stalled")

	s := newStore()
	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			require.NoError(t, srv.Signal(syscall.SIGCONT))
		}
	}
	t.Cleanup(resume)
	start := time.Now()
	_, err = s.Take(t.Context(), req("stopped"))
	took := time.Since(start)
	require.ErrorIs(t, err, slidelog.ErrStalled, "after %v", took)
	require.Less(t, took, 25*stall, "a TLS dial the kernel connected is judged by the stall timeout, not the dial timeout (%v)", dialTimeout)
	// The verdict's line is written as its calls are released.
	require.Eventually(t, func() bool { return logs.Count("node stalled") > 0 }, 10*stall, stall/10)
	require.Contains(t, logs.String(), `evidence="alive time"`, "the verdict says how the node was judged")
	require.Contains(t, logs.String(), "kernel_last_byte=", "the verdict says what the kernel recorded of the node")
	require.Contains(t, logs.String(), "dialing=1")
	resume()
	require.Eventually(t, func() bool {
		res, err := s.Take(t.Context(), req("resumed"))
		return err == nil && res.Allowed
	}, 60*stall, stall, "the node decides again once it runs")
}

// A client that dials over TLS a server that does not speak it (the
// server waits for the rest of a command, the client for the server's
// hello) fails New within its start bound, naming the address, with
// go-redis's plain options too: go-redis's TLS dial ignores the context
// and waits its DialTimeout (5 s by default), which New does not wait for.
func TestNewTLSClientOnPlainServer(t *testing.T) {
	_, _, pool := selfSigned(t, t.TempDir())
	addr := redistest.StartServer(t, redistest.ServerConfig{}).Addr
	for name, opts := range map[string]*redis.Options{
		"redisstore.ClientOptions": redisstore.ClientOptions(addr),
		"plain go-redis options":   {Addr: addr},
	} {
		t.Run(name, func(t *testing.T) {
			opts.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			client := redis.NewClient(opts)
			t.Cleanup(func() { _ = client.Close() })
			start := time.Now()
			store, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
			took := time.Since(start)
			if store != nil {
				_ = store.Close()
			}
			t.Logf("New: %v (after %v)", err, took.Round(time.Millisecond))
			require.ErrorIs(t, err, redisstore.ErrUnreachable)
			require.Contains(t, err.Error(), addr)
			require.Less(t, took, startBound, "New took %v to fail", took)
		})
	}
}

// A ClusterClient that dials over TLS the nodes of a Cluster that does
// not speak it fails New within the same second as a Client on a plain
// server, naming the seeds and that the client dials over TLS: the seeds
// are dialled together, over TLS as the client's nodes are, and nothing
// before the check waits a second of its own for the slot map.
func TestNewTLSClusterClientOnPlainCluster(t *testing.T) {
	_, _, pool := selfSigned(t, t.TempDir())
	seeds := redistest.ClusterClient(t).Options().Addrs
	for name, opts := range map[string]*redis.ClusterOptions{
		"redisstore.ClusterOptions": redisstore.ClusterOptions(seeds...),
		"plain go-redis options":    {Addrs: seeds},
	} {
		t.Run(name, func(t *testing.T) {
			opts.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			client := redis.NewClusterClient(opts)
			t.Cleanup(func() { _ = client.Close() })
			start := time.Now()
			store, err := redisstore.New(client, redisstore.WithLogger(slog.New(slog.DiscardHandler)))
			took := time.Since(start)
			if store != nil {
				_ = store.Close()
			}
			t.Logf("New: %v (after %v)", err, took.Round(time.Millisecond))
			require.ErrorIs(t, err, redisstore.ErrUnreachable)
			for _, a := range seeds {
				require.Contains(t, err.Error(), a)
			}
			require.Contains(t, err.Error(), "TLS")
			require.Less(t, took, tlsStartBound, "New took %v to fail", took)
		})
	}
}

// tlsStartBound is New's second with room for a busy machine, tighter
// than startBound: a TLS dial that waits for its hello is bounded by
// New's check alone.
const tlsStartBound = 1600 * time.Millisecond
