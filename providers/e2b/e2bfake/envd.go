package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem"
	"github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem/filesystemconnect"
	"github.com/agentctl/agentctl/providers/e2b/internal/envd/process/processconnect"
)

type sandboxKey struct{}

// sandboxOf is the sandbox an envd request is for.
func sandboxOf(ctx context.Context) *fsb { return ctx.Value(sandboxKey{}).(*fsb) }

// serveEnvd serves a running sandbox's envd.
func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, b *fsb) {
	if b.token != "" && r.Header.Get("X-Access-Token") != b.token {
		writeErr(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), sandboxKey{}, b))
	if strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/") {
		if f := s.fault(r); f != nil {
			if f.RetryAfter != "" {
				w.Header().Set("Retry-After", f.RetryAfter)
			}
			writeErr(w, f.Status, fmt.Sprintf("injected %d", f.Status))
			return
		}
		s.envdHandler.ServeHTTP(w, r)
		return
	}
	auth := func(*http.Request) (int, string) { return 0, "" }
	s.validated(w, r, s.envdRouter, auth, func(w http.ResponseWriter, r *http.Request, op string, _ map[string]string, body []byte) {
		s.files(w, r, b, op, body)
	})
}

// connectHandlers are envd's Connect services, behind the spec check.
func (s *Server) connectHandlers() http.Handler {
	mux := http.NewServeMux()
	opts := connect.WithInterceptors(specCheck{s})
	mux.Handle(processconnect.NewProcessHandler(&processService{s: s}, opts))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s: s}, opts))
	return mux
}

// specCheck checks every message against its .proto descriptor: a field
// the descriptor does not declare arrives as an unknown field.
type specCheck struct{ s *Server }

func (c specCheck) check(procedure, what string, msg any) {
	m, ok := msg.(interface{ ProtoReflect() protoreflect.Message })
	if !ok {
		c.s.violation("%s: %s is %T, not a protobuf message", procedure, what, msg)
		return
	}
	if f := unknownField(m.ProtoReflect()); f != "" {
		c.s.violation("%s: %s has a field the .proto does not declare (%s)", procedure, what, f)
	}
}

// unknownField names the first unknown field in m or its messages.
func unknownField(m protoreflect.Message) string {
	if len(m.GetUnknown()) > 0 {
		return string(m.Descriptor().FullName())
	}
	found := ""
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && found == ""; i++ {
				found = unknownField(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				found = unknownField(mv.Message())
				return found == ""
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			found = unknownField(v.Message())
		}
		return found == ""
	})
	return found
}

func (c specCheck) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		c.check(req.Spec().Procedure, "request", req.Any())
		resp, err := next(ctx, req)
		if err == nil {
			c.check(req.Spec().Procedure, "response", resp.Any())
		}
		return resp, err
	}
}

func (c specCheck) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c specCheck) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return next(ctx, checkedConn{conn, c})
	}
}

type checkedConn struct {
	connect.StreamingHandlerConn
	c specCheck
}

func (cc checkedConn) Receive(msg any) error {
	err := cc.StreamingHandlerConn.Receive(msg)
	if err == nil {
		cc.c.check(cc.Spec().Procedure, "request", msg)
	}
	return err
}

func (cc checkedConn) Send(msg any) error {
	cc.c.check(cc.Spec().Procedure, "response", msg)
	return cc.StreamingHandlerConn.Send(msg)
}

// proxyPort forwards a request for a sandbox's port to the port on the
// loopback, where the fake's commands listen.
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request, port int) {
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		writeErr(w, http.StatusBadGateway, fmt.Sprintf("The sandbox is running but port %d is not open", port))
	}
	rp.ServeHTTP(w, r)
}

// ---- /files ----

