package host_test

import (
	"reflect"
	"testing"

	"github.com/sandbox-resume/sandbox-resume/host"
)

// TestOneNamePerMethod: no method is declared in two roles, and Host is
// exactly the roles' methods.
func TestOneNamePerMethod(t *testing.T) {
	roles := map[string]reflect.Type{
		"Info":       reflect.TypeFor[host.Info](),
		"Images":     reflect.TypeFor[host.Images](),
		"Content":    reflect.TypeFor[host.Content](),
		"Leases":     reflect.TypeFor[host.Leases](),
		"Containers": reflect.TypeFor[host.Containers](),
		"Tasks":      reflect.TypeFor[host.Tasks](),
		"Differ":     reflect.TypeFor[host.Differ](),
		"Archiver":   reflect.TypeFor[host.Archiver](),
	}
	owner := map[string]string{}
	for role, typ := range roles {
		for i := range typ.NumMethod() {
			m := typ.Method(i).Name
			if other, ok := owner[m]; ok {
				t.Errorf("%s is declared in %s and in %s", m, other, role)
			}
			owner[m] = role
		}
	}
	if n := reflect.TypeFor[host.Host]().NumMethod(); n != len(owner) {
		t.Errorf("host.Host has %d methods, the roles %d", n, len(owner))
	}
}
