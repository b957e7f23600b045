package main

import (
	"fmt"
	"io"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// warnUnpinned tells, on stderr, that the generation export or push just
// sent elsewhere is unpinned: resumed on another host it is refused
// (unpinned-cross-host, exit 4), and repin is the way across
// (docs/design.md "Repin and fork"). A ref that does not open says nothing
// here (the command opened it already).
func warnUnpinned(w io.Writer, cmd, path string, refFile []byte) {
	ref, err := snapshot.OpenRefUnsafe(refFile)
	if err != nil || ref.Pinned {
		return
	}
	fmt.Fprintf(w, "%s: warning: %s records an unpinned declaration (%s): it cannot resume on another host (exit 4 there); "+
		"repin it here first: sandbox-resume repin --ref %s --trust T --config pinned.json --key K\n", cmd, path, ref.Manifest, path)
}
