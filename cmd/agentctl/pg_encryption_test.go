package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentctl/agentctl/internal/seal/sealtest"
)

// TestPGEncrypted: the pipeline applied against the pg backend with the
// state encrypted, killed mid-run and resumed from another working
// directory; the backend's rows (state versions, changes, journal
// records, snapshot chunks, lock info) hold none of the run's text.
func TestPGEncrypted(t *testing.T) {
	plain, _ := pgBackend(t)
	schema := regexp.MustCompile(`schema_name = "([^"]+)"`).FindStringSubmatch(plain)[1]
	block := strings.Replace(plain, "agentctl {\n", "agentctl {\n  encryption {\n    key = env(\"AGENTCTL_STATE_KEY\")\n  }\n", 1)
	_, key := sealtest.NewKey(t)
	env := "AGENTCTL_STATE_KEY=" + key
	a, b := pgHarness(t, block), pgHarness(t, block)
	a.env, b.env = []string{env}, []string{env}
	a.mustRun("init", "-no-color")
	b.mustRun("init", "-no-color")

	p := a.start("apply", "-auto-approve", "-no-color")
	a.waitUntil("step 5", func() bool { ws := localWorkspace(a); return ws != "" && lastLoggedStep(ws) >= 5 })
	p.kill(t)
	out := b.mustRun("apply", "-auto-approve", "-no-color")
	if !strings.Contains(out, "Apply complete") {
		t.Fatalf("resume:\n%s", out)
	}
	if got := strings.TrimSpace(b.mustRun("output", "-raw", "answer")); got != finalAnswer {
		t.Errorf("output answer = %q", got)
	}

	conn, err := pgx.Connect(context.Background(), os.Getenv("AGENTCTL_TEST_PG"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows := 0
	for table, col := range map[string]string{
		"state_versions": "data", "state_changes": "record", "journal_records": "record",
		"snapshot_chunks": "data", "lock_info": "convert_to(info::text, 'UTF8')",
	} {
		rs, err := conn.Query(context.Background(), `SELECT `+col+` FROM `+pgx.Identifier{schema, table}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var data []byte
			if err := rs.Scan(&data); err != nil {
				t.Fatal(err)
			}
			rows++
			for _, s := range []string{finalAnswer, "log.txt", "a 24-step job", "step 24", "Run all the steps."} {
				if bytes.Contains(data, []byte(s)) {
					t.Errorf("%s holds %q in plaintext", table, s)
				}
			}
		}
		rs.Close()
	}
	if rows < 10 {
		t.Fatalf("only %d rows checked", rows)
	}
	// Without the key (the block removed) the backend's state is refused.
	if err := os.WriteFile(filepath.Join(b.dir, "main.hcl"), []byte(plain+pipelineConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"state", "plan"} {
		args := []string{cmd, "-no-color"}
		if cmd == "state" {
			args = []string{"state", "list"}
		}
		if _, errOut, code := b.run(args...); code == 0 || !strings.Contains(errOut, "no encryption key is configured") {
			t.Errorf("%s without the key: exit %d\n%s", cmd, code, errOut)
		}
	}
}
