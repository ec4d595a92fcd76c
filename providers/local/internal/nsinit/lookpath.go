//go:build unix

package nsinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// LookPath resolves name against pathList (the command's PATH, not
// agentctl's), relative names against dir. (Unix paths: path, not
// path/filepath, which would make the init wait for that package's
// initialization.)
func LookPath(name, pathList, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !path.IsAbs(p) {
			p = path.Join(dir, p)
		}
		if err := isExecutable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	var firstErr error
	var dirs []string
	if pathList != "" {
		dirs = strings.Split(pathList, ":")
	}
	for _, d := range dirs {
		if d == "" {
			d = "."
		}
		if !path.IsAbs(d) {
			d = path.Join(dir, d)
		}
		p := path.Join(d, name)
		err := isExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !errors.Is(err, fs.ErrNotExist) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", errors.New("command not found")
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: is a directory: %w", p, fs.ErrPermission)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: %w", p, fs.ErrPermission)
	}
	return nil
}

// NotFoundCode is the shell's exit code for a command that cannot run:
// 127 when missing, 126 when not executable.
func NotFoundCode(err error) int {
	if errors.Is(err, fs.ErrPermission) {
		return 126
	}
	return 127
}
