/**
 * File-system faults, made real rather than mocked: a child process running as a non-root user
 * (permission denied), syscall fault injection with strace (a file gone between stat and open,
 * transient EMFILE/EIO, inotify out of watches or instances), a user whose inotify instances are
 * genuinely used up, a writer process racing the plugin's reads, and a full disk (a 64 KiB tmpfs).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, ftruncateSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { callContextTool, start, tempProject, waitFor } from "../helpers/harness.ts";
import { appendSteer, parseSteer, readRecords, RECORDS_VERSION, steerPath } from "../../plugin/records/format.ts";
import type { Event, Op, Report } from "./child/runner.ts";
import { figures } from "./figures.ts";
import { after, nonRootPrefix, runChild, type ChildRun } from "./util.ts";

const STRACE = Bun.which("strace");
const NOBODY = nonRootPrefix();
const PYTHON = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : null;

/** A small worktree every child below can read, whoever it runs as. */
async function project(files: Record<string, string>): Promise<{ root: string; cleanup: () => Promise<void> }> {
  const { root, cleanup } = await tempProject();
  await chmod(root, 0o755);
  for (const [path, text] of Object.entries(files)) {
    const full = join(root, path);
    await mkdir(join(full, ".."), { recursive: true });
    await writeFile(full, text);
  }
  await Bun.spawn(["chmod", "-R", "a+rX", root]).exited;
  return { root, cleanup };
}

const stepTexts = (report: Report | undefined) =>
  (report?.events ?? []).filter((event): event is Extract<Event, { op: "step" }> => event.op === "step").map((event) => event.text);
const afterTexts = (report: Report | undefined) =>
  (report?.events ?? []).filter((event): event is Extract<Event, { op: "after" }> => event.op === "after").map((event) => event.text);
const logged = (report: Report | undefined, pattern: RegExp) => (report?.logs ?? []).filter((entry) => pattern.test(entry.message));

function expectClean(run: ChildRun): void {
  if (process.env.HARDENING_DEBUG) console.log(run.stderr, run.stdout.slice(0, 3000));
  expect(run.stderr).toBe("");
  expect(run.exitCode).toBe(0);
  expect((run.report?.events ?? []).filter((event) => event.op === "error")).toEqual([]);
  expect(logged(run.report, /./).filter((entry) => entry.level === "error")).toEqual([]);
}

const faults: Record<string, number> = {};
const count = (name: string, n = 1) => (faults[name] = (faults[name] ?? 0) + n);
afterAll(() => figures.record("faults", faults));

