package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// forward forwards local ports on 127.0.0.1 to ports of one Pod. It
// owns its listeners, so their ports, recorded in the state as the
// sandbox's URLs, stay the same for as long as it runs: client-go's
// PortForwarder ends, and closes them, at the first connection the Pod
// refuses (nothing listening yet), which a server still starting always
// causes. The streams to the Pod are one connection, dialled again when
// it is lost or after a refusal.
type forward struct {
	pod   string
	dial  func() (httpstream.Connection, error)
	local map[int]int // Pod port → local port
	lns   []net.Listener
	wg    sync.WaitGroup

	mu     sync.Mutex
	conn   httpstream.Connection
	nextID int
	closed bool
}

// newForward listens on a free local port for each of ports and forwards
// the connections to pod.
func (s *Sandbox) newForward(ns, pod string, ports []int) (*forward, error) {
	u := s.p.core.rc.Post().Resource(resPods).Namespace(ns).Name(pod).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(s.p.cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward to Pod %s: %w", pod, err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, s.p.cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward to Pod %s: %w", pod, err)
	}
	dialer := portforward.NewFallbackDialer(wsDialer, spdyDialer, httpstream.IsUpgradeFailure)
	f := &forward{pod: pod, local: map[int]int{}, dial: func() (httpstream.Connection, error) {
		conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		return conn, err
	}}
	for _, port := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.close()
			return nil, fmt.Errorf("port-forward of port %d: listening on 127.0.0.1: %w", port, err)
		}
		f.lns = append(f.lns, ln)
		f.local[port] = ln.Addr().(*net.TCPAddr).Port
		f.wg.Add(1)
		go f.serve(ln, port)
	}
	return f, nil
}

// connect returns the connection to the Pod, dialling it when there is
// none or it was lost.
func (f *forward) connect() (httpstream.Connection, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, 0, net.ErrClosed
	}
	if f.conn != nil {
		select {
		case <-f.conn.CloseChan():
			f.conn = nil
		default:
		}
	}
	if f.conn == nil {
		conn, err := f.dial()
		if err != nil {
			return nil, 0, err
		}
		f.conn = conn
	}
	f.nextID++
	return f.conn, f.nextID, nil
}

func (f *forward) serve(ln net.Listener, port int) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go f.handle(c, port)
	}
}

// handle carries one local connection to port of the Pod, as kubectl
// port-forward does: an error stream and a data stream per connection.
// A connection the Pod refuses is closed; the forward goes on.
func (f *forward) handle(c net.Conn, port int) {
	defer c.Close()
	conn, id, err := f.connect()
	if err != nil {
		return
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errStream, err := conn.CreateStream(h)
	if err != nil {
		f.drop(conn)
		return
	}
	errStream.Close()
	defer conn.RemoveStreams(errStream)
	// The Pod reports a failure (nothing listens on the port) on the
	// error stream: the local connection is closed at once, where
	// kubectl would end the whole forward.
	failed := make(chan struct{})
	errDone := make(chan struct{})
	go func() {
		msg, _ := io.ReadAll(errStream)
		if len(msg) > 0 {
			close(failed)
		}
		close(errDone)
	}()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		f.drop(conn)
		return
	}
	defer conn.RemoveStreams(data)
	remoteDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, data)
		close(remoteDone)
	}()
	localDone := make(chan struct{})
	go func() {
		_, err := io.Copy(data, c)
		data.Close()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			close(localDone)
		}
	}()
	select {
	case <-remoteDone:
	case <-localDone:
	case <-failed:
	}
	_ = data.Reset()
	<-errDone
	select {
	case <-failed:
		// After a refusal the connection's other streams stall (kubectl
		// closes it for the same reason): the next local connection
		// dials a new one. Dropped before the local connection is
		// closed, so that a client retrying at once gets the new one.
		f.drop(conn)
	default:
	}
	c.Close()
}

// drop closes conn and forgets it, unless another one replaced it.
func (f *forward) drop(conn httpstream.Connection) {
	f.mu.Lock()
	if f.conn == conn {
		f.conn = nil
	}
	f.mu.Unlock()
	conn.Close()
}

// close stops listening and ends the connection to the Pod.
func (f *forward) close() {
	f.mu.Lock()
	f.closed = true
	conn := f.conn
	f.conn = nil
	f.mu.Unlock()
	for _, ln := range f.lns {
		ln.Close()
	}
	if conn != nil {
		conn.Close()
	}
	f.wg.Wait()
}

func (s *Sandbox) closeForward() {
	s.mu.Lock()
	f := s.forward
	s.forward = nil
	s.mu.Unlock()
	if f != nil {
		f.close()
	}
}

// ensureForward starts the port-forward of every exposed port to the
// current Pod, or returns the running one.
func (s *Sandbox) ensureForward(ctx context.Context) (*forward, error) {
	ns, name := s.pod()
	s.mu.Lock()
	if f := s.forward; f != nil && f.pod == name {
		s.mu.Unlock()
		return f, nil
	}
	s.mu.Unlock()
	s.closeForward()
	f, err := s.newForward(ns, name, s.spec.Ports)
	if err != nil {
		return nil, err
	}
	// Dial now: a refusal (RBAC, a Pod gone) is the caller's error, not
	// a connection reset later.
	if _, _, err := f.connect(); err != nil {
		f.close()
		return nil, s.p.apiError("port-forward to Pod "+name, "pods/portforward (create, get)", err)
	}
	if err := ctx.Err(); err != nil {
		f.close()
		return nil, err
	}
	s.mu.Lock()
	s.forward = f
	s.mu.Unlock()
	return f, nil
}