func (s *Server) files(w http.ResponseWriter, r *http.Request, b *fsb, op string, body []byte) {
	p := r.URL.Query().Get("path")
	if err := s.confine(b, p); err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	switch r.Method {
	case http.MethodGet:
		fi, err := os.Stat(p)
		if err != nil {
			fileErr(w, p, err)
			return
		}
		if fi.IsDir() {
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
			return
		}
		data, err := os.ReadFile(p)
		if err != nil {
			fileErr(w, p, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		w.Write(data)
	case http.MethodPost:
		data, err := uploaded(r, body)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fileErr(w, p, err)
			return
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			fileErr(w, p, err)
			return
		}
		u, err := s.userOf(r, b)
		if err != nil {
			writeErr(w, http.StatusUnauthorized, err.Error())
			return
		}
		if u != nil {
			os.Chown(p, u.uid, u.uid)
		}
		writeJSON(w, http.StatusOK, []any{map[string]any{"path": p, "name": filepath.Base(p), "type": "file"}})
	default:
		writeErr(w, http.StatusNotImplemented, "the fake does not implement "+op)
	}
}

func fileErr(w http.ResponseWriter, p string, err error) {
	switch {
	case errors.Is(err, os.ErrNotExist):
		writeErr(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
	case errors.Is(err, os.ErrPermission):
		writeErr(w, http.StatusUnauthorized, err.Error())
	default:
		writeErr(w, http.StatusInternalServerError, err.Error())
	}
}

// uploaded is the content of an upload: the multipart field "file", or
// the raw body.
func uploaded(r *http.Request, body []byte) ([]byte, error) {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	if ct == "application/octet-stream" {
		return body, nil
	}
	mr := multipart.NewReader(strings.NewReader(string(body)), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("no file in the upload: %w", err)
		}
		if part.FormName() == "file" {
			return io.ReadAll(part)
		}
	}
}

// ---- filesystem service ----

type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	s *Server
}

// entryInfo describes p as envd does: the entry's own mode string in
// permissions, but for a symlink the type and permission bits of what it
// resolves to, and the resolved path as its target; types envd does not
// name (FIFOs, sockets, devices) are unspecified.
func entryInfo(p string) (*filesystem.EntryInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("file not found: %w", err))
		}
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	e := &filesystem.EntryInfo{Name: fi.Name(), Path: p, Size: fi.Size(), Permissions: fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()), Type: entryType(fi.Mode()), Mode: uint32(fi.Mode().Perm())}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = ownerName(st.Uid), strconv.Itoa(int(st.Gid))
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			target = p
		}
		e.SymlinkTarget = &target
		e.Type, e.Mode = filesystem.FileType_FILE_TYPE_UNSPECIFIED, 0
		if ti, err := os.Stat(target); err == nil {
			e.Type, e.Mode = entryType(ti.Mode()), uint32(ti.Mode().Perm())
		}
	}
	return e, nil
}

func entryType(m os.FileMode) filesystem.FileType {
	switch {
	case m.IsRegular():
		return filesystem.FileType_FILE_TYPE_FILE
	case m.IsDir():
		return filesystem.FileType_FILE_TYPE_DIRECTORY
	case m&os.ModeSymlink != 0:
		return filesystem.FileType_FILE_TYPE_SYMLINK
	}
	return filesystem.FileType_FILE_TYPE_UNSPECIFIED
}

func ownerName(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return u.Username
	}
	return strconv.Itoa(int(uid))
}

func (f *filesystemService) confined(ctx context.Context, p string) error {
	if err := f.s.confine(sandboxOf(ctx), p); err != nil {
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return nil
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	if err := f.confined(ctx, req.Msg.GetPath()); err != nil {
		return nil, err
	}
	e, err := entryInfo(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	p := req.Msg.GetPath()
	if err := f.confined(ctx, p); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory already exists: %s", p))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path already exists but it is not a directory: %s", p))
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	e, err := entryInfo(p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	p := req.Msg.GetPath()
	if err := f.confined(ctx, p); err != nil {
		return nil, err
	}
	if req.Msg.GetDepth() > 1 {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("the fake lists one level"))
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, connect.NewError(connect.CodeNotFound, err)
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path is not a directory: %s", p))
	}
	out := &filesystem.ListDirResponse{}
	for _, de := range ents {
		if e, err := entryInfo(filepath.Join(p, de.Name())); err == nil {
			out.Entries = append(out.Entries, e)
		}
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	p := req.Msg.GetPath()
	if err := f.confined(ctx, p); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// userOf is the account a request's basic authentication names, nil for
// the default user and root (both the test's own user in the fake); a
// user the sandbox does not have is an error, as envd's.
func (s *Server) userOf(r interface{ BasicAuth() (string, string, bool) }, b *fsb) (*account, error) {
	name, _, ok := r.BasicAuth()
	if !ok || name == "" || name == "root" || name == "user" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.accounts != nil {
		if u, ok := b.accounts.users[name]; ok {
			return &u, nil
		}
	}
	return nil, fmt.Errorf("invalid username: '%s'", name)
}