describe.skipIf(NOBODY === undefined)("permission denied, as a non-root user", () => {
  test.concurrent("unreadable files and directories are skipped and logged once; a readable fallback is used", async () => {
    const { root, cleanup } = await project({
      "AGENTS.md": "# root\nROOT-RULES\n",
      "perm/AGENTS.md": "# perm\nPERM-SECRET\n",
      "perm/CLAUDE.md": "# perm fallback\nPERM-FALLBACK\n",
      "noread/AGENTS.md": "# noread\nNOREAD-SECRET\n",
      "locked/AGENTS.md": "# locked\nLOCKED-SECRET\n",
      "locked/sub/x.ts": "",
    });
    try {
      await chmod(join(root, "perm", "AGENTS.md"), 0o000);
      await chmod(join(root, "noread", "AGENTS.md"), 0o000);
      await chmod(join(root, "locked"), 0o700);
      const ops: Op[] = [
        { op: "touch", session: "s", tool: "read", args: { filePath: "perm/x.ts" } },
        { op: "touch", session: "s", tool: "read", args: { filePath: "noread/x.ts" } },
        { op: "touch", session: "s", tool: "read", args: { filePath: "locked/sub/x.ts" } },
      ];
      for (let i = 0; i < 5; i++) ops.push({ op: "step", session: "s" }, { op: "after", session: "s", tool: "bash", args: { command: "true" } });
      ops.push({ op: "compact", session: "s" }, { op: "dispose" });
      const run = await runChild({ root, ops }, { prefix: NOBODY });
      expectClean(run);
      expect(run.report!.uid).not.toBe(0);
      for (const text of stepTexts(run.report)) {
        expect(text).toContain("ROOT-RULES");
        expect(text).toContain("PERM-FALLBACK");
        expect(text).not.toMatch(/SECRET/);
      }
      // One warning per file, naming it and what was wrong, however many steps re-tried it.
      expect(logged(run.report, /skipped \S*perm\/AGENTS\.md: could not open \(EACCES\)/)).toHaveLength(1);
      expect(logged(run.report, /skipped \S*noread\/AGENTS\.md: could not open \(EACCES\)/)).toHaveLength(1);
      expect(logged(run.report, /skipped \S*locked\/AGENTS\.md: could not (?:resolve|open) \(EACCES\)/)).toHaveLength(1);
      expect(logged(run.report, /perm\/AGENTS\.md|noread\/AGENTS\.md|locked\/AGENTS\.md/)).toHaveLength(3);
      count("permissionDenied", 3);
    } finally {
      await chmod(join(root, "locked"), 0o755);
      await cleanup();
    }
  }, 20_000);

  test.concurrent("a permission fixed mid-session is seen by the next step after a tool call", async () => {
    const { root, cleanup } = await project({ "AGENTS.md": "# root\nROOT-RULES\n", "later/AGENTS.md": "# later\nLATER-RULES\n" });
    const flags = await mkdtemp(join(tmpdir(), "pc-flags-"));
    await chmod(flags, 0o777);
    try {
      await chmod(join(root, "later", "AGENTS.md"), 0o000);
      const running = runChild(
        {
          root,
          ops: [
            { op: "touch", session: "s", tool: "read", args: { filePath: "later/x.ts" } },
            { op: "step", session: "s" },
            { op: "signal", path: join(flags, "denied") },
            { op: "waitFile", path: join(flags, "fixed"), timeoutMs: 5000 },
            // The user fixed it with a shell command the agent ran, as a tool call.
            { op: "after", session: "s", tool: "bash", args: { command: "chmod 644 later/AGENTS.md" } },
            { op: "step", session: "s" },
            { op: "dispose" },
          ],
        },
        { prefix: NOBODY },
      );
      // Wait for the child to have been denied, then fix the permission (as root, like a sudo).
      const deadline = Date.now() + 10_000;
      while (!existsSync(join(flags, "denied")) && Date.now() < deadline) await Bun.sleep(5);
      await chmod(join(root, "later", "AGENTS.md"), 0o644);
      await writeFile(join(flags, "fixed"), "");
      const run = await running;
      expectClean(run);
      const [before, afterFix] = stepTexts(run.report);
      expect(before).not.toContain("LATER-RULES");
      // Stable delivery: the system block stays frozen; the file, readable now, rides on the output
      // of the tool call that fixed it, once.
      expect(afterFix).toBe(before!);
      const outputs = afterTexts(run.report);
      expect(outputs).toHaveLength(1);
      expect(outputs[0]).toContain("LATER-RULES");
      expect(outputs[0]).toContain('<context-file path="later/AGENTS.md">');
      count("permissionRestored");
    } finally {
      await rm(flags, { recursive: true, force: true });
      await cleanup();
    }
  }, 20_000);

  for (const watch of [false, true]) {
    test.concurrent(`an always file whose directory is made unreadable and then readable again is back (watch ${watch})`, async () => {
      const always = "---\ninclude: always\n---\n# always\nALWAYS-RULES\n";
      const { root, cleanup } = await project({ "AGENTS.md": "# root\nROOT-RULES\n", "far/AGENTS.md": always });
      const flags = await mkdtemp(join(tmpdir(), "pc-flags-"));
      await chmod(flags, 0o777);
      const far = join(root, "far");
      try {
        const flag = (name: string) => join(flags, name);
        const running = runChild(
          {
            root,
            options: { watch, delivery: "system" },
            ops: [
              { op: "stepUntil", session: "s", contains: "ALWAYS-RULES", timeoutMs: 5_000 },
              { op: "signal", path: flag("seen") },
              { op: "waitFile", path: flag("locked"), timeoutMs: 5_000 },
              { op: "stepUntil", session: "s", lacks: "ALWAYS-RULES", timeoutMs: 2_000 },
              { op: "signal", path: flag("gone") },
              { op: "waitFile", path: flag("unlocked"), timeoutMs: 5_000 },
              { op: "stepUntil", session: "s", contains: "ALWAYS-RULES", timeoutMs: 2_000 },
              { op: "dispose" },
            ],
          },
          { prefix: NOBODY },
        );
        // As root (a sudo): the directory closed to the plugin's user, then opened again.
        const waitFlag = async (name: string) => {
          const deadline = Date.now() + 10_000;
          while (!existsSync(flag(name)) && Date.now() < deadline) await Bun.sleep(5);
        };
        await waitFlag("seen");
        await chmod(far, 0o000);
        await writeFile(flag("locked"), "");
        await waitFlag("gone");
        await chmod(far, 0o755);
        await writeFile(flag("unlocked"), "");
        const run = await running;
        expectClean(run);
        const waits = (run.report?.events ?? []).filter((event) => event.op === "stepUntil").map((event) => event.ok);
        // Shown, then not while it cannot be read (nothing of it is kept), then back.
        expect({ watch, waits }).toEqual({ watch, waits: [true, true, true] });
        count("permissionRestoredDirectory");
      } finally {
        await chmod(far, 0o755).catch(() => {});
        await rm(flags, { recursive: true, force: true });
        await cleanup();
      }
    }, 20_000);
  }
});

