package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

// Sandbox is one container.
type Sandbox struct {
	p  *Provider
	id string

	mu sync.Mutex
	d  sessionData
	// accounts are the manifest's users and groups (sandbox.Spec), which
	// requests may run as.
	accounts sandbox.Accounts
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID is the container id.
func (s *Sandbox) ID() string { return s.id }

// Name is the container name.
func (s *Sandbox) Name() string { return s.d.Name }

// Root is the workspace root inside the container.
func (s *Sandbox) Root() string { return s.d.Root }

// ImageID is the id of the image the container was created from.
func (s *Sandbox) ImageID() string { return s.d.ImageID }

// Session returns the state needed to reconnect: the container id, and as
// data the image and image id (for replace detection), the workspace
// root, the user and the port URLs as of the last start.
func (s *Sandbox) Session() sandbox.SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, _ := json.Marshal(s.d)
	return sandbox.SessionState{Provider: Kind, ID: s.id, Data: data}
}

// URLs returns the port URLs as of the last start ("8080" → "http://127.0.0.1:49153").
func (s *Sandbox) URLs() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.d.URLs))
	for k, v := range s.d.URLs {
		out[k] = v
	}
	return out
}

// wrap names the operation and the container; when the container itself
// is gone, the error wraps sandbox.ErrNotFound.
func (s *Sandbox) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if s.gone(ctx, err) {
		return s.notFound(op)
	}
	return fmt.Errorf("%s in container %s (%s): %w", op, short(s.id), s.d.Name, err)
}

// notFound is op's error when the container is gone.
func (s *Sandbox) notFound(op string) error {
	return fmt.Errorf("%s: container %s (%s): %w", op, short(s.id), s.d.Name, sandbox.ErrNotFound)
}

// gone reports whether err, a daemon error, means the container no longer
// exists. The daemon answers NotFound alike for a missing container and,
// on its archive and exec endpoints, for a missing path or exec instance:
// a NotFound is told apart by inspecting the container.
func (s *Sandbox) gone(ctx context.Context, err error) bool {
	if !cerrdefs.IsNotFound(err) {
		return false
	}
	_, ierr := s.p.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	return cerrdefs.IsNotFound(ierr)
}

// Start starts the container if it is not running (a stopped sandbox is
// restarted by the next apply) and refreshes the port URLs.
func (s *Sandbox) Start(ctx context.Context) error {
	res, err := s.p.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return s.wrap(ctx, "start", err)
		}
		return s.wrap(ctx, "inspect", err)
	}
	if res.Container.State == nil || !res.Container.State.Running || res.Container.State.Paused {
		if res.Container.State != nil && res.Container.State.Paused {
			if _, err := s.p.cli.ContainerUnpause(ctx, s.id, client.ContainerUnpauseOptions{}); err != nil {
				return s.wrap(ctx, "unpause", err)
			}
		} else if _, err := s.p.cli.ContainerStart(ctx, s.id, client.ContainerStartOptions{}); err != nil {
			return s.wrap(ctx, "start", err)
		}
	}
	return s.refreshURLs(ctx)
}

func (s *Sandbox) refreshURLs(ctx context.Context) error {
	res, err := s.p.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return s.wrap(ctx, "inspect", err)
	}
	urls := map[string]string{}
	if ns := res.Container.NetworkSettings; ns != nil {
		for port, bs := range ns.Ports {
			if port.Proto() != network.TCP {
				continue
			}
			for _, b := range bs {
				if b.HostPort == "" {
					continue
				}
				host := "127.0.0.1"
				if b.HostIP.IsValid() && !b.HostIP.IsUnspecified() {
					host = b.HostIP.String()
				}
				if b.HostIP.Is6() {
					host = "[" + host + "]"
				}
				urls[strconv.Itoa(int(port.Num()))] = "http://" + host + ":" + b.HostPort
				break
			}
		}
	}
	s.mu.Lock()
	s.d.URLs = urls
	s.mu.Unlock()
	return nil
}

