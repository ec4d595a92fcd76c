package pgtest

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

var shared Shared

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Stop(); err != nil {
		println(err.Error())
		code = 1
	}
	os.Exit(code)
}

// TestServer starts the cluster, reaches its port, restarts it and
// reaches it again.
func TestServer(t *testing.T) {
	srv := shared.Server(t)
	dial := func() {
		t.Helper()
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(srv.Port), 5*time.Second)
		if err != nil {
			t.Fatalf("server not listening: %v", err)
		}
		c.Close()
	}
	dial()
	if err := srv.Restart(context.Background(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	dial()
}
