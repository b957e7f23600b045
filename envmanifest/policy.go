package envmanifest

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
)

// ReservedEnv documents one name of the default reserved-environment policy
// and why configuration may not set it.
type ReservedEnv struct {
	Name   string // upper case; matched in any letter case
	Reason string
}

// defaultReserved is the default reserved-environment policy (seed 003,
// "reserved — refused from harness override"): names that let a declaration
// inject code into every process, redirect its network, or replace its trust
// roots. PATH is not reserved: the address covers it, so a changed PATH is a
// different environment, not a hidden one.
var defaultReserved = []ReservedEnv{
	// Dynamic loader (glibc ld.so(8), musl): load or audit code in every dynamically linked process.
	{"LD_PRELOAD", "dynamic loader: loads a shared object into every process"},
	{"LD_LIBRARY_PATH", "dynamic loader: substitutes the libraries every process links"},
	{"LD_AUDIT", "dynamic loader: loads an auditing shared object into every process"},
	{"LD_DEBUG_OUTPUT", "dynamic loader: writes loader output to a chosen file"},
	{"LD_PROFILE", "dynamic loader: profiles a library and writes to a chosen place"},
	{"GCONV_PATH", "glibc iconv: loads conversion modules from a chosen directory"},
	{"GLIBC_TUNABLES", "glibc: changes allocator and loader behaviour (CVE-2023-4911)"},
	{"MALLOC_CHECK_", "glibc: changes allocator behaviour of every process"},
	// Proxies: redirect every client's network traffic.
	{"HTTP_PROXY", "proxy: redirects HTTP traffic"},
	{"HTTPS_PROXY", "proxy: redirects HTTPS traffic"},
	{"FTP_PROXY", "proxy: redirects FTP traffic"},
	{"ALL_PROXY", "proxy: redirects all proxied traffic"},
	{"NO_PROXY", "proxy: exempts hosts from the enforced proxy"},
	// Trust roots: replace the certificates TLS clients trust.
	{"SSL_CERT_FILE", "TLS: replaces the trusted CA bundle (OpenSSL, Go)"},
	{"SSL_CERT_DIR", "TLS: replaces the trusted CA directory (OpenSSL, Go)"},
	{"CURL_CA_BUNDLE", "TLS: replaces curl's trusted CA bundle"},
	{"REQUESTS_CA_BUNDLE", "TLS: replaces Python requests' trusted CA bundle"},
	{"NODE_EXTRA_CA_CERTS", "TLS: adds CAs Node.js trusts"},
	{"GIT_SSL_NO_VERIFY", "TLS: turns off git's certificate checks"},
	{"NODE_TLS_REJECT_UNAUTHORIZED", "TLS: turns off Node.js certificate checks"},
	// Interpreter and runtime injection: run code at every interpreter start.
	{"NODE_OPTIONS", "Node.js: --require/--import code into every node process"},
	{"PYTHONSTARTUP", "Python: runs a file in every interactive interpreter"},
	{"PYTHONPATH", "Python: shadows modules imported by every interpreter"},
	{"PYTHONHOME", "Python: replaces the standard library"},
	{"PYTHONINSPECT", "Python: drops into an interactive interpreter after scripts"},
	{"PERL5OPT", "Perl: -M/-I options for every perl process"},
	{"PERL5LIB", "Perl: shadows modules loaded by every perl process"},
	{"PERLLIB", "Perl: shadows modules loaded by every perl process"},
	{"RUBYOPT", "Ruby: -r options for every ruby process"},
	{"RUBYLIB", "Ruby: shadows libraries loaded by every ruby process"},
	{"JAVA_TOOL_OPTIONS", "JVM: -javaagent and options for every JVM"},
	{"_JAVA_OPTIONS", "JVM: options for every JVM (HotSpot)"},
	{"JDK_JAVA_OPTIONS", "JVM: options for every java launcher"},
	{"DOTNET_STARTUP_HOOKS", ".NET: loads assemblies into every .NET process"},
	{"CORECLR_ENABLE_PROFILING", ".NET: enables a profiler DLL in every process"},
	{"CORECLR_PROFILER_PATH", ".NET: the profiler DLL loaded into every process"},
	// Shells: run code at every non-interactive start or prompt.
	{"BASH_ENV", "bash: sources a file in every non-interactive shell"},
	{"ENV", "sh: sources a file in every interactive POSIX shell"},
	{"PROMPT_COMMAND", "bash: runs a command before every prompt"},
	{"SHELLOPTS", "bash: sets shell options (xtrace with PS4 command substitution)"},
	{"BASHOPTS", "bash: sets shell options of every bash"},
	{"PS4", "bash: expanded (with command substitution) on every xtrace line"},
	{"IFS", "shells: changes word splitting of every script"},
	// Tools that run configured commands.
	{"GIT_SSH_COMMAND", "git: runs a command for every SSH transport"},
	{"GIT_EXEC_PATH", "git: replaces git's subcommand programs"},
	{"GIT_CONFIG_GLOBAL", "git: replaces the global configuration (hooks, helpers)"},
	{"GIT_CONFIG_PARAMETERS", "git: injects configuration (core.sshCommand, hooks)"},
}

// DefaultReservedEnv returns the default reserved-environment policy with the
// reason for each name, sorted by name.
func DefaultReservedEnv() []ReservedEnv {
	out := slices.Clone(defaultReserved)
	slices.SortFunc(out, func(a, b ReservedEnv) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PolicyNone turns the reserved-environment policy off (`--policy none`).
const PolicyNone = "none"

// envNameRE is compiled on first use, not at process start (every command
// of the CLI links this package; few read a policy file).
var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// LoadPolicy returns the effective reserved-environment list for a --policy
// value, upper-cased, sorted and without duplicates:
//   - "" → the default list (DefaultReservedEnv);
//   - "none" → an empty list;
//   - any other value is a file that extends the default list: one name per
//     line, blank lines and lines starting with '#' ignored.
//
// A file that cannot be read, or a line that is not an environment name
// ([A-Za-z_][A-Za-z0-9_]*), is an error naming the file and line.
func LoadPolicy(spec string) ([]string, error) {
	switch spec {
	case PolicyNone:
		return []string{}, nil
	case "":
		return normalizePolicy(nil), nil
	}
	data, err := inputfile.Read(spec, inputfile.MaxText)
	if err != nil {
		return nil, fmt.Errorf("reserved-environment policy: %w", err)
	}
	var extra []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		name := strings.TrimSpace(sc.Text())
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		if !envNameRE().MatchString(name) {
			return nil, fmt.Errorf("reserved-environment policy %s:%d: %q is not an environment variable name", spec, line, name)
		}
		extra = append(extra, name)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reserved-environment policy %s: %w", spec, err)
	}
	return normalizePolicy(extra), nil
}

func normalizePolicy(extra []string) []string {
	out := make([]string, 0, len(defaultReserved)+len(extra))
	for _, r := range defaultReserved {
		out = append(out, r.Name)
	}
	for _, n := range extra {
		out = append(out, strings.ToUpper(n))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
