package views

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestConsoleValue(t *testing.T) {
	for _, tc := range []struct {
		val  cty.Value
		want string
	}{
		{cty.StringVal("a\x1b[31mb"), `"a\x1b[31mb"`},
		{cty.NumberFloatVal(1.5), "1.5"},
		{cty.True, "true"},
		{cty.NullVal(cty.String), "null"},
		{cty.DynamicVal, "(known after apply)"},
		{cty.StringVal("s").Mark("sensitive"), "(sensitive value)"},
		{cty.ListValEmpty(cty.String), "[]"},
		{cty.EmptyObjectVal, "{}"},
		{cty.TupleVal([]cty.Value{cty.StringVal("x"), cty.UnknownVal(cty.String)}), "[\n  \"x\",\n  (known after apply),\n]"},
		{cty.ObjectVal(map[string]cty.Value{
			"a":    cty.ObjectVal(map[string]cty.Value{"text": cty.StringVal("one\ntwo")}),
			"long": cty.StringVal("k").Mark("sensitive"),
		}), "{\n  \"a\"    = {\n    \"text\" = <<-EOT\n    one\n    two\n    EOT\n  }\n  \"long\" = (sensitive value)\n}"},
	} {
		if got := ConsoleValue(tc.val); got != tc.want {
			t.Errorf("ConsoleValue(%#v) =\n%s\nwant\n%s", tc.val, got, tc.want)
		}
	}
}
