package ledgerlin

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one recorded call: who made it, what it asked and answered, and
// when it was invoked and returned (wall-clock nanoseconds, comparable
// across the processes of one machine).
type Op struct {
	// Client is the recording client's number.
	Client int `json:"client"`
	// Seq numbers the client's calls from 1.
	Seq int `json:"seq"`
	// Input is the call.
	Input Input `json:"input"`
	// Output is its result.
	Output Output `json:"output"`
	// Call is the invocation time (Unix ns).
	Call int64 `json:"call"`
	// Return is the return time (Unix ns); an unknown outcome's Return is
	// unbounded in the check (0 when its client was killed during it).
	Return int64 `json:"return"`
}

// History collects the calls of many clients; safe for concurrent use.
type History struct {
	mu          sync.Mutex
	ops         []Op
	transitions atomic.Int64
	w           io.Writer // when set, every op is also written as a JSON line
}

// NewHistory returns an empty history; when w is not nil, Record also
// writes each op to it as one JSON line (a client process's history file).
func NewHistory(w io.Writer) *History { return &History{w: w} }

// Now is the clock of histories: wall-clock Unix nanoseconds.
func Now() int64 { return time.Now().UnixNano() }

// Invoke notes a call about to be made: written to the history's writer
// (when set) with an unknown outcome, so that a client killed during the
// call leaves its call in the history, and superseded by Record's line.
func (h *History) Invoke(op Op) {
	if h.w == nil {
		return
	}
	op.Output = Output{Unknown: true}
	h.mu.Lock()
	defer h.mu.Unlock()
	b, _ := json.Marshal(op)
	_, _ = h.w.Write(append(b, '\n'))
}

// Record adds a finished call.
func (h *History) Record(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
	if op.Input.Kind != KindGet {
		h.transitions.Add(1)
	}
	if h.w != nil {
		b, _ := json.Marshal(op)
		_, _ = h.w.Write(append(b, '\n'))
	}
}

// Ops returns a copy of the recorded calls.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Transitions returns how many transitions (calls other than Get) were
// recorded.
func (h *History) Transitions() int { return int(h.transitions.Load()) }

// ReadOps reads a history written as JSON lines by Invoke and Record: a
// call's Record line supersedes its Invoke line; a call with only an
// Invoke line (its client was killed during it) has an unknown outcome. A
// last line cut short by the kill is dropped.
func ReadOps(r io.Reader) ([]Op, error) {
	type key struct{ client, seq int }
	var ops []Op
	at := map[key]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	var pending error
	for sc.Scan() {
		line++
		if pending != nil {
			return nil, pending
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			pending = fmt.Errorf("history line %d: %w", line, err)
			continue
		}
		k := key{op.Client, op.Seq}
		if i, ok := at[k]; ok {
			ops[i] = op
			continue
		}
		at[k] = len(ops)
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

// Stats counts a history's calls by outcome.
type Stats struct {
	// Calls counts every call, Gets included.
	Calls int
	// Transitions counts the calls other than Get.
	Transitions int
	// Succeeded, Refused and Unknown split Transitions by outcome.
	Succeeded, Refused, Unknown int
	// Overlapping counts the calls that were in flight while a call of
	// another client was: the concurrency the check had to untangle.
	Overlapping int
}

// Count returns ops' stats.
func Count(ops []Op) Stats {
	var s Stats
	for _, op := range ops {
		s.Calls++
		if op.Input.Kind == KindGet {
			continue
		}
		s.Transitions++
		switch {
		case op.Output.Unknown:
			s.Unknown++
		case op.Output.Class != "":
			s.Refused++
		default:
			s.Succeeded++
		}
	}
	s.Overlapping = overlapping(ops)
	return s
}

// overlapping counts the ops whose [Call, Return] meets another client's
// (as recorded: an unknown outcome's unbounded return is not counted).
func overlapping(ops []Op) int {
	sorted := append([]Op(nil), ops...)
	slices.SortFunc(sorted, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	over := make([]bool, len(sorted))
	for i := range sorted {
		ret := max(sorted[i].Return, sorted[i].Call) // a killed client's last call: no return
		for j := i + 1; j < len(sorted) && sorted[j].Call <= ret; j++ {
			if sorted[j].Client != sorted[i].Client {
				over[i], over[j] = true, true
			}
		}
	}
	n := 0
	for _, o := range over {
		if o {
			n++
		}
	}
	return n
}

// InFlight counts the calls of ops in flight at some moment of [from, to]
// (Now() values): invoked by to, and returned at from or later or never (a
// killed client's last call). A kill test asserts that the kill met at
// least one call, so that the history says something about it.
func InFlight(ops []Op, from, to int64) int {
	n := 0
	for _, op := range ops {
		if op.Call <= to && (op.Return >= from || (op.Output.Unknown && op.Return == 0)) {
			n++
		}
	}
	return n
}

// Check checks ops against Model within timeout. On a result other than
// porcupine.Ok it writes porcupine's visualization of the history into dir
// (when not empty) and returns its path.
func Check(ops []Op, timeout time.Duration, dir string) (porcupine.CheckResult, string, error) {
	hist := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		ret := op.Return
		if op.Output.Unknown {
			ret = math.MaxInt64
		}
		hist[i] = porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: ret}
	}
	model := Model()
	res, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
	if res == porcupine.Ok || dir == "" {
		return res, "", nil
	}
	path := filepath.Join(dir, "ledger-linearizability.html")
	f, err := os.Create(path)
	if err != nil {
		return res, "", err
	}
	defer f.Close()
	if err := porcupine.Visualize(model, info, f); err != nil {
		return res, "", err
	}
	return res, path, nil
}
