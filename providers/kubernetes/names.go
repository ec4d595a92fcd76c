package kubernetes

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentctl/agentctl/sandbox"
)

// AnnotationAddress holds a sandbox's configuration address exactly (a
// label value cannot hold brackets and quotes); the address label holds
// a label-safe form of it (labelValue).
const AnnotationAddress = "dev.agentctl.address"

func checkDNSLabel(s string) string     { return first(validation.IsDNS1123Label(s)) }
func checkDNSSubdomain(s string) string { return first(validation.IsDNS1123Subdomain(s)) }
func checkLabelKey(s string) string     { return first(validation.IsQualifiedName(s)) }
func checkLabelValue(s string) string   { return first(validation.IsValidLabelValue(s)) }

func first(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	return "is not valid: " + errs[0]
}

// labelValue returns s when it is a valid label value, else a readable,
// valid form of it made unique by a hash of s: "sandbox.review-pricing-1a2b3c4d".
func labelValue(s string) string {
	if checkLabelValue(s) == "" {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	base := b.String()
	if len(base) > 50 {
		base = base[:50]
	}
	base = strings.Trim(base, "-._")
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:4])
	if base == "" {
		return h
	}
	return base + "-" + h
}

// resourceName returns a name for a Pod, claim or Service of the sandbox
// at address: "agentctl-<address made safe>-<random>", a DNS label.
func resourceName(address string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(address) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := b.String()
	for strings.Contains(base, "--") {
		base = strings.ReplaceAll(base, "--", "-")
	}
	base = strings.Trim(base, "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	if base == "" {
		base = "sandbox"
	}
	return "agentctl-" + base + "-" + randHex(4)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// labels are the labels of everything made for spec (sandbox.Labels with
// label-safe values) and the selector that finds them again.
func labels(spec sandbox.Spec) map[string]string {
	l := sandbox.Labels(spec, nil)
	for k, v := range l {
		l[k] = labelValue(v)
	}
	return l
}

// selector is the label selector of what was made for spec's lineage
// and address (all of the lineage's when the address is empty).
func selector(lineage, address string) string {
	s := sandbox.LabelManaged + "=true"
	if lineage != "" {
		s += "," + sandbox.LabelLineage + "=" + labelValue(lineage)
	}
	if address != "" {
		s += "," + sandbox.LabelAddress + "=" + labelValue(address)
	}
	return s
}