describe.skipIf(STRACE === null)("faults injected at the syscall (strace)", () => {
  /** strace arguments injecting `error` into `syscall` on `path` only (`when`: strace's occurrence filter). */
  const inject = (path: string, syscall: string, error: string, when?: string) => [
    STRACE!, "-f", "-qq", "-o", "/dev/null", "-P", path, "-e", `trace=${syscall}`, "-e", `inject=${syscall}:error=${error}${when === undefined ? "" : `:when=${when}`}`,
  ];

  test.concurrent("a context file gone between stat and open: treated as absent, the fallback used, nothing thrown", async () => {
    const { root, cleanup } = await project({ "AGENTS.md": "# root\nROOT-RULES\n", "race/AGENTS.md": "# race\nRACE-AGENTS\n", "race/CLAUDE.md": "# race\nRACE-CLAUDE\n" });
    try {
      const ops: Op[] = [{ op: "touch", session: "s", tool: "read", args: { filePath: "race/x.ts" } }];
      for (let i = 0; i < 3; i++) ops.push({ op: "step", session: "s" }, { op: "after", session: "s", tool: "bash", args: {} });
      ops.push({ op: "dispose" });
      // Every open of race/AGENTS.md fails with ENOENT while lstat/stat still find it.
      const run = await runChild({ root, options: { watch: false, delivery: "system" }, ops }, { prefix: inject(join(root, "race", "AGENTS.md"), "openat", "ENOENT") });
      expectClean(run);
      for (const text of stepTexts(run.report)) {
        expect(text).toContain("RACE-CLAUDE");
        expect(text).not.toContain("RACE-AGENTS");
      }
      count("goneBetweenStatAndOpen", 3);
    } finally {
      await cleanup();
    }
  }, 20_000);

  for (const error of ["EMFILE", "EIO"]) {
    test.concurrent(`a transient ${error} on open is not remembered: the file is back by the step after the fault`, async () => {
      const { root, cleanup } = await project({ "AGENTS.md": "# root\nROOT-RULES\n", "flaky/AGENTS.md": "# flaky\nFLAKY-RULES\n" });
      const ROUNDS = 12;
      try {
        const ops: Op[] = [{ op: "touch", session: "s", tool: "read", args: { filePath: "flaky/x.ts" } }];
        for (let round = 0; round < ROUNDS; round++) ops.push({ op: "step", session: "s" }, { op: "after", session: "s", tool: "bash", args: { command: "true" } });
        ops.push({ op: "dispose" });
        for (const watch of error === "EMFILE" ? [false, true] : [false]) {
          const trace = join(tmpdir(), `pc-inject-${process.pid}-${error}-${watch}-${Date.now()}.txt`);
          // strace counts `when=1..2` per thread: each thread fails its first two opens of the file (the
          // worktree catalog's look for frontmatter at start-up, and its read again or the store's). The
          // fault is transient all the same: it stops after those few opens.
          const prefix = inject(join(root, "flaky", "AGENTS.md"), "openat", error, "1..2").map((arg) => (arg === "/dev/null" ? trace : arg));
          // delivery "system": every step's block is built again, so each step shows what its read got.
          const run = await runChild({ root, options: { watch, delivery: "system" }, ops }, { prefix });
          const injected = (await Bun.file(trace).text()).split("\n").filter((line) => line.includes("(INJECTED)")).length;
          await rm(trace, { force: true });
          expectClean(run);
          const shown = stepTexts(run.report).map((text) => text.includes("FLAKY-RULES"));
          if (process.env.HARDENING_DEBUG) console.log(run.report?.logs);
          expect(injected).toBeGreaterThan(0);
          // Logged once by each reader that met it: the worktree catalog (which reads it again at the next
          // step), the store (its session's read), or both.
          const reported = logged(run.report, new RegExp(`(?:skipped|could not read) \\S*flaky/AGENTS\\.md: could not (?:resolve|open) \\(${error}\\)`)).length;
          expect(reported >= 1 && reported <= 2).toBe(true);
          // Missed at most once per injected fault (a thread of the I/O pool that first opens the file
          // late fails late); a fault remembered would miss every step after it.
          const missed = shown.filter((seen) => !seen).length;
          expect(injected).toBeLessThan(ROUNDS / 2);
          expect({ watch, missedAtMostOncePerFault: missed <= injected }).toEqual({ watch, missedAtMostOncePerFault: true });
          count(`transient${error}`, injected);
        }
      } finally {
        await cleanup();
      }
    }, 20_000);
  }

  for (const error of ["EMFILE", "EIO"]) {
    test.concurrent(`an always file whose read after an edit meets a transient ${error} keeps its last text, and the edit is in a later step`, async () => {
      const always = (text: string) => `---\ninclude: always\n---\n# always\n${text}\n`;
      // Saved as editors save (a new file renamed over it): only the plugin opens the file's path.
      const save: Op[] = [{ op: "write", path: "far/AGENTS.md.new", text: always("ALWAYS-V2") }, { op: "rename", from: "far/AGENTS.md.new", to: "far/AGENTS.md" }];
      // The catalog is built in the background: the file is in a step once it is built.
      const ops: Op[] = [{ op: "stepUntil", session: "s", contains: "ALWAYS-V1", timeoutMs: 5_000 }, ...save];
      for (let round = 0; round < 4; round++) ops.push({ op: "step", session: "s" });
      ops.push({ op: "dispose" });
      for (const watch of [true, false]) {
        const { root, cleanup } = await project({ "AGENTS.md": "# root\nROOT-RULES\n", "far/AGENTS.md": always("ALWAYS-V1") });
        const trace = join(tmpdir(), `pc-inject-always-${process.pid}-${error}-${watch}-${Date.now()}.txt`);
        try {
          // A contained read opens the path twice (resolving it, then the file). The catalog reads the
          // file twice at start-up (its head, then the whole): the 5th open is the edit's first.
          const prefix = inject(join(root, "far", "AGENTS.md"), "openat", error, "5").map((arg) => (arg === "/dev/null" ? trace : arg));
          const run = await runChild({ root, options: { watch, delivery: "system" }, ops }, { prefix });
          const injected = (await Bun.file(trace).text()).split("\n").filter((line) => line.includes("(INJECTED)")).length;
          expectClean(run);
          expect(injected).toBe(1);
          expect(run.report?.events.find((event) => event.op === "stepUntil")).toMatchObject({ ok: true });
          expect(logged(run.report, new RegExp(`could not read \\S*far/AGENTS\\.md: .*\\(${error}\\); what it said before is kept`))).toHaveLength(1);
          // The step whose read of the edit failed keeps the last text (never none); the next has the edit, and every one after it.
          const seen = stepTexts(run.report).map((text) => (text.includes("ALWAYS-V2") ? "V2" : text.includes("ALWAYS-V1") ? "V1" : "none"));
          expect({ watch, seen }).toEqual({ watch, seen: ["V1", "V2", "V2", "V2"] });
          count(`alwaysTransient${error}`, injected);
        } finally {
          await rm(trace, { force: true });
          await cleanup();
        }
      }
    }, 20_000);
  }

  const watcherFailure = async (name: string, syscall: string, error: string, when?: string) => {
    const { root, cleanup } = await project({
      "AGENTS.md": "# root\nROOT-RULES\n",
      "a/AGENTS.md": "# a\nA-V1\n",
      "b/c/AGENTS.md": "# c\nC-V1\n",
    });
    try {
      const ops: Op[] = [
        { op: "touch", session: "s", tool: "read", args: { filePath: "a/x.ts" } },
        { op: "touch", session: "s", tool: "read", args: { filePath: "b/c/x.ts" } },
        { op: "step", session: "s" },
        // Steps until the failure has been reported and handled.
        { op: "stepUntil", session: "s", contains: "NEVER-THERE", timeoutMs: 300 },
      ];
      // Edits by another program (no tool call): with the watcher gone, only stat validation sees them.
      for (let version = 2; version <= 6; version++) {
        ops.push({ op: "write", path: "a/AGENTS.md", text: `# a\nA-V${version}\n` });
        ops.push({ op: "write", path: "b/c/AGENTS.md", text: `# c\nC-V${version} and more\n` });
        ops.push({ op: "step", session: "s" });
      }
      ops.push({ op: "write", path: "b/AGENTS.md", text: "# b\nB-NEW\n" }, { op: "step", session: "s" }, { op: "rm", path: "a/AGENTS.md" }, { op: "step", session: "s" });
      ops.push({ op: "dispose" });
      // delivery "system": the block is built every step, so a stale step would show.
      const run = await runChild({ root, options: { delivery: "system" }, ops }, { prefix: [STRACE!, "-f", "-qq", "-o", "/dev/null", "-e", `trace=${syscall}`, "-e", `inject=${syscall}:error=${error}${when === undefined ? "" : `:when=${when}`}`] });
      expectClean(run);
      const texts = stepTexts(run.report);
      // Steps 2..6 follow writes of versions 2..6: each must show its version, not the one before.
      for (let version = 2; version <= 6; version++) {
        expect(texts[version - 1]).toContain(`A-V${version}`);
        expect(texts[version - 1]).toContain(`C-V${version} and more`);
      }
      expect(texts[6]).toContain("B-NEW");
      expect(texts[7]).not.toContain("A-V6");
      expect(logged(run.report, /file watching stopped/)).toHaveLength(1);
      count(name);
      return run;
    } finally {
      await cleanup();
    }
  };

  test.concurrent("inotify out of watches (ENOSPC on every add): stat validation takes over, logged once, nothing stale", async () => {
    await watcherFailure("inotifyENOSPC", "inotify_add_watch", "ENOSPC");
  }, 20_000);

  test.concurrent("inotify out of watches mid-session (ENOSPC from the 3rd add on): same", async () => {
    await watcherFailure("inotifyENOSPCLater", "inotify_add_watch", "ENOSPC", "3+");
  }, 20_000);

  test.concurrent("no inotify instance (EMFILE on inotify_init1): same", async () => {
    await watcherFailure("inotifyEMFILE", "inotify_init1", "EMFILE");
  }, 20_000);
});

