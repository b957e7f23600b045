package runspec_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/runspec"
)

// TestCheckBindSource: a directory passes; a socket, a device, a symlink
// on the way and a missing path are refused, each naming the path.
func TestCheckBindSource(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(work, link); err != nil {
		t.Fatal(err)
	}
	if err := runspec.CheckBindSource(work); err != nil {
		t.Errorf("directory: %v", err)
	}
	for p, want := range map[string]string{
		sock:                          "a socket",
		"/dev/null":                   "a device file",
		link:                          "symlink",
		filepath.Join(link, "x"):      "symlink",
		filepath.Join(dir, "missing"): "no such file",
	} {
		err := runspec.CheckBindSource(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("CheckBindSource(%s) = %v, want %q naming the path", p, err, want)
		}
	}
}

// TestCompareBindSourceHostCheck: with Options.BindSource, a bind mount
// re-pointed at a socket outside the guarded trees (a --spec aiming the
// workspace at a daemon socket) is drift, not an allowed difference.
func TestCompareBindSourceHostCheck(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	spec := func(src string) []byte {
		return []byte(`{"ociVersion": "1.2.0", "mounts": [{"destination": "/workspace", "type": "bind", "source": ` + strconv.Quote(src) + `, "options": ["rbind", "rw"]}]}`)
	}
	opts := runspec.Options{BindSource: runspec.CheckBindSource}
	d, err := runspec.Compare(spec("/home/dev/project"), spec(sock), opts)
	if err != nil || len(d) != 1 || d[0].Allowed || !runspec.Refused(d) {
		t.Errorf("socket source: %+v, %v; want one refused entry", d, err)
	}
	d, err = runspec.Compare(spec("/home/dev/project"), spec(dir), opts)
	if err != nil || len(d) != 1 || !d[0].Allowed {
		t.Errorf("directory source: %+v, %v; want one allowed entry", d, err)
	}
}
