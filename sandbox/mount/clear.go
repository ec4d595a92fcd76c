//go:build linux

package mount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Unmount clears the mount of o's workspace path: rclone is asked to end
// (it writes back what it holds), then the mount point is detached if it
// is still there, and the record, cache and mount point are removed.
func (m *Mounter) Unmount(ctx context.Context, o Owner, path string) error {
	return m.clearKey(ctx, key(o, path))
}

// Clear clears every recorded mount of o: at destroy, and before a new
// sandbox of the same address is made (a killed agentctl's leftovers).
func (m *Mounter) Clear(ctx context.Context, o Owner) error {
	recs, err := m.records()
	if err != nil {
		return err
	}
	var errs []error
	for k, rec := range recs {
		if rec.Lineage == o.Lineage && rec.Address == o.Address {
			errs = append(errs, m.clearKey(ctx, k))
		}
	}
	return errors.Join(errs...)
}

// Recorded lists the workspace paths of o's recorded mounts.
func (m *Mounter) Recorded(o Owner) ([]string, error) {
	recs, err := m.records()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rec := range recs {
		if rec.Lineage == o.Lineage && rec.Address == o.Address {
			out = append(out, rec.Path)
		}
	}
	return out, nil
}

func (m *Mounter) records() (map[string]record, error) {
	names, err := filepath.Glob(filepath.Join(m.Dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("listing mount records: %w", err)
	}
	out := map[string]record{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("reading mount record: %w", err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("mount record %s is unreadable (%v): unmount its directory by hand and remove it", n, err)
		}
		out[strings.TrimSuffix(filepath.Base(n), ".json")] = rec
	}
	return out, nil
}

// clearKey ends the mount of key k, whatever state a killed agentctl left
// it in: recorded but not started, mounted, or rclone gone and the mount
// point dead ("transport endpoint is not connected").
func (m *Mounter) clearKey(ctx context.Context, k string) error {
	recPath := filepath.Join(m.Dir, k+".json")
	hostDir := filepath.Join(m.Dir, k)
	var rec record
	if b, err := os.ReadFile(recPath); err == nil {
		json.Unmarshal(b, &rec)
	}
	if rec.PID > 0 && isRclone(rec.PID, hostDir) {
		stop(ctx, rec.PID, 30*time.Second)
	}
	if mounted(hostDir) {
		if err := unix.Unmount(hostDir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmounting %s: %w", hostDir, err)
		}
	}
	if rec.PID > 0 && isRclone(rec.PID, hostDir) {
		syscall.Kill(rec.PID, syscall.SIGKILL)
	}
	// The mount point is empty now; Remove (not RemoveAll) never reaches
	// into a bucket should it still be mounted.
	if err := os.Remove(hostDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing mount point %s: %w", hostDir, err)
	}
	os.RemoveAll(filepath.Join(m.Dir, k+".cache"))
	os.Remove(filepath.Join(m.Dir, k+".log"))
	if err := os.Remove(recPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing mount record: %w", err)
	}
	return nil
}

// isRclone says whether pid is the rclone mount of hostDir (a recorded
// pid may have been reused by another process since).
func isRclone(pid int, hostDir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
	if len(args) < 4 || string(args[1]) != "mount" {
		return false
	}
	return string(args[3]) == hostDir
}

// stop asks rclone to end (it unmounts and writes back pending files)
// and waits up to grace for it.
func stop(ctx context.Context, pid int, grace time.Duration) {
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && isZombie(b) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isZombie reads a /proc/PID/stat line's state.
func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// Check lists the mount's bucket (and prefix) once, so that wrong
// credentials, a missing bucket or an unreachable endpoint are reported
// clearly before anything is mounted.
func (m *Mounter) Check(ctx context.Context, def Def) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	cmd := m.command(ctx, def, "lsf", "--max-depth", "1", "--config", filepath.Join(m.Dir, "rclone.conf"),
		"--retries", "1", "--low-level-retries", "1", "--contimeout", "5s", "--timeout", "10s", def.checkRemote())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = nil
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: no answer within %s: check the endpoint", def.Source(), m.timeout())
	}
	return fmt.Errorf("%s: %s", def.Source(), explain(def, stderr.String()))
}

