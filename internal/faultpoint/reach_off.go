//go:build !faultpoint

package faultpoint

// Enabled reports whether this binary was built with the tag faultpoint;
// it was not, so Reach does nothing.
const Enabled = false

// Reach does nothing: this binary was built without the tag faultpoint
// (it does not read Env).
func Reach(string) {}
