package statefile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a reader (or a crash at
// any moment) sees either the old content or the new content, never a
// mixture or a truncated file. It writes a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory so
// the rename itself is durable.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return ReplaceFile(path, "", data, perm)
}

// ReplaceFile is WriteFileAtomic that, when backup is not "", first keeps
// the file being replaced as backup (in the same directory): the previous
// file itself becomes the backup through a hard link (its content was
// made durable when it was written), or a durable copy where the file
// system has no hard links. Both renames are made durable by the one
// directory fsync. A crash at any moment leaves path holding the old or
// the new content, and backup holding the old content or what it held
// before.
func ReplaceFile(path, backup string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: fsync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if backup != "" {
		if err = keepBackup(path, backup, perm); err != nil {
			return fmt.Errorf("writing %s: keeping the previous file as %s: %w", path, backup, err)
		}
	}
	if err = os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = SyncDir(dir); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// WriteFileVisible replaces path with data atomically for other processes
// (a temporary file renamed over it: a reader sees the old content or
// the new, whole) but not durably: nothing is fsynced, so a power loss
// may leave either, or an empty file. For the lock info, which only
// describes a holder that is alive: after a power loss there is none,
// and the next holder replaces the file.
func WriteFileVisible(path string, data []byte, perm os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed
// in it survive a power loss.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// RemoveDurable removes path (a missing file is not an error) and fsyncs
// its directory.
func RemoveDurable(path string) error {
	if err := os.Remove(path); err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// keepBackup makes backup hold the current content of path (nothing to do
// when path does not exist yet), replacing backup atomically. The caller
// fsyncs the directory.
func keepBackup(path, backup string, perm os.FileMode) (err error) {
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(backup), "."+filepath.Base(backup)+".tmp-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer func() {
		if err != nil {
			os.Remove(tmpName)
		}
	}()
	linked := false
	if fi.Mode().IsRegular() {
		if err := os.Remove(tmpName); err != nil {
			return err
		}
		linked = os.Link(path, tmpName) == nil
	}
	if !linked {
		// No hard links here (or not a regular file): copy durably.
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := writeSynced(tmpName, data, perm); err != nil {
			return err
		}
	} else if err := os.Chmod(tmpName, perm); err != nil {
		return err
	}
	return os.Rename(tmpName, backup)
}

// writeSynced writes data to a new file at path and fsyncs it.
func writeSynced(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync: %w", err)
	}
	return f.Close()
}