// Stop stops the container (SIGTERM, then SIGKILL after the provider's
// stop timeout). Stopping a stopped container is not an error.
func (s *Sandbox) Stop(ctx context.Context) error {
	secs := int(s.p.opts.StopTimeout / time.Second)
	if _, err := s.p.cli.ContainerStop(ctx, s.id, client.ContainerStopOptions{Timeout: &secs}); err != nil {
		return s.wrap(ctx, "stop", err)
	}
	return nil
}

// Delete force-removes the container and its anonymous volumes. A missing
// container is not an error.
func (s *Sandbox) Delete(ctx context.Context) error {
	_, err := s.p.cli.ContainerRemove(ctx, s.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return s.wrap(ctx, "delete", err)
	}
	return nil
}

// Refresh reports running, stopped, or missing (removed behind our back).
func (s *Sandbox) Refresh(ctx context.Context) (sandbox.Status, error) {
	res, err := s.p.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandbox.StatusMissing, nil
		}
		return "", s.wrap(ctx, "inspect", err)
	}
	if st := res.Container.State; st != nil && st.Running && !st.Paused {
		return sandbox.StatusRunning, nil
	}
	return sandbox.StatusStopped, nil
}

// PortURL returns the host URL of an exposed container port.
func (s *Sandbox) PortURL(ctx context.Context, port int) (string, error) {
	if err := s.refreshURLs(ctx); err != nil {
		return "", err
	}
	s.mu.Lock()
	u, ok := s.d.URLs[strconv.Itoa(port)]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("port %d of container %s is not published (is it listed in the sandbox's ports, and is the container running?)", port, s.d.Name)
	}
	return u, nil
}

// Commit snapshots the whole container into the image ref with docker
// commit and returns the new image id. It is available only when the
// sandbox setting commit_snapshot is true. Ephemeral environment never
// reaches the image (it is passed per exec, not in the container config),
// but files written by commands do: see docs/docker-provider.md.
func (s *Sandbox) Commit(ctx context.Context, ref string) (string, error) {
	if !s.d.Commit {
		return "", fmt.Errorf("commit of %s: whole-container snapshots are off; set commit_snapshot = true in the sandbox block", s.d.Name)
	}
	res, err := s.p.cli.ContainerCommit(ctx, s.id, client.ContainerCommitOptions{
		Reference: ref,
		Comment:   "agentctl snapshot of " + s.d.Name,
	})
	if err != nil {
		return "", s.wrap(ctx, "commit "+ref, err)
	}
	return res.ID, nil
}

// lookupUser turns the user setting into numeric ids for files written
// through the archive API: "uid", "uid:gid", or names looked up in the
// image's /etc/passwd and /etc/group.
func (s *Sandbox) lookupUser(ctx context.Context, user string) (uid, gid int, err error) {
	if user == "" {
		return 0, 0, nil
	}
	name, group, hasGroup := strings.Cut(user, ":")
	var passwd []byte
	if uid, err = strconv.Atoi(name); err != nil {
		passwd, err = s.readSystemFile(ctx, "/etc/passwd")
		if err != nil {
			return 0, 0, fmt.Errorf("user %q: cannot read the image's /etc/passwd to resolve the name (%v); use a numeric uid[:gid]", user, err)
		}
		var ok bool
		uid, gid, ok = findID(passwd, name, 2, 3)
		if !ok {
			return 0, 0, fmt.Errorf("user %q: no such user in the image's /etc/passwd; use a numeric uid[:gid] or a user the image defines", user)
		}
	} else {
		gid = uid
		if p, err := s.readSystemFile(ctx, "/etc/passwd"); err == nil {
			if _, g, ok := findIDByUID(p, uid); ok {
				gid = g
			}
		}
	}
	if !hasGroup {
		return uid, gid, nil
	}
	if gid, err = strconv.Atoi(group); err == nil {
		return uid, gid, nil
	}
	groups, err := s.readSystemFile(ctx, "/etc/group")
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: cannot read the image's /etc/group (%v); use a numeric gid", user, err)
	}
	g, _, ok := findID(groups, group, 2, 2)
	if !ok {
		return 0, 0, fmt.Errorf("user %q: no such group in the image's /etc/group", user)
	}
	return uid, g, nil
}

