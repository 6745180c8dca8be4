#!/usr/bin/python3
"""Sabotage: prove the tests bite.

Each sabotage/<area>-<mutation>.mutation file names one mutation of the source
(an exact text that must occur exactly once in one file, and its replacement),
the test that must catch it, and a group. For each selected mutation this
script

  1. copies the working tree (the files git tracks or would track) to
     BUILD/tree -- the working tree itself is never changed;
  2. builds the named test there (in BUILD/tree/build, configured as `make
     build` configures build/, so that with ccache each file the mutations
     leave alone is a cache hit of the project's own build: the same
     compiler arguments, the same paths relative to the build folder; the
     lanes' baselines had compiled the whole project again, twice, at one
     core each) and runs it unmutated: the baseline must pass;
  3. applies the mutation to the copy (failing if the text does not occur
     exactly once: a mutation that no longer applies is itself a failure),
     with the project's warnings turned back from errors into warnings in
     the mutated file alone (pragmas above its first line, then `#line 1`;
     a C++ file's only: src/bus/publish.lua, which the build embeds, is
     mutated as it is): a mutation may leave a variable unused;
  4. rebuilds and runs the test, which must now FAIL;
  5. restores the copy's file.

A mutation may name, on a `cases:` line, the Catch2 test cases (a test spec,
as the test binary takes it) that step 4 runs instead of all of the test's.
It prints one line per mutation, CAUGHT or MISSED, with the test that caught
it and the seconds it took, and exits non-zero unless every mutation was
caught.

Steps 1-5 run in --lanes copies side by side (BUILD/tree with BUILD/tree/build,
BUILD/tree-1 with BUILD/tree-1/build, ...; logs sabotage.log, sabotage-1.log), the
mutations split between them with each test's mutations in one lane: a
mutation's rebuild is one compile and one link, which a second core does not
speed up, so two lanes on two cores do twice the mutations an hour.

    sabotage/run.py --build build/sabotage --group pool
    sabotage/run.py --build build/sabotage --all
    sabotage/run.py --build build/sabotage --only pool-revert-send
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def warning_pragmas():
    """The lines put above a mutated file: each warning flag of the project's
    M0_WARNINGS (CMakeLists.txt) back to a warning under -Werror, then the
    file's own line numbers."""
    text = (ROOT / "CMakeLists.txt").read_text()
    found = re.search(r"set\(M0_WARNINGS([^)]*)\)", text)
    flags = found.group(1).split() if found else []
    flags = [f for f in flags if f.startswith("-W") and not f.startswith("-Wno-")]
    flags += ["-Wunused-result", "-Wdeprecated-declarations"]  # on by default
    return "".join(f'#pragma GCC diagnostic warning "{f}"\n' for f in flags) + "#line 1\n"


PRAGMAS = warning_pragmas()
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
            rel = path.relative_to(dest)
            if rel.parts[0] == "build":
                continue  # the lane's build folder (untracked, as build/ is)
            if path.is_file() and str(rel) not in wanted:
                path.unlink()


def run_test(build, test, log, cases=None):
    # A property that fails is not shrunk: the verdict needs the failure, not
    # its smallest case (shrinking over a real server took minutes).
    env = dict(os.environ, RC_PARAMS=f"max_success={PROPERTY_CASES} noshrink=1")
    # Every test case runs, also after one failed: a test stopped at its first
    # failure (Catch2's --abort) leaves its objects to the exit, and a WSGI
    # pool that a mutation left stuck then hangs the exit (a timeout, MISSED).
    # `cases` (a mutation's optional `cases:` line, a Catch2 test spec) runs
    # only the cases named: a mutation that makes every case of a large test
    # wait out its timeouts is judged by the cases that guard it.
    return sh([str(build / test)] + ([cases] if cases else []), log, env=env, timeout=300)


