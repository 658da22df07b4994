/**
 * `dispose` closes every watcher and timer: a child process loads the plugin the way OpenCode does,
 * uses it (touches, steps, a file change seen through the watcher, a compaction), disposes it and
 * then simply returns from its script. It must exit on its own, promptly, and hold no inotify watch
 * once disposed (read from /proc/self/fdinfo in the child: the kernel's own count, not the plugin's).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { tempProject } from "../helpers/harness.ts";
import type { Event, Op } from "./child/runner.ts";
import { figures } from "./figures.ts";
import { runChild } from "./util.ts";

/** A disposed plugin must let its process go at once; a leaked ref'd timer or handle would hold it. */
const EXIT_WITHIN_MS = 2000;

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ root, cleanup } = await tempProject());
  await writeFile(join(root, "AGENTS.md"), "# root\nROOT-V1\n");
  for (const dir of ["a", "a/b", "c", "d/e/f", "huge"]) {
    await mkdir(join(root, dir), { recursive: true });
    await writeFile(join(root, dir, "AGENTS.md"), `# ${dir}\n${dir.toUpperCase()}-V1\n`);
  }
  const made = Bun.spawnSync(["sh", "-c", "seq 1 20000 | sed 's/$/.ts/' | xargs touch"], { cwd: join(root, "huge") });
  expect(made.exitCode).toBe(0);
});
afterAll(() => cleanup());

const inotify = (events: Event[]) => events.filter((event): event is Extract<Event, { op: "inotify" }> => event.op === "inotify");

/**
 * Touch, step, see an outside edit through the watcher alone (no tool call in between), compact:
 * the plugin fully in use. Stable delivery (the default): the edit to a file of the frozen system
 * block arrives as its new text on the next user message (chat.message), seen by fs.watch + barrier.
 */
const use = (session: string, file: string): Op[] => [
  { op: "touch", session, tool: "read", args: { filePath: "a/b/x.ts" } },
  { op: "touch", session, tool: "glob", args: { path: "d/e/f" } },
  { op: "touch", session, tool: "bash", args: { workdir: join(root, "c") } },
  { op: "touch", session, tool: "write", args: { filePath: "new/dir/x.ts" } },
  { op: "step", session },
  { op: "write", path: file, text: `# edited\nEDITED-BY-${session}\n` },
  { op: "stepUntil", session, contains: `EDITED-BY-${session}`, timeoutMs: 5000, via: "message" },
  { op: "compact", session },
];