func findID(file []byte, name string, a, b int) (int, int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) > b && f[0] == name {
			x, err1 := strconv.Atoi(f[a])
			y, err2 := strconv.Atoi(f[b])
			if err1 == nil && err2 == nil {
				return x, y, true
			}
		}
	}
	return 0, 0, false
}

func findIDByUID(file []byte, uid int) (int, int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) > 3 && f[2] == strconv.Itoa(uid) {
			if g, err := strconv.Atoi(f[3]); err == nil {
				return uid, g, true
			}
		}
	}
	return 0, 0, false
}

// readSystemFile reads an absolute container path (not a workspace path)
// through the archive API; used only by the provider itself.
func (s *Sandbox) readSystemFile(ctx context.Context, abs string) ([]byte, error) {
	res, err := s.p.cli.CopyFromContainer(ctx, s.id, client.CopyFromContainerOptions{SourcePath: abs})
	if err != nil {
		return nil, err
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	hdr, err := tr.Next()
	if err != nil {
		return nil, err
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("%s is not a regular file", abs)
	}
	b, _, err := readAll(tr, 1<<20)
	return b, err
}

// ensureRoot makes the workspace root exist and belong to the sandbox
// user. Docker creates the working directory on start (owned by root); a
// directory member sent to its parent fixes the owner.
func (s *Sandbox) ensureRoot(ctx context.Context) error {
	root := s.d.Root
	if root == "/" {
		return nil
	}
	st, err := s.p.cli.ContainerStatPath(ctx, s.id, client.ContainerStatPathOptions{Path: root})
	if err == nil && st.Stat.Mode.IsDir() && s.d.UID == 0 && s.d.GID == 0 {
		return nil
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return s.wrap(ctx, "stat workspace root "+root, err)
	}
	if err == nil && !st.Stat.Mode.IsDir() {
		return fmt.Errorf("workspace root %s exists in the image and is not a directory; choose another manifest root", root)
	}
	parent := path.Dir(root)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(s.dirHeader(path.Base(root))); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := s.p.cli.CopyToContainer(ctx, s.id, client.CopyToContainerOptions{
		DestinationPath: parent, Content: &buf,
	}); err != nil {
		if cerrdefs.IsNotFound(err) {
			if s.gone(ctx, err) {
				return s.notFound("create workspace root " + root)
			}
			return fmt.Errorf("workspace root %s: parent directory %s does not exist in the container: %w", root, parent, err)
		}
		return s.wrap(ctx, "create workspace root "+root, err)
	}
	return nil
}

func (s *Sandbox) dirHeader(name string) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeDir,
		Name:     strings.TrimSuffix(name, "/") + "/",
		Mode:     0o755,
		Uid:      s.d.UID,
		Gid:      s.d.GID,
		ModTime:  time.Now(),
	}
}

var errNotDir = errors.New("not a directory")

var _ sandbox.Drifter = (*Sandbox)(nil)

// Drift reports a replace reason when spec.Image now resolves to another
// image than the one the container was created from (the tag was rebuilt
// or re-pulled). A reference that no longer resolves locally is not drift:
// the container keeps working, and a later create would pull it. A
// container created from another reference (a snapshot image) is not
// compared.
func (s *Sandbox) Drift(ctx context.Context, spec sandbox.Spec) (string, error) {
	s.mu.Lock()
	have, ref := s.d.ImageID, s.d.Image
	s.mu.Unlock()
	if spec.Image != "" {
		if ref != "" && ref != spec.Image {
			// Created from another reference than the configured image:
			// a restore from a snapshot image (commit_snapshot). A change
			// of the configured image is a configuration change, planned
			// as a replace without asking the provider.
			return "", nil
		}
		ref = spec.Image
	}
	if ref == "" || have == "" {
		return "", nil
	}
	now, err := s.p.ImageID(ctx, ref)
	if errors.Is(err, sandbox.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if now == have {
		return "", nil
	}
	return fmt.Sprintf("image %q now resolves to %s; the container was created from %s", ref, shortImageID(now), shortImageID(have)), nil
}

// shortImageID shortens "sha256:<64 hex>" to "sha256:<12 hex>".
func shortImageID(id string) string {
	algo, hex, ok := strings.Cut(id, ":")
	if !ok {
		return short(id)
	}
	return algo + ":" + short(hex)
}
