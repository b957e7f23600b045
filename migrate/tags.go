package migrate

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// GenerationTag is the tag Push gives a run's generation when the target
// names no tag: "<run>.g<generation>" (docs/design.md "Moving runs", runs
// by generation; generation ≥ 1, a /1 ref is generation 1).
func GenerationTag(run string, generation int) string {
	return run + ".g" + strconv.Itoa(generation)
}

// LatestGenerationTag picks, among tags, the tag GenerationTag(run, n) with
// the highest n: tags of exactly the form "<run>.g<n>", n a decimal ≥ 1
// without leading zeros (so "a.g1.g2" is generation 2 of run "a.g1", never
// of run "a"). ok is false when no tag is of that form.
func LatestGenerationTag(tags []string, run string) (tag string, generation int, ok bool) {
	prefix := run + ".g"
	for _, t := range tags {
		n, found := strings.CutPrefix(t, prefix)
		if !found || n == "" || n[0] == '0' || strings.TrimLeft(n, "0123456789") != "" {
			continue
		}
		g, err := strconv.Atoi(n)
		if err != nil || g < 1 {
			continue
		}
		if !ok || g > generation {
			tag, generation, ok = t, g, true
		}
	}
	return tag, generation, ok
}

// WithRun makes Pull of a bare REG/REPO pull the highest generation of run:
// it lists the repository's tags (Registry.Tags) and pulls the one
// LatestGenerationTag picks (docs/design.md "Moving runs", runs by
// generation). It is ignored when the source names a tag or digest.
func WithRun(run string) Option {
	return func(o *options) { o.run = run }
}

// latestRunRef resolves a bare REG/REPO and a run to REG/REPO:<run>.g<n>,
// the highest generation of run among the repository's tags. No such tag
// wraps errdefs.ErrNotFound naming the repository and the run.
func latestRunRef(ctx context.Context, reg Registry, repo *RemoteRef, run string) (*RemoteRef, error) {
	tags, err := reg.Tags(ctx, repo.Repo)
	if err != nil {
		return nil, fmt.Errorf("list tags of %s: %w", repo.Repo, err)
	}
	tag, _, ok := LatestGenerationTag(tags, run)
	if !ok {
		return nil, fmt.Errorf("repository %s has no tag %s.g<n> of run %s (%d tags listed): %w", repo.Repo, run, run, len(tags), errdefs.ErrNotFound)
	}
	return ParseRemoteRef(repo.Repo+":"+tag, false)
}

// generationOf is the generation a ref records (docs/design.md "Moving
// runs"): a /1 ref reads as generation 1.
func generationOf(r *snapshot.Ref) int {
	if r.Generation < 1 {
		return 1
	}
	return int(r.Generation)
}
