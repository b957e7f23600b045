package runspec_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"

	"github.com/sandbox-resume/sandbox-resume/runspec"
	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

const describedSpec = `{"ociVersion":"1.2.0","process":{"args":["/bin/sh","-c","sleep 1"],"cwd":"/work",` +
	`"env":["PATH=/usr/bin:/bin","TOKEN=s3cret"],"user":{"uid":1000,"gid":1000,"additionalGids":[10]},` +
	`"capabilities":{"bounding":["CAP_CHOWN","CAP_KILL"],"effective":["CAP_KILL"]}},"root":{"path":"rootfs","readonly":true},` +
	`"hostname":"box-1","mounts":[{"destination":"/proc","type":"proc","source":"proc"}],` +
	`"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/x"}]}}`

func TestDescribe(t *testing.T) {
	d, err := runspec.Describe([]byte(describedSpec), false)
	if err != nil {
		t.Fatal(err)
	}
	p := d.Process
	switch {
	case !slices.Equal(p.Args, []string{"/bin/sh", "-c", "sleep 1"}) || p.Cwd != "/work" || p.User.UID != 1000 || !slices.Equal(p.User.AdditionalGids, []uint32{10}):
		t.Errorf("process %+v", p)
	case !slices.Equal(p.Env, []string{"PATH", "TOKEN"}) || p.EnvValues != nil:
		t.Errorf("env %v values %v", p.Env, p.EnvValues)
	case len(d.Mounts) != 1 || d.Mounts[0].Destination != "/proc" || len(d.Namespaces) != 2 || d.Namespaces[1].Path != "/var/run/netns/x":
		t.Errorf("mounts %v namespaces %v", d.Mounts, d.Namespaces)
	case d.Capabilities == nil || !slices.Equal(d.Capabilities.Bounding, []string{"CAP_CHOWN", "CAP_KILL"}) || d.Hostname != "box-1" || !d.Root.Readonly:
		t.Errorf("capabilities %v hostname %q root %v", d.Capabilities, d.Hostname, d.Root)
	}
	js, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "s3cret") {
		t.Errorf("an env value is in the description without showEnv: %s", js)
	}
	shown, err := runspec.Describe([]byte(describedSpec), true)
	if err != nil || !slices.Equal(shown.Process.EnvValues, []string{"PATH=/usr/bin:/bin", "TOKEN=s3cret"}) || shown.Spec.Process.Env[1] != "TOKEN=s3cret" {
		t.Errorf("showEnv: %+v (%v)", shown.Process, err)
	}
	if _, err := runspec.Describe([]byte(`{"ociVersion": 1}`), false); err == nil {
		t.Errorf("a spec that does not validate was described")
	}
}

func TestDescribeRuntime(t *testing.T) {
	if runspec.DescribeRuntime(nil) != nil {
		t.Error("nil runtime")
	}
	d := runspec.DescribeRuntime(runtimeWith(t, runspec.RuncOptionsType, &runcoptions.Options{SystemdCgroup: true, BinaryName: "/opt/runc"}))
	if d.Undecoded != "" || d.Options["systemdCgroup"] != true || d.Options["binaryName"] != "/opt/runc" {
		t.Errorf("runc options %+v", d)
	}
	d = runspec.DescribeRuntime(&snapshot.Runtime{Name: "x", Options: &snapshot.RuntimeOptions{TypeURL: "other.v1.Options", Value: []byte{1, 2}}})
	if !strings.Contains(d.Undecoded, "does not know") {
		t.Errorf("an unknown type %+v", d)
	}
}
