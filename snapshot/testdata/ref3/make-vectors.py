#!/usr/bin/env python3
"""Writes the sandbox.snapshot-ref/3 vectors of this directory (README.md).

Each vector is ../ref2/g1.ref.jcs or ../ref2/g2.ref.jcs with its schema
string changed to /3, the /3 members added, and one thing changed. The JCS
form is json.dumps with sorted keys and no whitespace: every key and string
here is ASCII and every number an integer, where that is RFC 8785. Nothing
here runs the code under test. Run it from this directory; commit what it
writes.
"""
import copy, hashlib, json, os

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(HERE, "..", "ref2", name), "rb") as f:
        return json.loads(f.read())


def jcs(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sha(label):
    return "sha256:" + hashlib.sha256(label.encode()).hexdigest()


RUN_UID = "ruid:" + hashlib.sha256(b"run demo-1").hexdigest()[:32]
OTHER_UID = "ruid:" + hashlib.sha256(b"run source-1").hexdigest()[:32]

g1 = load("g1.ref.jcs")
g1["schema"] = "sandbox.snapshot-ref/3"
g1["runUID"] = RUN_UID

g2 = load("g2.ref.jcs")
g2["schema"] = "sandbox.snapshot-ref/3"
g2["runUID"] = RUN_UID
g2["ancestors"] = [g2["parent"]]

criu = {
    "format": "criu/1",
    "blobs": [{"mediaType": "application/vnd.sandbox-resume.memory.criu.v1.tar", "digest": sha("criu image"), "size": 268435456}],
    "runtime": {"tool": "criu", "version": "4.1.1", "binaryDigest": sha("criu binary")},
    "host": {"kernel": "6.18.44", "cpu": {"vendor": "GenuineIntel", "family": 6, "model": 143, "flags": ["avx2", "fpu", "sse4_2", "xsave"]}},
}
runsc = {
    "format": "runsc/1",
    "blobs": [
        {"mediaType": "application/vnd.sandbox-resume.memory.runsc.v1.tar+zstd", "digest": sha("runsc state"), "size": 1048576},
        {"mediaType": "application/vnd.sandbox-resume.memory.runsc.v1.tar", "digest": sha("runsc pages"), "size": 268435456},
    ],
    "runtime": {"tool": "runsc", "version": "0.0.0-20261201000000-0123456789ab", "binaryDigest": sha("runsc binary"), "platform": "systrap"},
    "host": {"kernel": "6.18.44", "cpu": {"vendor": "AuthenticAMD", "family": 25, "model": 1, "flags": []}},
}
forked = {"run": "source-1", "runUID": OTHER_UID, "generation": 7, "ref": sha("source-1 generation 7")}


def chain(gen, n):
    """A generation-gen copy of g2 with n ancestors ending at its parent."""
    d = copy.deepcopy(g2)
    d["generation"] = gen
    d["ancestors"] = [sha("demo-1 generation %d" % g) for g in range(gen - n, gen)]
    d["parent"] = d["ancestors"][-1]
    return d


def edit(base, f):
    d = copy.deepcopy(base)
    f(d)
    return d


def unpinned_g2(d):
    # generation 2 over g1's unpinned core
    d["generation"] = 2
    d["parent"] = sha("demo-1 generation 1")
    d["fence"] = 3
    d["ancestors"] = [d["parent"]]


vectors = {
    # accepted
    "g1": g1,
    "g2": g2,
    "g4-chain": chain(4, 3),
    "g5-from-v2": chain(5, 1),
    "g4097-cap": chain(4097, 4096),
    "g5000-cap": chain(5000, 4096),
    "memory-criu": edit(g1, lambda d: d.update(memory=criu)),
    "memory-runsc": edit(g2, lambda d: d.update(memory=runsc)),
    "repinned": edit(g2, lambda d: d.update(repinnedFrom=g1["manifest"])),
    "forked": edit(g1, lambda d: d.update(forkedFrom=forked)),
    # refused: runUID
    "no-runuid": edit(g1, lambda d: d.pop("runUID")),
    "runuid-upper": edit(g1, lambda d: d.update(runUID=RUN_UID.upper().replace("RUID", "ruid"))),
    "runuid-short": edit(g1, lambda d: d.update(runUID=RUN_UID[:-2])),
    "runuid-in-v2": edit(load("g1.ref.jcs"), lambda d: d.update(runUID=RUN_UID)),
    # refused: ancestors
    "no-ancestors-on-g2": edit(g2, lambda d: d.pop("ancestors")),
    "ancestors-on-g1": edit(g1, lambda d: d.update(ancestors=[sha("demo-1 generation 0")])),
    "ancestors-empty": edit(g2, lambda d: d.update(ancestors=[])),
    "ancestors-last-not-parent": edit(g2, lambda d: d.update(ancestors=[sha("another ref")])),
    "ancestors-longer-than-chain": edit(chain(3, 2), lambda d: d.update(generation=2)),
    "ancestors-4097": edit(chain(5000, 4096), lambda d: d["ancestors"].insert(0, sha("demo-1 generation 1"))),
    "ancestors-duplicate": edit(chain(4, 3), lambda d: d["ancestors"].__setitem__(1, d["ancestors"][0])),
    "ancestors-bad-digest": edit(chain(3, 2), lambda d: d["ancestors"].__setitem__(0, "sha512:" + "0" * 128)),
    # refused: memory
    "memory-format": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m.update(format="criu/2")))),
    "memory-tool": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m["runtime"].update(tool="runsc")))),
    "memory-blob-media-type": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m["blobs"][0].update(mediaType="application/vnd.sandbox-resume.memory.runsc.v1.tar")))),
    "memory-no-blobs": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m.update(blobs=[])))),
    "memory-runsc-no-platform": edit(g2, lambda d: d.update(memory=edit(runsc, lambda m: m["runtime"].pop("platform")))),
    "memory-criu-platform": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m["runtime"].update(platform="systrap")))),
    "memory-flags-unsorted": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m["host"]["cpu"].update(flags=["fpu", "avx2"])))),
    "memory-unknown-member": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m.update(pages=1)))),
    "memory-empty-kernel": edit(g1, lambda d: d.update(memory=edit(criu, lambda m: m["host"].update(kernel="")))),
    # refused: repinnedFrom
    "repinned-on-g1": edit(g1, lambda d: d.update(repinnedFrom=load("g2.ref.jcs")["manifest"])),
    "repinned-unpinned": edit(edit(g1, unpinned_g2), lambda d: d.update(repinnedFrom=g2["manifest"])),
    "repinned-own-manifest": edit(g2, lambda d: d.update(repinnedFrom=g2["manifest"])),
    "repinned-not-address": edit(g2, lambda d: d.update(repinnedFrom="sha256:" + "0" * 64)),
    # refused: forkedFrom
    "forked-on-g2": edit(g2, lambda d: d.update(forkedFrom=forked)),
    "forked-own-uid": edit(g1, lambda d: d.update(forkedFrom=edit(forked, lambda f: f.update(runUID=RUN_UID)))),
    "forked-bad-run": edit(g1, lambda d: d.update(forkedFrom=edit(forked, lambda f: f.update(run="Source")))),
    "forked-generation-0": edit(g1, lambda d: d.update(forkedFrom=edit(forked, lambda f: f.update(generation=0)))),
    "forked-unknown-member": edit(g1, lambda d: d.update(forkedFrom=edit(forked, lambda f: f.update(host="x")))),
}

for name, doc in vectors.items():
    with open(os.path.join(HERE, name + ".ref.jcs"), "wb") as f:
        f.write(jcs(doc))
for name in ("g1", "g2"):
    with open(os.path.join(HERE, name + ".core.jcs"), "wb") as f:
        f.write(jcs(vectors[name]["core"]))
