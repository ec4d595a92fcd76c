package fakeopenai

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWaitInFlightBarrier(t *testing.T) {
	if _, err := LoadSpec(); err != nil { // before the clock starts
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var srv *Server
	srv = New(t, WithHandler(func(r Request) Reply {
		if err := srv.WaitInFlight(ctx, 4); err != nil {
			t.Errorf("handler: %v", err)
		}
		return Text("x")
	}))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL+"/responses", "application/json", strings.NewReader(`{"model":"gpt-5","input":"hi"}`))
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if srv.MaxInFlight() != 4 {
		t.Fatalf("max in flight %d", srv.MaxInFlight())
	}
}
