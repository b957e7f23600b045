package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/sandbox-resume/sandbox-resume/envelope"
	"github.com/sandbox-resume/sandbox-resume/internal/testenv"
	"github.com/sandbox-resume/sandbox-resume/internal/testimage"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
	"github.com/sandbox-resume/sandbox-resume/test/integration/harness"
)

// userWorkload keeps running as any user (it writes nothing).
const userWorkload = `echo READY && exec sleep 3600`

// TestSuspendRemoteUser is issue 28's remoteUser item against a real
// daemon (docs/design.md "Hardening"), over a busybox image whose
// /etc/passwd names root (uid 0) and nobody (uid 65534): a container whose
// runtime spec runs as uid 1000 is not described by a declaration with
// `remoteUser: root` (the name resolved through the container's
// /etc/passwd, read through its snapshot): suspend exits 3 naming both,
// and the container is as it was (task running, no suspending or run
// label, no ref file). On the test busybox without /etc/passwd the name
// cannot be resolved: 3 too (fail closed). One running as uid 65534 with
// `remoteUser: nobody` suspends.
func TestSuspendRemoteUser(t *testing.T) {
	d := harness.Start(t, "remoteuser")
	plain := harness.ImportBusybox(t, d, "busybox:1")
	files := []testimage.File{{Name: "bin/busybox", Mode: 0o755, Data: blobOf(t, testimage.BusyboxPath)}}
	for _, a := range testimage.BusyboxApplets {
		files = append(files, testimage.File{Name: "bin/" + a, Link: "busybox"})
	}
	files = append(files, testimage.File{Name: "etc/passwd", Mode: 0o644,
		Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")})
	im, err := testimage.Build(testimage.HostPlatform(), files)
	if err != nil {
		t.Fatal(err)
	}
	d.Put(t, "", im)
	const users = "docker.io/library/busybox-users:1"
	d.Tag(t, "", users, im.Index)
	rt := d.Connect(t, "")
	for _, tc := range []struct {
		name, image, user string
		uid               uint32
		code              int
		names             []string // what the refusal names
	}{
		{"root-against-1000", users, "root", 1000, 3, []string{`"root"`, "uid 0", "uid is 1000"}},
		{"no-passwd", plain.Name, "root", 0, 3, []string{`"root"`, "no /etc/passwd"}},
		{"nobody", users, "nobody", 65534, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cid := scriptContainerWith(t, d, tc.image, "ru-"+tc.name, userWorkload, oci.WithUserID(tc.uid))
			dir := t.TempDir()
			cfg := filepath.Join(dir, "devcontainer.json")
			if err := os.WriteFile(cfg, []byte(`{"image": "`+tc.image+`", "remoteUser": "`+tc.user+`"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			_, key, err := envelope.WriteKeyPair(filepath.Join(dir, "signer"), false)
			if err != nil {
				t.Fatal(err)
			}
			refPath := filepath.Join(dir, "ref.json")
			code, stdout, stderr := srcli(t, d, "", "suspend", "--container", cid, "--config", cfg, "--key", key, "--run", "ru-"+tc.name, "--out", refPath)
			if code != tc.code {
				t.Fatalf("suspend exit %d, want %d\n%s\n%s", code, tc.code, stdout, stderr)
			}
			if tc.code == 0 {
				if _, err := os.Stat(refPath); err != nil {
					t.Fatalf("suspend exit 0 but no ref file: %v", err)
				}
				return
			}
			var e errorOutput
			if err := json.Unmarshal(stdout, &e); err != nil || e.Error.Class != "manifest-mismatch" {
				t.Fatalf("suspend: not a manifest-mismatch error (%v):\n%s\n%s", err, stdout, stderr)
			}
			for _, w := range tc.names {
				if !strings.Contains(e.Error.Message, w) {
					t.Errorf("suspend's error does not name %s: %s", w, e.Error.Message)
				}
			}
			c, err := rt.Container(d.Context(t), cid)
			if err != nil {
				t.Fatal(err)
			}
			if c.Task != snapshot.TaskRunning || c.Labels[snapshot.LabelSuspending] != "" || c.Labels[snapshot.LabelRun] != "" {
				t.Errorf("after the refusal: task %q, labels %v", c.Task, c.Labels)
			}
			if _, err := os.Stat(refPath); !os.IsNotExist(err) {
				t.Errorf("a ref file after the refusal: %v", err)
			}
		})
	}
}

// blobOf reads a host file the test image needs, skipping (through
// testenv) when it is missing.
func blobOf(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		testenv.Missing(t, "%s (install busybox-static): %v", p, err)
	}
	return b
}