describe.skipIf(NOBODY === undefined || PYTHON === null)("inotify instances really used up (no injection)", () => {
  test("a user with no inotify instance left: the plugin falls back to stat validation and stays fresh", async () => {
    const { root, cleanup } = await project({ "AGENTS.md": "# root\nROOT-V1\n" });
    // The child edits the file itself, as that user.
    await Bun.spawn(["chown", "-R", "65534:65534", root]).exited;
    // Another process of the same user takes every inotify instance the kernel allows that user.
    const holder = Bun.spawn(
      [...NOBODY!, PYTHON!, "-c", [
        "import ctypes, os, sys",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "fds = []",
        "while True:",
        "    fd = libc.inotify_init1(0)",
        "    if fd < 0: break",
        "    fds.append(fd)",
        "print(len(fds), ctypes.get_errno(), flush=True)",
        "sys.stdin.read()",
      ].join("\n")],
      { stdin: "pipe", stdout: "pipe", stderr: "pipe" },
    );
    try {
      const reader = holder.stdout.getReader();
      let first = "";
      while (!first.includes("\n")) {
        const chunk = await reader.read();
        if (chunk.done) break;
        first += new TextDecoder().decode(chunk.value);
      }
      const [held, errno] = first.trim().split(" ").map(Number);
      expect(errno).toBe(24); // EMFILE: the per-user limit, fs.inotify.max_user_instances
      const ops: Op[] = [{ op: "step", session: "s" }, { op: "stepUntil", session: "s", contains: "NEVER-THERE", timeoutMs: 200 }];
      for (let version = 2; version <= 4; version++) ops.push({ op: "write", path: "AGENTS.md", text: `# root\nROOT-V${version}\n` }, { op: "step", session: "s" });
      ops.push({ op: "inotify" }, { op: "dispose" });
      const run = await runChild({ root, options: { delivery: "system" }, ops }, { prefix: NOBODY });
      expectClean(run);
      const texts = stepTexts(run.report);
      for (let version = 2; version <= 4; version++) expect(texts[version - 1]).toContain(`ROOT-V${version}`);
      expect(logged(run.report, /file watching stopped: .*EMFILE/)).toHaveLength(1);
      figures.record("inotifyExhausted", { instancesHeldByOtherProcess: held });
      count("inotifyInstancesExhausted");
    } finally {
      holder.stdin.end();
      holder.kill();
      await holder.exited;
      await cleanup();
    }
  }, 20_000);
});

