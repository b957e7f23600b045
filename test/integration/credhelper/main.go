// Command docker-credential-srtest is a credential helper for the
// integration tests (docker-credential-helpers protocol: the action is the
// first argument, the server URL comes on stdin). "get" answers from
// creds.json beside the executable — {"<server>": {"Username": …,
// "Secret": …}} — and says "credentials not found in native keychain"
// (exit 1) otherwise; every call is appended to calls.log there, so a test
// can see the helper was asked. "store", "erase" and "list" are refused:
// the tests only read.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

func run() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir := filepath.Dir(exe)
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: %s get|store|erase|list", filepath.Base(exe))
	}
	server, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	server = strings.TrimSpace(server)
	if f, err := os.OpenFile(filepath.Join(dir, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintf(f, "%s %s\n", os.Args[1], server)
		f.Close()
	}
	if os.Args[1] != "get" {
		return fmt.Errorf("%s is not supported by this test helper", os.Args[1])
	}
	b, err := os.ReadFile(filepath.Join(dir, "creds.json"))
	if err != nil {
		return err
	}
	var creds map[string]struct{ Username, Secret string }
	if err := json.Unmarshal(b, &creds); err != nil {
		return err
	}
	c, ok := creds[server]
	if !ok {
		return fmt.Errorf("credentials not found in native keychain")
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]string{"ServerURL": server, "Username": c.Username, "Secret": c.Secret})
}
