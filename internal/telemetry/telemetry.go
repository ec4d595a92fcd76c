// Package telemetry sets up OpenTelemetry tracing for one agentctl
// command: an OTLP/HTTP exporter when the standard OTEL_EXPORTER_OTLP_*
// variables ask for one, and a no-op tracer provider otherwise (no
// exporter, no goroutine, no allocation per span). It also holds the
// helpers the engine uses to describe values in span attributes without
// putting them there (lengths and digests).
//
// The provider is handed to the engine explicitly
// (engine.Engine.TracerProvider); the one OpenTelemetry global set here
// is its error handler (New says why).
package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Provider is the tracer provider of one command and how to end it.
type Provider struct {
	trace.TracerProvider
	// Endpoint is where spans are exported ("" when tracing is off).
	Endpoint string
	sdk      *sdktrace.TracerProvider
	errs     *exportErrors
}

// Enabled reports whether spans are recorded and exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// Shutdown exports the spans still buffered and stops the exporter. It
// returns one error for every export of the command that failed: the
// first, and how many more. It is a no-op when tracing is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		p.errs.Handle(err)
	}
	more, first := p.errs.get()
	switch {
	case first == nil:
		return nil
	case more > 0:
		return fmt.Errorf("exporting traces to %s: %w (and %d more %s)", p.Endpoint, first, more, plural(more, "failure", "failures"))
	}
	return fmt.Errorf("exporting traces to %s: %w", p.Endpoint, first)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// exportErrors is the OpenTelemetry error handler of a command: it keeps
// the first error (a batch of spans that could not be exported, mostly)
// and counts the others, for Shutdown to report once.
type exportErrors struct {
	mu    sync.Mutex
	first error
	more  int
}

// Handle implements otel.ErrorHandler.
func (e *exportErrors) Handle(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == nil {
		e.first = err
		return
	}
	e.more++
}

// get returns how many errors came after the first, and the first.
func (e *exportErrors) get() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.more, e.first
}

// Off is the provider when tracing is not configured.
func Off() *Provider { return &Provider{TracerProvider: noop.NewTracerProvider()} }

// lookup returns the last value of name in environ.
func lookup(environ []string, name string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// New returns the tracer provider the environment asks for. Tracing is on
// when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
// is set (and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none
// turns it off); spans then go over OTLP/HTTP with protobuf bodies. A
// setting agentctl cannot honour (another protocol or exporter, a
// malformed endpoint or header) is an error, never ignored. environ is
// authoritative for the variables read here; the exporter reads the rest
// of the standard variables (timeouts, compression, certificates) from
// the process environment.
func New(ctx context.Context, environ []string, version string) (*Provider, error) {
	if strings.EqualFold(strings.TrimSpace(lookup(environ, "OTEL_SDK_DISABLED")), "true") {
		return Off(), nil
	}
	switch exp := strings.TrimSpace(lookup(environ, "OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return Off(), nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s is not supported: agentctl exports traces with OTLP only; set it to otlp or none, or unset it", exp)
	}
	endpoint := strings.TrimSpace(lookup(environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	generic := false
	if endpoint == "" {
		endpoint = strings.TrimSpace(lookup(environ, "OTEL_EXPORTER_OTLP_ENDPOINT"))
		generic = true
	}
	if endpoint == "" {
		return Off(), nil
	}
	protoVar, proto := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(lookup(environ, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		protoVar, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(lookup(environ, "OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("%s=%s is not supported: agentctl exports traces over OTLP/HTTP with protobuf; set it to http/protobuf or unset it", protoVar, proto)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q is not an http:// or https:// URL: set OTEL_EXPORTER_OTLP_ENDPOINT to the collector's base URL, e.g. http://localhost:4318", endpoint)
	}
	if generic {
		// The signal path is appended to the generic endpoint (the OTLP
		// exporter specification).
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
	headers, err := parseHeaders(lookup(environ, "OTEL_EXPORTER_OTLP_HEADERS"))
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %w", err)
	}
	th, err := parseHeaders(lookup(environ, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_HEADERS: %w", err)
	}
	for k, v := range th {
		headers[k] = v
	}
	if len(headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP trace exporter: %w", err)
	}
	service := lookup(environ, "OTEL_SERVICE_NAME")
	if service == "" {
		service = "agentctl"
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.ServiceVersion(version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	// The batch span processor reports a failed export to OpenTelemetry's
	// error handler, whose default prints a Go log line per failure: a
	// flood on stderr for a collector that is down. That handler is
	// process-global by OpenTelemetry's design (otel.SetErrorHandler, read
	// by every otel.Handle), so it cannot be handed to the provider as
	// everything else is: it is set here, once per command, where the
	// command's provider is built, and Shutdown reports what it gathered
	// as one error. A later command in the same process (tests) sets its
	// own.
	errs := &exportErrors{}
	otel.SetErrorHandler(errs)
	return &Provider{TracerProvider: tp, Endpoint: u.Redacted(), sdk: tp, errs: errs}, nil
}

// parseHeaders reads the W3C-baggage-like list OTLP headers are given in:
// key=value pairs, comma separated, URL-encoded.
func parseHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, errors.New("expected a comma-separated list of key=value pairs")
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %s: the value is not URL-encoded correctly", k)
		}
		out[k] = val
	}
	return out, nil
}

// Digest is the hex SHA-256 of s, the way a value is identified in an
// attribute without being disclosed.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
