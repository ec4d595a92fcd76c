package registry

import (
	"fmt"
	"time"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
)

// Helpers for decoders: each decodes one attribute with gohcl and reports
// problems at the attribute's value.

// Attr decodes attrs[name] into target when present and reports whether
// it was.
func Attr(attrs hcl.Attributes, name string, target any, diags *hcl.Diagnostics) bool {
	a, ok := attrs[name]
	if !ok {
		return false
	}
	ds := gohcl.DecodeExpression(a.Expr, nil, target)
	*diags = append(*diags, ds...)
	return !ds.HasErrors()
}

// Duration decodes attrs[name], a duration string like "90s", when
// present; negative durations are refused.
func Duration(attrs hcl.Attributes, name string, diags *hcl.Diagnostics) (time.Duration, bool) {
	var s string
	if !Attr(attrs, name, &s, diags) || s == "" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		*diags = append(*diags, Errorf(attrs[name].Expr.Range(), "Invalid duration",
			"%s must be a duration like \"30s\", \"2m\" or \"1h30m\"; %q is not one.", name, s))
		return 0, false
	}
	return d, true
}

// Errorf is an error diagnostic at rng.
func Errorf(rng hcl.Range, summary, detail string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: rng.Ptr()}
}

// Suggest returns a " Did you mean ...?" sentence naming the candidate
// closest to given, or "" when none is close.
func Suggest(given string, candidates []string) string {
	best, bestDist := "", 1000
	for _, c := range candidates {
		d := levenshtein.Distance(given, c, nil)
		if d < 3 && d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

// Unenforced reports each resources argument the sandbox sets (more than
// 0) that the provider type cannot enforce, at the argument, with the
// type's reason from why (resource name → reason).
func Unenforced(args *SandboxArgs, why map[string]string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, name := range []string{"cpus", "memory", "disk", "pids", "gpus"} {
		if rng, ok := args.ResourceRanges[name]; ok && why[name] != "" {
			diags = append(diags, Errorf(rng, "Unsupported resource for this provider", "%s", why[name]))
		}
	}
	return diags
}
