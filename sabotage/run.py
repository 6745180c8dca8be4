#!/usr/bin/python3
"""Sabotage: prove the tests bite.

Each sabotage/<area>-<mutation>.mutation file names one mutation of the source
(an exact text that must occur exactly once in one file, and its replacement),
the test that must catch it, and a group. For each selected mutation this
script

  1. copies the working tree (the files git tracks or would track) to
     BUILD/tree -- the working tree itself is never changed;
  2. builds the named test there (out of tree, BUILD/build, warnings not
     fatal; -O2 as the project's default build, without its debug
     information: src/server/server.cpp compiles in 3.4 s instead of 5.4,
     and `make test` took 26 minutes instead of 32) and runs it unmutated:
     the baseline must pass;
  3. applies the mutation to the copy (failing if the text does not occur
     exactly once: a mutation that no longer applies is itself a failure);
  4. rebuilds and runs the test, which must now FAIL;
  5. restores the copy's file.

It prints one line per mutation, CAUGHT or MISSED, with the test that caught
it, and exits non-zero unless every mutation was caught.

    sabotage/run.py --build build/sabotage --group pool
    sabotage/run.py --build build/sabotage --all
    sabotage/run.py --build build/sabotage --only pool-revert-send
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Property tests run this many cases under sabotage (and in the baseline).
PROPERTY_CASES = os.environ.get("SABOTAGE_PROPERTY_CASES", "300")


class Mutation:
    def __init__(self, path):
        self.name = path.stem
        self.fields = {}
        text = path.read_text()
        head, _, rest = text.partition("<<<<<<< find\n")
        find, sep, rest = rest.partition("=======\n")
        replace, sep2, _ = rest.partition(">>>>>>> replace")
        if not sep or not sep2:
            raise SystemExit(f"sabotage: {path.name}: needs <<<<<<< find / ======= / >>>>>>> replace")
        for line in head.splitlines():
            if ":" in line and not line.startswith("#"):
                k, _, v = line.partition(":")
                self.fields[k.strip()] = v.strip()
        for k in ("group", "test", "file", "what"):
            if k not in self.fields:
                raise SystemExit(f"sabotage: {path.name}: missing '{k}:'")
        self.find, self.replace = find, replace

    def __getattr__(self, k):
        try:
            return self.__dict__["fields"][k]
        except KeyError:
            raise AttributeError(k) from None


def sh(cmd, log, **kw):
    with open(log, "ab") as f:
        f.write(("\n$ " + " ".join(map(str, cmd)) + "\n").encode())
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw).returncode


def copy_tree(dest):
    """Syncs the working tree into `dest`. A file whose bytes differ is written
    anew (a fresh mtime, so the build recompiles it); identical files are left
    alone, so a rerun rebuilds only what changed -- including what an
    interrupted run left mutated."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    wanted = set()
    for rel in files:
        if not rel:
            continue
        src = ROOT / os.fsdecode(rel)
        if not src.is_file():
            continue  # deleted in the working tree
        wanted.add(os.fsdecode(rel))
        dst = dest / os.fsdecode(rel)
        data = src.read_bytes()
        if dst.is_file() and dst.read_bytes() == data:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)
        shutil.copymode(src, dst)
    if dest.exists():
        for path in dest.rglob("*"):
            if path.is_file() and str(path.relative_to(dest)) not in wanted:
                path.unlink()


def run_test(build, test, log):
    env = dict(os.environ, RC_PARAMS=f"max_success={PROPERTY_CASES}")
    return sh([str(build / test)], log, env=env, timeout=300)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build" / "sabotage"))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--all", action="store_true")
    g.add_argument("--group")
    g.add_argument("--only", action="append")
    ap.add_argument("--jobs", default=str(os.cpu_count() or 2))
    args = ap.parse_args()

    muts = [Mutation(p) for p in sorted((ROOT / "sabotage").glob("*.mutation"))]
    if args.group:
        muts = [m for m in muts if m.group == args.group]
    if args.only:
        muts = [m for m in muts if m.name in args.only]
    if not muts:
        raise SystemExit("sabotage: no mutation selected")

    base = pathlib.Path(args.build).resolve()
    tree, build = base / "tree", base / "build"
    base.mkdir(parents=True, exist_ok=True)
    log = base / "sabotage.log"
    log.write_text("")
    # An interrupted run may have left a mutated file compiled into the build:
    # its marker names the file, which is then rewritten (and so recompiled).
    marker = base / "mutated"
    if marker.exists():
        stale = tree / marker.read_text().strip()
        if stale.exists():
            stale.unlink()
        marker.unlink()
    copy_tree(tree)
    if sh(["cmake", "-S", tree, "-B", build, "-DM0_WERROR=OFF", "-DCMAKE_BUILD_TYPE=Release",
           "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"], log):
        print(f"sabotage: cmake failed (log: {log})")
        return 2

    # The baseline: every named test builds and passes unmutated.
    tests = sorted({m.test for m in muts})
    if sh(["cmake", "--build", build, "-j", args.jobs, "--target", *tests], log):
        print(f"sabotage: the baseline does not build (log: {log})")
        return 2
    for t in tests:
        if run_test(build, t, log) != 0:
            print(f"sabotage: baseline FAILED: {t} fails without any mutation (log: {log})")
            print(f"reproduce: {build}/{t}")
            return 2
    print(f"sabotage: baseline green: {', '.join(tests)}")

    failures = 0
    failed = set()
    for m in muts:
        target = tree / m.file
        original = target.read_text()
        count = original.count(m.find)
        if count != 1:
            print(f"STALE  {m.name}: its text occurs {count} times in {m.file}, not once; update the mutation")
            failures += 1
            failed.add(m.name)
            continue
        try:
            marker.write_text(m.file)
            target.write_text(original.replace(m.find, m.replace))
            if sh(["cmake", "--build", build, "-j", args.jobs, "--target", m.test], log):
                print(f"BROKEN {m.name}: the mutated tree does not build (log: {log})")
                failures += 1
                failed.add(m.name)
                continue
            rc = run_test(build, m.test, log)
            if rc != 0:
                print(f"CAUGHT {m.name} by {m.test}: {m.what}")
            else:
                print(f"MISSED {m.name}: {m.test} still passes although {m.what}")
                failures += 1
                failed.add(m.name)
        except subprocess.TimeoutExpired:
            print(f"MISSED {m.name}: {m.test} hung (timeout) although {m.what}")
            failures += 1
            failed.add(m.name)
        finally:
            target.write_text(original)
            marker.unlink()
    print(f"sabotage: {len(muts) - failures} passed, {failures} failed")
    if failures:
        failed_names = [m.name for m in muts if m.name in failed]
        print("reproduce: " + "; ".join(
            f"/usr/bin/python3 sabotage/run.py --build {args.build} --only {n}" for n in failed_names))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
