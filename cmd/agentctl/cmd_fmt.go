package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/config"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/rogpeppe/go-internal/diff"
)

func fmtCommand() *command {
	return &command{
		Name:       "fmt",
		ShortUsage: "agentctl fmt [options] [PATH...]",
		ShortHelp:  "Rewrite configuration files in the canonical format.",
		LongHelp: "  Formats *.hcl files (the current directory by default; - reads standard\n" +
			"  input) with hclwrite, keeping comments. Lists the files it changed.\n" +
			"  With -check nothing is written and the exit status is 3 when any file\n" +
			"  needs formatting, 0 otherwise.",
		Run: leaf(arguments.ParseFmt, (*meta).format),
	}
}

func (m *meta) format(_ context.Context, args *arguments.Fmt) error {
	m.noColor = args.NoColor
	v := views.NewFmt(m.view())
	var diags hcl.Diagnostics
	files := map[string]*hcl.File{}
	changed := false
	for _, p := range args.Paths {
		if p == "-" {
			src, err := io.ReadAll(io.LimitReader(os.Stdin, config.MaxFileBytes+1))
			if err != nil {
				return fmt.Errorf("reading standard input: %w", err)
			}
			if len(src) > config.MaxFileBytes {
				return fmt.Errorf("standard input holds more than the %d MiB agentctl formats", config.MaxFileBytes>>20)
			}
			out, ds := formatSource(src, "<stdin>", files)
			diags = append(diags, ds...)
			if ds.HasErrors() {
				continue
			}
			if !bytes.Equal(src, out) {
				changed = true
			}
			switch {
			case args.Diff:
				v.Diff(diff.Diff("<stdin>", src, "<stdin>", out))
			case !args.Check:
				v.Formatted(out)
			}
			continue
		}
		names, err := fmtFiles(p, args.Recursive)
		if err != nil {
			return err
		}
		for _, name := range names {
			src, err := config.ReadSourceFile(name)
			if err != nil {
				return err
			}
			out, ds := formatSource(src, name, files)
			diags = append(diags, ds...)
			if ds.HasErrors() || bytes.Equal(src, out) {
				continue
			}
			changed = true
			if args.List {
				v.File(name)
			}
			if args.Diff {
				v.Diff(diff.Diff("old/"+filepath.ToSlash(name), src, "new/"+filepath.ToSlash(name), out))
			}
			if args.Write {
				info, err := os.Stat(name)
				if err != nil {
					return err
				}
				if err := os.WriteFile(name, out, info.Mode().Perm()); err != nil {
					return fmt.Errorf("writing %s: %w", name, err)
				}
			}
		}
	}
	if diags.HasErrors() {
		v.Diagnostics(config.CapDiagnostics(diags), files)
		return exitCode(exitError)
	}
	if args.Check && changed {
		return exitCode(exitFmtCheck)
	}
	return nil
}

// formatSource checks the syntax and formats src with hclwrite.
func formatSource(src []byte, name string, files map[string]*hcl.File) ([]byte, hcl.Diagnostics) {
	f, diags := config.ParseSource(src, name)
	if f != nil {
		files[name] = f
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return hclwrite.Format(src), nil
}

// fmtFiles lists the .hcl files at p: p itself when it is a file, the
// directory's .hcl files otherwise (recursively with -recursive, skipping
// hidden directories such as .agentctl).
func fmtFiles(p string, recursive bool) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("no file or directory at %s", p)
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != p && (!recursive || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".hcl") {
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
