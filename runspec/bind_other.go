//go:build !linux

package runspec

// CheckBindSource is the host check of Options.BindSource; without
// openat2 it refuses every path (fail closed).
func CheckBindSource(p string) error {
	return errBindSource(p, "cannot be resolved safely on this platform")
}
