/**
 * Proof by syscall trace that the plugin never reads outside the worktree: a child process loads
 * the plugin (watcher on, the default), takes a few hundred fast-check tool calls aimed at the
 * outside (`..` chains, absolute paths, symlinks out of the worktree, a directory named AGENTS.md
 * that links out…), steps and compacts, all under `strace -f -y`. `-y` prints the path an fd really
 * refers to, so a read through a symlink shows its target.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Op } from "./child/runner.ts";
import { call } from "./arbitraries.ts";
import { figures } from "./figures.ts";
import { judgeTrace } from "./trace.ts";
import { leakedMarkers, runChild, sandbox, type Sandbox } from "./util.ts";

const STRACE = Bun.which("strace");
const CALLS = Number(process.env.HARDENING_TRACE_CALLS ?? 120);
const SEED = Number(process.env.HARDENING_SEED ?? 20250505);
/** Syscalls that read content (file bytes or directory listings) from an fd, or open one. */
const TRACED = "openat,open,openat2,read,pread64,readv,preadv,preadv2,getdents64,mmap,sendfile,copy_file_range,splice,statx,newfstatat,lstat,stat,readlink,readlinkat,inotify_add_watch";

let box: Sandbox;
beforeAll(async () => {
  box = await sandbox();
});
afterAll(async () => {
  await box.cleanup();
});

describe.skipIf(STRACE === null)("no read outside the worktree (syscall trace)", () => {
  test(`${CALLS} generated tool calls, steps and compactions: no byte or listing read outside`, async () => {
    // JSON-safe calls (they travel to the child in a script), seeded. Calls into the loops directory
    // are left out: with the watcher on they crash the process today (REQUEST R1, hostile.test.ts).
    const calls = fc
      .sample(call(box.repo, box.parent, true), { numRuns: CALLS * 2, seed: SEED })
      .filter((c) => !JSON.stringify(c).includes("loops"))
      .slice(0, CALLS);
    const sessions = ["ses_a", "ses_b", "ses_c"];
    const ops: Op[] = [];
    // Sessions that surely reach every hostile spot, besides the generated ones.
    for (const path of ["linked-file/x.ts", "linked-rel/x.ts", "linked-dir/nested/code.ts", "linked-nested/code.ts", "agents-dir-link/x.ts", "devices/x.ts", "escape/outside/x.ts", "src/deep/er/file.ts", "docs/x.md"]) {
      ops.push({ op: "touch", session: "ses_a", tool: "read", args: { filePath: path } });
    }
    ops.push({ op: "step", session: "ses_a" });
    for (const c of calls) {
      ops.push({ op: "touch", session: c.session, tool: c.tool, args: c.args });
      ops.push({ op: "after", session: c.session, tool: c.tool, args: c.args, output: c.output });
      const id = typeof c.session === "string" ? c.session : "ses_a";
      ops.push({ op: "step", session: id });
    }
    for (const id of sessions) ops.push({ op: "step", session: id }, { op: "compact", session: id });
    // Give the watcher time to set up every watch it was asked for, then write through a symlink out.
    ops.push({ op: "stepUntil", session: "ses_a", contains: "NEVER-THERE", timeoutMs: 300 });
    ops.push({ op: "after", session: "ses_a", tool: "edit", args: { filePath: "linked-file/AGENTS.md" } });
    ops.push({ op: "step", session: "ses_a" }, { op: "dispose" });

    const trace = join(tmpdir(), `pc-trace-${process.pid}-${Date.now()}.txt`);
    const run = await runChild(
      { root: box.repo, ops },
      { prefix: [STRACE!, "-f", "-y", "-qq", "-s", "256", "-o", trace, "-e", `trace=${TRACED}`], timeoutMs: 30_000 },
    );
    const log = await readFile(trace, "utf8");
    if (!process.env.HARDENING_DEBUG) await rm(trace, { force: true });
    expect(run.stderr).toBe("");
    expect(run.exitCode).toBe(0);
    const report = run.report!;
    expect(report.events.filter((event) => event.op === "error")).toEqual([]);
    for (const event of report.events) if ("text" in event) expect(leakedMarkers(event.text)).toEqual([]);
    expect(report.logs.filter((entry) => entry.level === "error")).toEqual([]);

    if (process.env.HARDENING_DEBUG) console.log(report.logs);
    const verdict = judgeTrace(log, box);
    // Positive control: the trace does see the plugin read the worktree's own context files.
    expect([...verdict.readInside].sort()).toEqual(expect.arrayContaining([join(box.repo, "AGENTS.md"), join(box.repo, "src", "AGENTS.md")]));
    expect(verdict.violations).toEqual([]);
    figures.record("outsideReads", {
      toolCalls: calls.length,
      steps: report.events.filter((event) => event.op === "step").length,
      syscallsTraced: verdict.syscalls,
      contextFilesReadInside: verdict.readInside.size,
      readsOutside: verdict.violations.length,
      outsidePathsWatched: verdict.watchedOutside.size,
    });
  }, 40_000);

  test("the trace judge flags a read through a symlink out (it can fail)", () => {
    const fake = [
      `1 openat(AT_FDCWD</x>, "${box.repo}/linked-file/AGENTS.md", O_RDONLY|O_CLOEXEC) = 5<${box.outside}/AGENTS.md>`,
      `1 pread64(5<${box.outside}/AGENTS.md>, "# outside", 100, 0) = 9`,
      `1 statx(AT_FDCWD</x>, "${box.parent}/AGENTS.md", AT_STATX_SYNC_AS_STAT, STATX_ALL, 0x1) = 0`,
      `2 getdents64(7<${box.outside}/nested>,  <unfinished ...>`,
      `2 <... getdents64 resumed> 0x1 /* 3 entries */, 8192) = 80`,
    ].join("\n");
    expect(judgeTrace(fake, box).violations).toHaveLength(4);
  });
});