def split_lanes(muts, lanes):
    """The mutations in `lanes` lists of about equal count, each test's
    mutations kept together (a lane builds only the tests it runs)."""
    by_test = {}
    for m in muts:
        by_test.setdefault(m.test, []).append(m)
    out = [[] for _ in range(lanes)]
    for group in sorted(by_test.values(), key=len, reverse=True):
        min(out, key=len).extend(group)
    return [lane for lane in out if lane]


class Lane:
    """One copy of the tree and one build folder, running its mutations in
    turn. Lanes run side by side, each on its own core: a mutation's rebuild
    is one compile and one link, which a second core does not speed up."""

    def __init__(self, base, index, muts, jobs, say):
        suffix = "" if index == 0 else f"-{index}"
        # The build folder inside the tree, as build/ is in the project's.
        self.tree = base / f"tree{suffix}"
        self.build = self.tree / "build"
        self.old_build = base / f"build{suffix}"  # where earlier versions built
        self.log = base / f"sabotage{suffix}.log"
        self.marker = base / f"mutated{suffix}"
        self.muts, self.jobs, self.say = muts, jobs, say
        self.failed = []  # names of the mutations not caught
        self.spent = []  # (seconds, build seconds, test seconds, name), one a mutation
        self.error = None  # why the lane could not start (cmake, baseline)

    def prepare(self):
        self.log.write_text("")
        # An interrupted run may have left a mutated file compiled into the
        # build: its marker names the file, which is then rewritten (and so
        # recompiled).
        if self.marker.exists():
            stale = self.tree / self.marker.read_text().strip()
            if stale.exists():
                stale.unlink()
            self.marker.unlink()
        if self.old_build.is_dir():
            shutil.rmtree(self.old_build)
        copy_tree(self.tree)
        # As `make configure` does (SANITIZER empty): the same arguments.
        if sh(["cmake", "-S", self.tree, "-B", self.build, "-DSANITIZER="], self.log):
            self.error = f"sabotage: cmake failed (log: {self.log})"
            return False
        # The baseline: every named test builds and passes unmutated.
        tests = sorted({m.test for m in self.muts})
        if sh(["cmake", "--build", self.build, "-j", self.jobs, "--target", *tests], self.log):
            self.error = f"sabotage: the baseline does not build (log: {self.log})"
            return False
        for t in tests:
            if run_test(self.build, t, self.log) != 0:
                self.error = (f"sabotage: baseline FAILED: {t} fails without any mutation (log: {self.log})\n"
                              f"reproduce: {self.build}/{t}")
                return False
        # A `cases:` spec that names no test case runs nothing, and a test
        # that runs nothing passes: the mutation would be MISSED for nothing,
        # or worse, a spec made wrong later would pass unnoticed.
        for m in self.muts:
            cases = m.fields.get("cases")
            if not cases:
                continue
            listed = subprocess.run([str(self.build / m.test), "--list-test-names-only", cases],
                                    capture_output=True, text=True, timeout=60)
            if not listed.stdout.strip():
                self.error = (f"sabotage: {m.name}: its cases: line ({cases}) names no test case of "
                              f"{m.test}; update the mutation")
                return False
        self.say(f"sabotage: baseline green: {', '.join(tests)}")
        return True

    def run(self):
        if not self.prepare():
            self.failed = [m.name for m in self.muts]
            return
        for m in self.muts:
            began = time.monotonic()
            self.build_s = self.test_s = 0.0
            verdict = self.one(m)
            if verdict:
                self.failed.append(m.name)
            took = time.monotonic() - began
            self.spent.append((took, self.build_s, self.test_s, m.name))
            self.say(f"{verdict or 'CAUGHT'} {m.name}" + (f" by {m.test}" if not verdict else "") +
                     f" ({took:.0f} s: build {self.build_s:.0f}, test {self.test_s:.0f}): " +
                     (m.what if not verdict else self.why))

    def one(self, m):
        """None when the mutation is caught; else STALE, BROKEN or MISSED
        (self.why says more)."""
        target = self.tree / m.file
        original = target.read_text()
        count = original.count(m.find)
        if count != 1:
            self.why = f"its text occurs {count} times in {m.file}, not once; update the mutation"
            return "STALE"
        try:
            self.marker.write_text(m.file)
            # The pragmas are C++'s: a mutated script (publish.lua) goes as it is.
            pragmas = PRAGMAS if target.suffix in (".cpp", ".hpp") else ""
            target.write_text(pragmas + original.replace(m.find, m.replace))
            t0 = time.monotonic()
            built = sh(["cmake", "--build", self.build, "-j", self.jobs, "--target", m.test], self.log)
            self.build_s = time.monotonic() - t0
            if built:
                self.why = f"the mutated tree does not build (log: {self.log})"
                return "BROKEN"
            t0 = time.monotonic()
            try:
                if run_test(self.build, m.test, self.log, m.fields.get("cases")) != 0:
                    return None
            finally:
                self.test_s = time.monotonic() - t0
            self.why = f"{m.test} still passes although {m.what}"
            return "MISSED"
        except subprocess.TimeoutExpired:
            self.why = f"{m.test} hung (timeout) although {m.what}"
            return "MISSED"
        finally:
            target.write_text(original)
            self.marker.unlink()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build" / "sabotage"))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--all", action="store_true")
    g.add_argument("--group")
    g.add_argument("--only", action="append")
    ap.add_argument("--check", action="store_true",
                    help="only look each mutation's text up in the tree (stale ones fail), run none")
    ap.add_argument("--lanes", type=int, default=min(os.cpu_count() or 1, 2),
                    help="copies of the tree that run mutations side by side (default: the cores, at most 2)")
    args = ap.parse_args()

    muts = [Mutation(p) for p in sorted((ROOT / "sabotage").glob("*.mutation"))]
    if args.group:
        muts = [m for m in muts if m.group == args.group]
    if args.only:
        muts = [m for m in muts if m.name in args.only]
    if not muts:
        raise SystemExit("sabotage: no mutation selected")

    # Every selected mutation's text is looked for first, in the tree as it
    # is: a stale one is said at once, not when its lane reaches it.
    stale = [m for m in muts if (ROOT / m.file).read_text().count(m.find) != 1]
    for m in stale:
        count = (ROOT / m.file).read_text().count(m.find)
        print(f"STALE {m.name}: its text occurs {count} times in {m.file}, not once; "
              "update the mutation", flush=True)
    if stale:
        print(f"sabotage: {len(stale)} stale mutations; nothing was run")
        return 1
    if args.check:
        print(f"sabotage: {len(muts)} mutations, none stale")
        return 0

    base = pathlib.Path(args.build).resolve()
    base.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def say(line):
        with lock:
            print(line, flush=True)

    began = time.monotonic()
    parts = split_lanes(muts, max(1, args.lanes))
    # A lane builds its baseline with the cores the other lanes leave it.
    jobs = str(max(1, (os.cpu_count() or 1) // len(parts)))
    lanes = [Lane(base, i, part, jobs, say) for i, part in enumerate(parts)]
    threads = [threading.Thread(target=lane.run) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [lane.error for lane in lanes if lane.error]
    for e in errors:
        print(e)
    failed = {name for lane in lanes for name in lane.failed}
    print(f"sabotage: {len(muts) - len(failed)} passed, {len(failed)} failed, {len(lanes)} lanes, "
          f"{time.monotonic() - began:.0f} s")
    # Where the time went: the harness's own budget is watched with this.
    spent = sorted((s for lane in lanes for s in lane.spent), reverse=True)
    if spent:
        print(f"sabotage: mutations took {sum(s[0] for s in spent):.0f} lane-seconds: building "
              f"{sum(s[1] for s in spent):.0f}, testing {sum(s[2] for s in spent):.0f}; slowest: " +
              ", ".join(f"{name} {t:.0f} s (build {b:.0f}, test {x:.0f})" for t, b, x, name in spent[:8]))
    if errors:
        return 2
    if failed:
        print("reproduce: " + "; ".join(
            f"/usr/bin/python3 sabotage/run.py --build {args.build} --only {m.name}"
            for m in muts if m.name in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
