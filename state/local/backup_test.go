package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/state/statefile"
	"github.com/agentctl/agentctl/state/statetest"
)

func readSerial(t *testing.T, path string) uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := statefile.DecodeStateVersion(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return s.Serial
}

func TestWriteKeepsPreviousStateAsBackup(t *testing.T) {
	d := openTestDir(t)
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.BackupFile()); !os.IsNotExist(err) {
		t.Fatalf("a backup exists after the first write: %v", err)
	}
	first, _ := os.ReadFile(d.StateFile())
	for want := uint64(1); want <= 3; want++ {
		if err := d.Write(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if got := readSerial(t, d.BackupFile()); got != want {
			t.Fatalf("backup serial = %d after the write of serial %d, want %d", got, s.Serial, want)
		}
		if got := readSerial(t, d.StateFile()); got != want+1 {
			t.Fatalf("state serial = %d, want %d", got, want+1)
		}
		if want == 1 {
			if b, _ := os.ReadFile(d.BackupFile()); string(b) != string(first) {
				t.Fatal("the backup is not the previous state file byte for byte")
			}
		}
	}
	fi, err := os.Stat(d.BackupFile())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode = %v, want 0600", fi.Mode().Perm())
	}
	if d.BackupFile() != filepath.Join(d.Path(), "state.json.backup") {
		t.Errorf("backup at %s", d.BackupFile())
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(d.Path())
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestBackupOfAWorldReadableStateIsPrivate(t *testing.T) {
	d := openTestDir(t)
	if err := d.Write(context.Background(), statetest.Sample()); err != nil {
		t.Fatal(err)
	}
	// A state file copied into place by hand with a lax mode.
	if err := os.Chmod(d.StateFile(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.StateFile(), d.BackupFile()} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", p, fi.Mode().Perm())
		}
	}
}

func TestDamagedStateNamesTheBackup(t *testing.T) {
	d := openTestDir(t)
	s := statetest.Sample()
	for range 2 {
		if err := d.Write(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(d.StateFile(), []byte("{\n  \"format_version\": 1,\n  \"ser"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := d.Read(context.Background())
	if err == nil {
		t.Fatal("a damaged state read without error")
	}
	for _, want := range []string{d.StateFile(), "not valid JSON", d.BackupFile() + " (serial 1)", "cp " + d.BackupFile() + " " + d.StateFile()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	// Following the advice works.
	b, err := os.ReadFile(d.BackupFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.StateFile(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := d.Read(context.Background())
	if err != nil {
		t.Fatalf("the restored backup does not read: %v", err)
	}
	if back.Serial != 1 || back.Lineage != s.Lineage {
		t.Fatalf("restored state: serial %d lineage %s, want serial 1 lineage %s", back.Serial, back.Lineage, s.Lineage)
	}
}

func TestDamagedStateWithoutBackup(t *testing.T) {
	d := openTestDir(t)
	os.MkdirAll(d.Path(), 0o755)
	os.WriteFile(d.StateFile(), []byte(`{"format_version": 1}`), 0o600)
	_, err := d.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no lineage") || !strings.Contains(err.Error(), "there is no backup ("+d.BackupFile()+" does not exist)") {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(d.BackupFile(), []byte(`{`), 0o600)
	_, err = d.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the backup "+d.BackupFile()+" is damaged too") {
		t.Fatalf("err = %v", err)
	}
}

func TestBackupBesideStateFileOverride(t *testing.T) {
	tmp := t.TempDir()
	sf := filepath.Join(tmp, "elsewhere", "prod.json")
	d, err := OpenDir(filepath.Join(tmp, ".agentctl"), WithStateFile(sf))
	if err != nil {
		t.Fatal(err)
	}
	s := statetest.Sample()
	for range 2 {
		if err := d.Write(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if got := readSerial(t, sf+".backup"); got != 1 {
		t.Fatalf("backup beside the -state file has serial %d, want 1", got)
	}
}