// status401 reports whether rclone's output holds an HTTP 401: the
// digits 401 standing alone, not within a port, a time or a size.
func status401(s string) bool {
	for i := 0; ; i++ {
		j := strings.Index(s[i:], "401")
		if j < 0 {
			return false
		}
		i += j
		before := i == 0 || !strings.ContainsRune("0123456789:.", rune(s[i-1]))
		after := i+3 == len(s) || s[i+3] < '0' || s[i+3] > '9'
		if before && after {
			return true
		}
	}
}

// explain turns rclone's error output into what went wrong and what to do.
func explain(def Def, out string) string {
	low := strings.ToLower(out)
	detail := lastError(out)
	switch {
	case strings.Contains(low, "invalidaccesskeyid"), strings.Contains(low, "signaturedoesnotmatch"),
		strings.Contains(low, "accessdenied"), strings.Contains(low, "status code: 403"), status401(low),
		strings.Contains(low, "invalid_grant"), strings.Contains(low, "unauthorized"),
		strings.Contains(low, "authenticationfailed"), strings.Contains(low, "authorizationpermissionmismatch"):
		return "the store refused the credentials (" + detail + "): check " + credentialHint(def.Kind)
	case def.Kind == KindAzure && strings.Contains(low, "directory not found") && def.Secrets.AccountKey == "" && def.Secrets.SASToken == "":
		return "the container does not exist or is private (" + detail + "): fix container, or set account_key or sas_token"
	case strings.Contains(low, "nosuchbucket"), strings.Contains(low, "directory not found"), strings.Contains(low, "bucket not found"),
		strings.Contains(low, "status code: 404"), strings.Contains(low, "notfound"), strings.Contains(low, "not_found"):
		return "the " + bucketNoun(def.Kind) + " does not exist (" + detail + "): create it, or fix " + bucketWord(def.Kind)
	case strings.Contains(low, "connection refused"), strings.Contains(low, "no such host"), strings.Contains(low, "i/o timeout"),
		strings.Contains(low, "network is unreachable"), strings.Contains(low, "dial tcp"):
		return "the endpoint is unreachable (" + detail + "): check endpoint and the network"
	}
	return "rclone could not list the " + bucketNoun(def.Kind) + ": " + detail
}

// credentialHint says which arguments hold a mount kind's credentials.
func credentialHint(kind string) string {
	switch kind {
	case KindGCS:
		return "credentials_json, and that its service account may read this bucket"
	case KindAzure:
		return "account_key or sas_token (a SAS's permissions and expiry), and that they are the account's"
	case KindBox:
		return "access_token (Box access tokens expire, developer tokens after an hour), and that its user may read the folder"
	}
	return "the access key and secret, and that they may read this bucket"
}

// bucketNoun is what a mount of kind mounts.
func bucketNoun(kind string) string {
	switch kind {
	case KindAzure:
		return "container"
	case KindBox:
		return "folder"
	}
	return "bucket"
}

// bucketWord is the argument that names what a mount of kind mounts.
func bucketWord(kind string) string {
	switch kind {
	case KindAzure:
		return "container"
	case KindBox:
		return "folder_id"
	}
	return "bucket"
}

// lastError is rclone's last error line, without its timestamp. The
// Azure SDK's errors span lines: their status line says more.
func lastError(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if _, status, ok := strings.Cut(l, "RESPONSE Status: "); ok {
			return strings.TrimSpace(status)
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if j := strings.Index(l, "ERROR : "); j >= 0 {
			return strings.TrimSpace(l[j+len("ERROR : "):])
		}
		if j := strings.Index(l, "Failed to "); j >= 0 {
			return l[j:]
		}
	}
	if len(lines) > 0 {
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return "no output"
}

// Owners lists the sandboxes that have recorded mounts.
func (m *Mounter) Owners() ([]Owner, error) {
	recs, err := m.records()
	if err != nil {
		return nil, err
	}
	seen := map[Owner]bool{}
	var out []Owner
	for _, rec := range recs {
		o := Owner{Lineage: rec.Lineage, Address: rec.Address}
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out, nil
}
