package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		env      []string
		enabled  bool
		endpoint string
		err      string
	}{
		{name: "unset", env: nil},
		{name: "generic endpoint", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318"}, enabled: true, endpoint: "http://collector:4318/v1/traces"},
		{name: "traces endpoint as is", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://b:2/custom"}, enabled: true, endpoint: "https://b:2/custom"},
		{name: "sdk disabled", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:1", "OTEL_SDK_DISABLED=true"}},
		{name: "exporter none", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:1", "OTEL_TRACES_EXPORTER=none"}},
		{name: "grpc refused", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:1", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"},
		{name: "traces protocol wins", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:1", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf"}, enabled: true, endpoint: "http://a:1/v1/traces"},
		{name: "other exporter refused", env: []string{"OTEL_TRACES_EXPORTER=zipkin"}, err: "OTEL_TRACES_EXPORTER=zipkin is not supported"},
		{name: "bad endpoint", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318"}, err: "is not an http:// or https:// URL"},
		{name: "bad header", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://a:1", "OTEL_EXPORTER_OTLP_HEADERS=novalue"}, err: "OTEL_EXPORTER_OTLP_HEADERS: expected"},
		{name: "credentials not shown", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://user:pass@a:1"}, enabled: true, endpoint: "http://user:xxxxx@a:1/v1/traces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(ctx, tc.env, "0.0.0-test")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				sctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				_ = p.Shutdown(sctx) // the endpoints are not reachable
			}()
			if p.Enabled() != tc.enabled || p.Endpoint != tc.endpoint {
				t.Errorf("enabled %v endpoint %q, want %v %q", p.Enabled(), p.Endpoint, tc.enabled, tc.endpoint)
			}
			_, span := p.Tracer("t").Start(ctx, "x")
			if span.IsRecording() != tc.enabled {
				t.Errorf("span recording = %v, want %v", span.IsRecording(), tc.enabled)
			}
			span.End()
		})
	}
}

func TestParseHeaders(t *testing.T) {
	h, err := parseHeaders("api-key=a%20b, x=1,,")
	if err != nil || h["api-key"] != "a b" || h["x"] != "1" || len(h) != 2 {
		t.Fatalf("parseHeaders = %v, %v", h, err)
	}
}