describe("a writer racing the reads (real concurrency, no injection)", () => {
  let root: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ root, cleanup } = await project({ "AGENTS.md": "# root\nROOT-RULES\n", "hot/CLAUDE.md": "# hot fallback\nHOT-FALLBACK\n" }));
  });
  afterAll(() => cleanup());

  const VERSION = /HOT-(\d+)-START\n(?:filler line \1\n)+HOT-\1-END/;
  const versionText = (n: number) => `HOT-${n}-START\n${`filler line ${n}\n`.repeat(400)}HOT-${n}-END\n`;

  for (const watch of [false, true]) {
    test(`watch: ${watch}: while AGENTS.md is deleted, rewritten and renamed over, every step shows one whole version (or the fallback), and the last one once the writer stops`, async () => {
      const plugin = await start(root, { watch, delivery: "system" });
      const hot = join(root, "hot");
      const last = 240;
      // Versions 1..last: rm + write, in-place truncate + write, and write-then-rename, in turn.
      const script = [
        "i=1",
        `while [ $i -le ${last} ]; do`,
        `  body=$(printf 'HOT-%d-START\\n' $i; j=0; while [ $j -lt 400 ]; do printf 'filler line %d\\n' $i; j=$((j+1)); done; printf 'HOT-%d-END\\n' $i)`,
        "  case $((i % 3)) in",
        `    0) rm -f ${hot}/AGENTS.md; printf '%s\\n' "$body" > ${hot}/AGENTS.md ;;`,
        `    1) printf '%s\\n' "$body" > ${hot}/AGENTS.md ;;`,
        `    2) printf '%s\\n' "$body" > ${hot}/.tmp && mv ${hot}/.tmp ${hot}/AGENTS.md ;;`,
        "  esac",
        "  i=$((i+1))",
        "done",
      ].join("\n");
      await writeFile(join(hot, "AGENTS.md"), versionText(0));
      await plugin.touch("s", "read", { filePath: "hot/x.ts" });
      const writer = Bun.spawn(["sh", "-c", script], { stdout: "ignore", stderr: "pipe" });
      let steps = 0;
      let torn = 0;
      let partial = 0;
      let fallback = 0;
      const seen = new Set<number>();
      let done = false;
      void writer.exited.then(() => (done = true));
      try {
        while (!done) {
          // Between two steps OpenCode waits for the model: the event loop turns (a step itself may
          // need none, as with inotify's synchronous barrier, and the writer's exit is an event).
          await new Promise((resolve) => setImmediate(resolve));
          // A bash tool call may have been the writer: validate as OpenCode's after-hook does.
          await after(plugin.hooks, "s", "bash", { command: "edit" });
          const block = (await plugin.step("s")) ?? "";
          steps++;
          const match = VERSION.exec(block);
          if (match !== null) {
            seen.add(Number(match[1]));
            // A mixed text would match one version's frame but carry another's lines.
            if ((block.match(/HOT-\d+-START/g) ?? []).length !== 1 || /filler line (\d+)\n/.exec(block)?.[1] !== match[1]) torn++;
          } else if (block.includes("HOT-FALLBACK")) fallback++;
          // Read while the writer was half-way through a non-atomic write: what the disk held then.
          else if (/HOT-\d+-START/.test(block)) partial++;
        }
        expect(await writer.exited).toBe(0);
        // Writer done. Stat mode: the very next step is fresh. Watch mode: after a tool call, too.
        await after(plugin.hooks, "s", "bash", { command: "true" });
        const final = (await plugin.step("s")) ?? "";
        expect(VERSION.exec(final)?.[1]).toBe(String(last));
        expect(torn).toBe(0);
        expect(plugin.logs.filter((entry) => entry.level === "error")).toEqual([]);
        figures.record(`race-watch-${watch}`, { writes: last, steps, versionsSeen: seen.size, fallbackSteps: fallback, partialReads: partial, torn });
        count("racedWrites", last);
      } finally {
        writer.kill();
        await plugin.dispose();
      }
    }, 30_000);
  }
});

