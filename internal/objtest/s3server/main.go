// Command s3server runs the test S3 server of internal/objtest on its
// own, for examples/mounts.hcl: an in-memory store on the loopback
// interface that requires one access key, with a bucket holding a small
// data room. It prints the variables to export and serves until killed.
//
//	go run ./internal/objtest/s3server -addr 127.0.0.1:9000
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/agentctl/agentctl/internal/objtest"
)

// room is the example's data room.
var room = map[string]string{
	"deals/acme/terms.md":       "# Acme acquisition: terms\n\nPrice: 12.5M EUR, 60% at closing, 40% over two years.\nClosing: 2025-03-31.\n",
	"deals/acme/financials.csv": "year,revenue,ebitda\n2022,4.1,0.6\n2023,5.3,0.9\n2024,6.8,1.4\n",
	"deals/acme/risks.md":       "# Risks\n\n- Key customer is 35% of revenue.\n- Lease ends 2026.\n",
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on (keep it on the loopback interface)")
	bucket := flag.String("bucket", "room", "bucket to create and fill with the example data room")
	key := flag.String("key", "AKIAEXAMPLEROOM00001", "access key id the server requires")
	secret := flag.String("secret", "example-room-secret", "secret access key the server requires")
	flag.Parse()
	s := objtest.NewS3(*key, *secret)
	if err := s.MakeBucket(*bucket); err != nil {
		fail(err)
	}
	for k, v := range room {
		if err := s.PutObject(*bucket, k, v); err != nil {
			fail(err)
		}
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fail(err)
	}
	fmt.Printf("S3 server at http://%s, bucket %q\n", l.Addr(), *bucket)
	fmt.Printf("export ROOM_ACCESS_KEY_ID=%s ROOM_SECRET_ACCESS_KEY=%s\n", *key, *secret)
	fail(http.Serve(l, s.Handler()))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "s3server:", err)
	os.Exit(1)
}