describe("dispose", () => {
  test.concurrent("a process that loads, uses and disposes the plugin exits on its own, with no inotify watch left", async () => {
    const run = await runChild(
      {
        root,
        ops: [
          ...use("s1", "a/b/AGENTS.md"),
          ...use("s2", "d/e/f/AGENTS.md"),
          { op: "after", session: "s1", tool: "edit", args: { filePath: "a/b/AGENTS.md" } },
          { op: "inotify" },
          { op: "dispose" },
          { op: "inotify" },
          // Hooks called after dispose (OpenCode may race a last event): no error, no new watch.
          { op: "touch", session: "s3", tool: "read", args: { filePath: "c/x.ts" } },
          { op: "step", session: "s3" },
          { op: "write", path: "c/AGENTS.md", text: "# c\nC-V2\n" },
          { op: "inotify" },
        ],
      },
      { timeoutMs: 15_000 },
    );
    expect(run.stderr).toBe("");
    expect(run.exitCode).toBe(0);
    const events = run.report!.events;
    expect(events.filter((event) => event.op === "error")).toEqual([]);
    const seen = events.filter((event): event is Extract<Event, { op: "stepUntil" }> => event.op === "stepUntil");
    expect(seen.map((event) => event.ok)).toEqual([true, true]);
    const [inUse, disposed, afterwards] = inotify(events);
    // The watcher really was watching (the positive control) …
    expect(inUse!.watches).toBeGreaterThan(0);
    // … and dispose removed every watch; hooks called later add none.
    expect(disposed!.watches).toBe(0);
    expect(afterwards!.watches).toBe(0);
    expect(run.report!.logs.filter((entry) => entry.level === "error")).toEqual([]);
    figures.record("dispose", {
      watchesInUse: inUse!.watches,
      watchesAfterDispose: disposed!.watches,
      exitAfterReportMs: Math.round(run.exitAfterReportMs ?? -1),
      childMs: Math.round(run.ms),
    });
    expect(run.exitAfterReportMs).toBeDefined();
    expect(run.exitAfterReportMs!).toBeLessThan(EXIT_WITHIN_MS);
  }, 20_000);

  test.concurrent("no timer outlives dispose, even one started by a directory scan still under way", async () => {
    // chokidar throttles each directory read with a 1 s timer that is cleared when the read ends;
    // its close() destroys a read under way but forgets that timer (REQUEST R6), which then holds the
    // process for up to a second. With the watcher running, a step that reaches a 20,000-entry
    // directory starts its read, and a dispose right after lands in the middle of it.
    const script = {
      root,
      ops: [
        { op: "touch", session: "s6", tool: "read", args: { filePath: "a/x.ts" } },
        { op: "step", session: "s6" },
        { op: "waitWatches", min: 2, timeoutMs: 5000 },
        { op: "touch", session: "s6", tool: "read", args: { filePath: "huge/x.ts" } },
        { op: "step", session: "s6" },
        { op: "dispose" },
      ] satisfies Op[],
    };
    const runs = await Promise.all([1, 2, 3].map(() => runChild(script, { timeoutMs: 15_000 })));
    for (const run of runs) {
      expect(run.stderr).toBe("");
      expect(run.exitCode).toBe(0);
    }
    const exits = runs.map((run) => Math.round(run.exitAfterReportMs ?? -1));
    if (process.env.HARDENING_DEBUG) console.log(exits, runs.map((run) => JSON.stringify(inotify(run.report!.events))));
    figures.record("disposeMidScan", { exitAfterReportMs: exits });
    expect(Math.max(...exits)).toBeLessThan(400);
  }, 30_000);

  test.concurrent("the same process without dispose still exits on its own: the plugin never holds OpenCode open", async () => {
    const run = await runChild({ root, ops: [...use("s4", "c/AGENTS.md"), { op: "inotify" }] }, { timeoutMs: 15_000 });
    expect(run.stderr).toBe("");
    expect(run.exitCode).toBe(0);
    expect(inotify(run.report!.events)[0]!.watches).toBeGreaterThan(0);
    expect(run.exitAfterReportMs!).toBeLessThan(EXIT_WITHIN_MS);
  }, 20_000);

  test.concurrent("dispose while a session is being restored from a slow history read does not hold the process", async () => {
    // Every history read hangs. The first step waits out the plugin's history timeout (3 s) and so
    // loads everything lazily loaded (tokenizer…); then a new session's restore is left pending, with
    // its timeout timer armed, and the plugin disposed: that timer must not hold the process.
    const run = await runChild(
      {
        root,
        ops: [
          { op: "step", session: "s0" },
          { op: "touch", session: "s5", tool: "read", args: { filePath: "a/x.ts" } },
          { op: "stepNoWait", session: "s5" },
          { op: "dispose" },
        ],
      },
      // Read by runner.ts: the client's session.messages never answers.
      { timeoutMs: 15_000, env: { HARDENING_HANGING_HISTORY: "1" } },
    );
    expect(run.stderr).toBe("");
    expect(run.exitCode).toBe(0);
    const first = run.report!.events[0];
    expect(first?.op === "step" ? first.ms : 0).toBeGreaterThanOrEqual(2900);
    figures.record("disposeHangingHistory", { exitAfterReportMs: Math.round(run.exitAfterReportMs ?? -1) });
    expect(run.exitAfterReportMs!).toBeLessThan(1500);
  }, 20_000);
});
