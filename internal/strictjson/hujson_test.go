package strictjson

import (
	"errors"
	"testing"

	"github.com/tailscale/hujson"
)

// TestHujsonErrorText pins the text of tailscale/hujson's Parse errors,
// which hujsonError reads (hujson exports no position): an upgrade that
// changes the shape fails here, not silently in the line:column of every
// JSONC syntax refusal.
func TestHujsonErrorText(t *testing.T) {
	tests := []struct {
		in       string
		upstream string // err.Error() as hujson writes it
		line     int
		column   int
		msg      string
	}{
		{"{\"a\" 1}\n", "hujson: line 1, column 6: invalid character '1' after object name", 1, 6, "invalid character '1' after object name"},
		{"{\n \"a\": tru\n}\n", "hujson: line 2, column 7: invalid literal: tru", 2, 7, "invalid literal: tru"},
		{"{/* x\n", "hujson: line 1, column 2: parsing comment: unexpected EOF", 1, 2, "parsing comment: unexpected EOF"},
	}
	for _, tt := range tests {
		_, err := hujson.Parse([]byte(tt.in))
		if err == nil {
			t.Fatalf("hujson.Parse(%q) succeeded", tt.in)
		}
		if err.Error() != tt.upstream {
			t.Errorf("hujson.Parse(%q) = %q, want %q (the upstream format changed: update hujsonError)", tt.in, err.Error(), tt.upstream)
		}
		l, c, msg := hujsonError(err)
		if l != tt.line || c != tt.column || msg != tt.msg {
			t.Errorf("hujsonError(%q) = %d, %d, %q; want %d, %d, %q", err.Error(), l, c, msg, tt.line, tt.column, tt.msg)
		}
	}
	// Text of another shape is kept whole, without a place.
	if l, c, msg := hujsonError(errors.New("something else")); l != 0 || c != 0 || msg != "something else" {
		t.Errorf("hujsonError(other) = %d, %d, %q", l, c, msg)
	}
}

// TestErrorText checks how an *Error reads with and without a place.
func TestErrorText(t *testing.T) {
	_, errs := Decode([]byte("{\n  \"a\": tru\n}"), true)
	if len(errs) != 1 || errs[0].Kind != Syntax || errs[0].Line != 2 || errs[0].Pointer != "" {
		t.Fatalf("Decode = %+v, want one Syntax error on line 2", errs)
	}
	if got := errs[0].Text(); got != "2:8: invalid literal: tru" {
		t.Errorf("Text() = %q", got)
	}
	if errs[0].Error() != errs[0].Text() {
		t.Errorf("Error() = %q, want the placed text %q", errs[0].Error(), errs[0].Text())
	}
	_, errs = Decode([]byte(`{"a":1,"a":2}`), false)
	if len(errs) != 1 || errs[0].Kind != DuplicateKey || errs[0].Line != 0 {
		t.Fatalf("Decode = %+v, want one DuplicateKey without a place", errs)
	}
	if got, want := errs[0].Error(), `/a: member "a" appears 2 times`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := errs[0].Text(), `member "a" appears 2 times`; got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
}

// TestPointer checks RFC 6901 §3 escaping.
func TestPointer(t *testing.T) {
	for _, tt := range []struct{ parent, token, want string }{
		{"", "a", "/a"},
		{"/x", "a/b", "/x/a~1b"},
		{"", "~1", "/~01"},
		{"", "", "/"},
	} {
		if got := Pointer(tt.parent, tt.token); got != tt.want {
			t.Errorf("Pointer(%q, %q) = %q, want %q", tt.parent, tt.token, got, tt.want)
		}
	}
}