/** A 64 KiB tmpfs to fill (mounting takes root: undefined, and the tests skipped, elsewhere). */
function tinyDisk(): string | undefined {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "pc-tiny-disk-"));
  if (spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir]).status === 0) return dir;
  rmSync(dir, { recursive: true, force: true });
  return undefined;
}

/** Fills the disk of `dir` to its last byte, then frees `pages` pages of 4 KiB; returns the filler, to remove. */
function fillLeaving(dir: string, pages: number): string {
  const filler = join(dir, "filler");
  const fd = openSync(filler, "w");
  try {
    for (;;) writeSync(fd, Buffer.alloc(4096, 120));
  } catch {
    // full
  }
  try {
    for (;;) writeSync(fd, Buffer.from("x"));
  } catch {
    // full to the byte
  }
  if (pages > 0) ftruncateSync(fd, Math.max(0, statSync(filler).size - pages * 4096));
  closeSync(fd);
  return filler;
}

const TINY = tinyDisk();
describe.skipIf(TINY === undefined)("a full disk (found in review)", () => {
  afterAll(() => {
    spawnSync("umount", [TINY!]);
    rmSync(TINY!, { recursive: true, force: true });
  });

  test("project_context update that cannot write the whole new text leaves the file as it was, and says so", async () => {
    const root = mkdtempSync(join(TINY!, "wt-"));
    const original = `# Root\n\n## Style\n${"Keep every line of this file. ".repeat(200)}\n\n## Tail\nTHE LAST LINE\n`;
    await writeFile(join(root, "AGENTS.md"), original);
    const plugin = await start(root, { records: false });
    try {
      await plugin.step("ses_u");
      const filler = fillLeaving(TINY!, 1); // one page free; the new text needs two
      const output = await callContextTool(plugin, "ses_u", { action: "update", path: "AGENTS.md", section: "Style", content: "Keep every line, still. ".repeat(250) });
      rmSync(filler);
      expect(output).toStartWith("project_context update failed:");
      expect(readFileSync(join(root, "AGENTS.md"), "utf8")).toBe(original);
    } finally {
      await plugin.dispose();
    }
  });

  test("a TUI steering request cut short by the full disk leaves no part of its line: the next one, once there is room, is read", () => {
    const dir = mkdtempSync(join(TINY!, "steer-"));
    const line = (path: string) => `${JSON.stringify({ v: RECORDS_VERSION, time: new Date().toISOString(), action: "load", path })}\n`;
    // A steering file whose last page has 20 bytes left, on a disk otherwise full.
    let text = "";
    while (text.length + 100 < 4096 - 20) text += line("apps/web");
    text += `${" ".repeat(4096 - 20 - text.length - 1)}\n`;
    writeFileSync(steerPath(dir, "ses_x"), text);
    const filler = fillLeaving(TINY!, 0);
    expect(() => appendSteer(dir, "ses_x", "load", "tools/scripts")).toThrow();
    rmSync(filler);
    appendSteer(dir, "ses_x", "load", "services/api");
    expect(parseSteer(readFileSync(steerPath(dir, "ses_x"), "utf8")).map((request) => request.path).at(-1)).toBe("services/api");
  });

  test("a record cut short by the full disk leaves no part of its line: the next record, once there is room, is whole", async () => {
    const dir = mkdtempSync(join(TINY!, "records-"));
    const project = await tempProject("monorepo");
    const plugin = await start(project.root, { recordsDir: dir });
    try {
      await plugin.touch("ses_f", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
      await plugin.step("ses_f");
      await waitFor(() => readRecords(dir, "ses_f").length >= 1, 3000, "the first record");
      const filler = fillLeaving(TINY!, 0);
      for (let i = 0; i < 8; i++) await plugin.step("ses_f"); // past the file's first page: a write fails part-way
      await plugin.dispose();
      rmSync(filler);
      const again = await start(project.root, { recordsDir: dir });
      await again.step("ses_f");
      await again.dispose();
      const lines = readFileSync(join(dir, "ses_f.jsonl"), "utf8").split("\n").filter((line) => line !== "");
      expect(lines.length).toBe(readRecords(dir, "ses_f").length);
    } finally {
      await plugin.dispose();
      await project.cleanup();
    }
  });
});
