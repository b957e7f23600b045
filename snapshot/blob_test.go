package snapshot

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

func TestReadBlob(t *testing.T) {
	data := []byte(`{"ociVersion":"1.2.0"}`)
	d := Descriptor{MediaType: MediaTypeSpec, Digest: digest.FromBytes(data), Size: int64(len(data))}
	got, err := ReadBlob(bytes.NewReader(data), d)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadBlob = %q, %v", got, err)
	}
	for name, tc := range map[string]struct {
		blob []byte
		edit func(*Descriptor)
		want string
	}{
		"other bytes":  {[]byte(`{"ociVersion":"1.2.1"}`), nil, "have digest"},
		"longer":       {append(append([]byte{}, data...), ' '), nil, "23 bytes, the ref records 22"},
		"shorter":      {data[:10], nil, "10 bytes, the ref records 22"},
		"bad digest":   {data, func(x *Descriptor) { x.Digest = "sha256:zz" }, "sha256:zz"},
		"other digest": {data, func(x *Descriptor) { x.Digest = digest.FromString("x") }, digest.FromString("x").String()},
	} {
		x := d
		if tc.edit != nil {
			tc.edit(&x)
		}
		_, err := ReadBlob(bytes.NewReader(tc.blob), x)
		if !errors.Is(err, ErrBlobCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReadBlob error %v, want ErrBlobCorrupt naming %q", name, err, tc.want)
		}
	}
}
