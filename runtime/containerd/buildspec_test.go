package containerd

import (
	"archive/tar"
	"bytes"
	"testing"
)

func layerTar(t *testing.T, entries ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		hdr := &tar.Header{Name: e[0], Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e[1]))}
		if e[1] == "/" {
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeDir, 0, 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			tw.Write([]byte(e[1]))
		}
	}
	tw.Close()
	return b.Bytes()
}

// TestScanTar: /etc/passwd and /etc/group as a stack of layers leaves
// them, newest first, with whiteouts and opaque directories.
func TestScanTar(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layers [][]byte // oldest first
		want   map[string]string
	}{
		{"base only", [][]byte{layerTar(t, [2]string{"etc/", "/"}, [2]string{"etc/passwd", "root:x:0:0"}, [2]string{"./etc/group", "root:x:0:"})},
			map[string]string{"etc/passwd": "root:x:0:0", "etc/group": "root:x:0:"}},
		{"newer wins", [][]byte{layerTar(t, [2]string{"etc/passwd", "old"}, [2]string{"etc/group", "g"}), layerTar(t, [2]string{"etc/passwd", "new"})},
			map[string]string{"etc/passwd": "new", "etc/group": "g"}},
		{"whiteout", [][]byte{layerTar(t, [2]string{"etc/passwd", "old"}, [2]string{"etc/group", "g"}), layerTar(t, [2]string{"etc/.wh.passwd", ""})},
			map[string]string{"etc/group": "g"}},
		{"opaque etc", [][]byte{layerTar(t, [2]string{"etc/passwd", "old"}, [2]string{"etc/group", "g"}), layerTar(t, [2]string{"etc/.wh..wh..opq", ""}, [2]string{"etc/group", "g2"})},
			map[string]string{"etc/group": "g2"}},
		{"etc whited out", [][]byte{layerTar(t, [2]string{"etc/passwd", "old"}), layerTar(t, [2]string{".wh.etc", ""})},
			map[string]string{}},
		{"none", [][]byte{layerTar(t, [2]string{"bin/sh", "x"})}, map[string]string{}},
	} {
		out, settled := map[string][]byte{}, map[string]bool{}
		for i := len(tc.layers) - 1; i >= 0; i-- {
			if err := scanTar(bytes.NewReader(tc.layers[i]), userFiles, settled, out); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if len(out) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, out, tc.want)
		}
		for k, v := range tc.want {
			if string(out[k]) != v {
				t.Errorf("%s: %s = %q, want %q", tc.name, k, out[k], v)
			}
		}
	}
}
