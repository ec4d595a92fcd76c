//go:build linux

package userns_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/internal/userns"
	"github.com/agentctl/agentctl/internal/userns/usernstest"
)

// helperEnv makes the test binary a helper: "outer" starts "inner" in a
// user namespace (as the ordinary user), "inner" reports what it is.
const helperEnv = "USERNS_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "outer":
		os.Exit(outer())
	case "inner":
		inner()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func outer() int {
	mp, err := userns.Lookup(1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"=inner")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	runtime.LockOSThread()
	if err := userns.Start(cmd, mp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := cmd.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func inner() {
	for _, f := range []string{"uid_map", "gid_map", "setgroups"} {
		b, _ := os.ReadFile("/proc/self/" + f)
		fmt.Printf("%s: %s\n", f, strings.Join(strings.Fields(string(b)), " "))
	}
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "Uid:") {
			fmt.Println(strings.Join(strings.Fields(l), " "))
		}
	}
	_, missing, err := userns.Mapped("uid_map", []int{0, 1, 2001, 70000})
	fmt.Printf("unmapped: %v %v\n", missing, err)
}

// TestStart runs the test binary as an ordinary user with subordinate
// ids, which starts it again in a user namespace: there it is root, with
// every capability, its own id and its subordinate ids mapped, and may
// set its groups (manifest users' run_as needs that).
func TestStart(t *testing.T) {
	u := usernstest.Find(t, 1)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := usernstest.Executable(t, exe)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), helperEnv+"=outer")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.Credential}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	m := u.Map
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		t.Fatal(err)
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("uid_map: 0 %d 1 1 %d %d\n", m.UID, m.SubUID.Start, m.Max()),
		fmt.Sprintf("gid_map: 0 %d 1 1 %d %d\n", m.GID, m.SubGID.Start, m.Max()),
		"setgroups: allow\n",
		"Uid: 0 0 0 0\n",
		fmt.Sprintf("CapEff: %016x\n", uint64(1)<<(last+1)-1),
		"unmapped: [70000] <nil>\n",
	} {
		if m.Max() >= 70000 && strings.HasPrefix(want, "unmapped") {
			continue
		}
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the process in the user namespace reports\n%s\nwant a line %q", stdout.String(), want)
		}
	}
}
