/**
 * The worst cases of the "Core v2" issue, each through the exported Plugin function on the real file
 * system: containment at read time (a directory of a known chain swapped for a symlink out, a
 * retargeted AGENTS.md symlink, a symlink in an intermediate component: proven by syscall trace too),
 * a cut that could complete the block's closing tag at every budget, linear time on the worst inputs
 * (with an event-loop stall monitor), memory and watches after 1,000 sessions, and one clear warning
 * per bad file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdir, readFile, rename, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { sectionPaths, start, tempProject, type Started } from "../helpers/harness.ts";
import { largestStall } from "../helpers/stall.ts";
import type { Event, Op } from "./child/runner.ts";
import { figures } from "./figures.ts";
import { expectIntactFrame, frameFaults } from "./frame.ts";
import { judgeTrace } from "./trace.ts";
import { runChild } from "./util.ts";

const STRACE = Bun.which("strace");
const MB = 1024 * 1024;

/** Runs a tool call as OpenCode does (before, then after) and returns the output the model gets. */
async function tool(plugin: Started, sessionID: string, name: string, args: Record<string, unknown>, result = "tool result"): Promise<string> {
  await plugin.touch(sessionID, name, args);
  const output = { title: name, output: result, metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: name, sessionID, callID: `call-${sessionID}-${Math.random()}`, args } as never, output as never);
  return output.output;
}

let messageSeq = 0;
/** Runs chat.message for a new user message; the text the plugin added ("" when none). */
async function userMessage(plugin: Started, sessionID: string): Promise<string> {
  const message = { id: `msg_${String(++messageSeq).padStart(8, "0")}`, sessionID, role: "user" };
  const parts: { id: string; type: string; text?: string }[] = [{ id: `prt_${message.id}_1`, type: "text", text: "go on" }];
  await plugin.hooks["chat.message"]!({ sessionID, agent: "build" } as never, { message, parts } as never);
  return parts.slice(1).map((part) => part.text ?? "").join("\n");
}

const errors = (plugin: Started) => plugin.logs.filter((entry) => entry.level === "error").map((entry) => entry.message);

// ---------------------------------------------------------------------------------------------
// Containment at read time.
// ---------------------------------------------------------------------------------------------

const OUTSIDE_MARK = "OUTSIDE-SWAP-MARKER-41c9";
const OUTSIDE_SUB_MARK = "OUTSIDE-SWAP-SUB-MARKER-7e02";

interface SwapBox {
  parent: string;
  repo: string;
  outside: string;
  cleanup(): Promise<void>;
}

/** A worktree whose pkg/sub chain is known to the store, and an outside tree shaped like it. */
async function swapBox(): Promise<SwapBox> {
  const { root: parent, cleanup } = await tempProject();
  const repo = join(parent, "repo");
  const outside = join(parent, "outside");
  const put = async (path: string, text: string) => {
    await mkdir(join(path, ".."), { recursive: true });
    await writeFile(path, text);
  };
  await put(join(repo, "AGENTS.md"), "# root\nROOT-RULES\n");
  await put(join(repo, "pkg", "AGENTS.md"), "# pkg\nPKG-RULES\n");
  await put(join(repo, "pkg", "sub", "AGENTS.md"), "# sub\nSUB-RULES\n");
  await put(join(repo, "pkg", "sub", "x.ts"), "");
  await put(join(repo, "targets", "a.md"), "# linked\nTARGET-A\n");
  await put(join(repo, "targets", "b.md"), "# linked\nTARGET-B\n");
  await put(join(repo, "real", "AGENTS.md"), "# real\nREAL-INSIDE\n");
  await put(join(repo, "real", "deep", "x.ts"), "");
  await mkdir(join(repo, "linked"), { recursive: true });
  await symlink("../targets/a.md", join(repo, "linked", "AGENTS.md"));
  // An intermediate component that is a symlink inside the worktree, later retargeted outside.
  await symlink("real", join(repo, "mid"));
  await put(join(outside, "AGENTS.md"), `# outside\n${OUTSIDE_MARK}\n`);
  await put(join(outside, "sub", "AGENTS.md"), `# outside sub\n${OUTSIDE_SUB_MARK}\n`);
  await put(join(outside, "sub", "x.ts"), "");
  await put(join(outside, "deep", "x.ts"), "");
  return { parent, repo, outside, cleanup };
}

const leaks = (text: string) => [OUTSIDE_MARK, OUTSIDE_SUB_MARK].filter((mark) => text.includes(mark));

describe("containment at read time: swaps and retargets mid-session", () => {
  for (const delivery of ["system", "stable"] as const) {
    test(`delivery ${delivery}: a directory of a known chain swapped (rename + symlink) for a link out never reaches the model; caught at the next step`, async () => {
      const box = await swapBox();
      const plugin = await start(box.repo, { delivery });
      try {
        const seen: string[] = [];
        const first = (await plugin.step("s")) ?? "";
        seen.push(first, await tool(plugin, "s", "read", { filePath: "pkg/sub/x.ts" }));
        const before = (await plugin.step("s")) ?? "";
        seen.push(before);
        // The chain root/pkg/sub is known (cached, watched); the model has it.
        expect(seen.join("\n")).toContain("SUB-RULES");
        // Mid-session, with real syscalls: pkg moves away, a symlink out takes its place.
        await rename(join(box.repo, "pkg"), join(box.repo, "pkg.old"));
        await symlink(box.outside, join(box.repo, "pkg"));
        // The very next step, and every hook after it.
        const next = (await plugin.step("s")) ?? "";
        seen.push(next);
        if (delivery === "system") {
          expect(next).not.toContain("SUB-RULES");
          expect(sectionPaths(next)).toEqual(["AGENTS.md"]);
        } else {
          // The frozen system block keeps its bytes (the prompt cache): it carries nothing new.
          expect(next).toBe(before);
        }
        seen.push(await tool(plugin, "s", "read", { filePath: "pkg/sub/x.ts" }));
        seen.push(await tool(plugin, "s", "edit", { filePath: join(box.repo, "pkg", "sub", "y.ts") }));
        seen.push(await tool(plugin, "s", "glob", { path: "pkg" }));
        seen.push(await userMessage(plugin, "s"));
        seen.push((await plugin.step("s")) ?? "");
        seen.push(...(await plugin.compact("s")));
        // A new session started in the swapped directory too.
        await plugin.touch("t", "read", { filePath: "pkg/sub/x.ts" });
        seen.push((await plugin.step("t")) ?? "", ...(await plugin.compact("t")));
        expect(seen.flatMap(leaks)).toEqual([]);
        for (const text of seen) if (text.includes("<project-context>")) expectIntactFrame(text.slice(text.indexOf("<project-context>")));
        expect(errors(plugin)).toEqual([]);
      } finally {
        await plugin.dispose();
        await box.cleanup();
      }
    });

    test(`delivery ${delivery}: a retargeted AGENTS.md symlink serves the new target's text at the next step`, async () => {
      const box = await swapBox();
      const plugin = await start(box.repo, { delivery });
      try {
        await plugin.touch("s", "read", { filePath: "linked/x.ts" });
        const first = (await plugin.step("s")) ?? "";
        expect(first).toContain("TARGET-A");
        // Retargeted atomically: a new link renamed over the old one.
        await symlink("../targets/b.md", join(box.repo, "linked", ".next"));
        await rename(join(box.repo, "linked", ".next"), join(box.repo, "linked", "AGENTS.md"));
        if (delivery === "system") {
          const next = (await plugin.step("s")) ?? "";
          expect(next).toContain("TARGET-B");
          expect(next).not.toContain("TARGET-A");
        } else {
          // Stable: the new text arrives with the next user message (named by the target's real path).
          const update = await userMessage(plugin, "s");
          expect(update).toContain("TARGET-B");
          expect(update).not.toContain("TARGET-A");
          expectIntactFrame(update, "update");
          expect((await plugin.step("s")) ?? "").toBe(first);
        }
        // Retargeted out of the worktree: the outside text never comes, at the next step either.
        await symlink(join(box.outside, "AGENTS.md"), join(box.repo, "linked", ".next"));
        await rename(join(box.repo, "linked", ".next"), join(box.repo, "linked", "AGENTS.md"));
        const after = [(await plugin.step("s")) ?? "", await userMessage(plugin, "s"), await tool(plugin, "s", "read", { filePath: "linked/y.ts" }), ...(await plugin.compact("s"))];
        expect(after.flatMap(leaks)).toEqual([]);
        if (delivery === "system") expect(after[0]).not.toContain("TARGET-B");
        expect(plugin.logs.filter((entry) => entry.level === "warn" && entry.message.includes(join(box.repo, "linked", "AGENTS.md")) && /outside the worktree/.test(entry.message))).toHaveLength(1);
        expect(errors(plugin)).toEqual([]);
      } finally {
        await plugin.dispose();
        await box.cleanup();
      }
    });

    test(`delivery ${delivery}: a symlink in an intermediate component, retargeted out, is caught at the next step`, async () => {
      const box = await swapBox();
      const plugin = await start(box.repo, { delivery });
      try {
        await plugin.touch("s", "read", { filePath: "mid/deep/x.ts" });
        const first = (await plugin.step("s")) ?? "";
        // Inside the worktree: followed, named by its real path.
        expect(first).toContain("REAL-INSIDE");
        await symlink(box.outside, join(box.repo, ".mid"));
        await rename(join(box.repo, ".mid"), join(box.repo, "mid"));
        const after = [(await plugin.step("s")) ?? "", await userMessage(plugin, "s"), await tool(plugin, "s", "read", { filePath: "mid/deep/x.ts" }), await tool(plugin, "s", "read", { filePath: "mid/sub/x.ts" }), ...(await plugin.compact("s"))];
        expect(after.flatMap(leaks)).toEqual([]);
        expect(errors(plugin)).toEqual([]);
      } finally {
        await plugin.dispose();
        await box.cleanup();
      }
    });
  }

  test.skipIf(STRACE === null)("syscall trace: across the swaps no byte of the outside is read (both delivery modes, watcher on)", async () => {
    const runs = await Promise.all(
      (["system", "stable"] as const).map(async (delivery) => {
        const box = await swapBox();
        const ops: Op[] = [
          { op: "touch", session: "s", tool: "read", args: { filePath: "pkg/sub/x.ts" } },
          { op: "touch", session: "s", tool: "read", args: { filePath: "linked/x.ts" } },
          { op: "touch", session: "s", tool: "read", args: { filePath: "mid/deep/x.ts" } },
          { op: "step", session: "s" },
          { op: "rename", from: "pkg", to: "pkg.old" },
          { op: "symlink", target: box.outside, path: "pkg" },
          { op: "symlink", target: join(box.outside, "AGENTS.md"), path: "linked/.next" },
          { op: "rename", from: "linked/.next", to: "linked/AGENTS.md" },
          { op: "symlink", target: box.outside, path: ".mid" },
          { op: "rename", from: ".mid", to: "mid" },
          { op: "step", session: "s" },
          { op: "message", session: "s" },
          { op: "touch", session: "s", tool: "read", args: { filePath: "pkg/sub/x.ts" } },
          { op: "after", session: "s", tool: "read", args: { filePath: "pkg/sub/x.ts" } },
          { op: "touch", session: "s", tool: "read", args: { filePath: "mid/sub/x.ts" } },
          { op: "after", session: "s", tool: "read", args: { filePath: "mid/sub/x.ts" } },
          { op: "step", session: "s" },
          { op: "compact", session: "s" },
          { op: "dispose" },
        ];
        const trace = join(box.parent, "trace.txt");
        const TRACED = "openat,open,openat2,read,pread64,readv,preadv,preadv2,getdents64,mmap,sendfile,copy_file_range,splice";
        const run = await runChild({ root: box.repo, options: { delivery }, ops }, { prefix: [STRACE!, "-f", "-y", "-qq", "-s", "256", "-o", trace, "-e", `trace=${TRACED}`], timeoutMs: 30_000 });
        const log = await readFile(trace, "utf8");
        await box.cleanup();
        return { delivery, run, verdict: judgeTrace(log, { parent: box.parent, repo: box.repo }), box };
      }),
    );
    for (const { run, verdict, box } of runs) {
      expect(run.stderr).toBe("");
      expect(run.exitCode).toBe(0);
      const events = run.report!.events;
      expect(events.filter((event) => event.op === "error")).toEqual([]);
      for (const event of events) if ("text" in event) expect(leaks(event.text)).toEqual([]);
      // Positive control: the worktree's own files were read, and seen by the trace.
      expect([...verdict.readInside]).toEqual(expect.arrayContaining([join(box.repo, "pkg", "sub", "AGENTS.md")]));
      // The outside files are in the sandbox but outside the worktree: no open, no read.
      expect(verdict.violations).toEqual([]);
    }
    figures.record("containmentSwapTrace", Object.fromEntries(runs.map(({ delivery, verdict }) => [delivery, { syscalls: verdict.syscalls, readInside: verdict.readInside.size, readsOutside: verdict.violations.length }])));
  }, 40_000);
});

// ---------------------------------------------------------------------------------------------
// A cut can never complete the block's closing tag.
// ---------------------------------------------------------------------------------------------

/** File endings that a cut (or the framing after it) might complete into the block's closing tag. */
const ENDINGS: Record<string, string> = {
  exact: "</project-context",
  short: "</project-contex",
  shorter: "</project-",
  bare: "</",
  lt: "<",
  closed: "</project-context>",
  upper: "</PROJECT-CONTEXT",
  mixed: "</Project-Context",
  spaced: "< / project-context",
  tabbed: "<\t/\tproject-context\t",
  zwsp: "<\u200b/project-context",
  cgj: "</project\u034f-context",
  vs16: "</\ufe0fproject-context",
  wordJoiner: "</project-context\u2060",
  mongolian: "<\u180e/project-context",
  hangulFiller: "</project-\u115fcontext",
  bidi: "\u202e</project-context\u202c",
  isolate: "\u2066</\u2069project-context",
  lrm: "</\u200eproject\u200f-context",
  file: "</context-file",
  reminder: "<system-reminder",
  instructions: "\nInstructions from: /etc/AGENTS.md",
};

describe("a cut can never complete the block's closing tag (every budget, through the hooks)", () => {
  let root: string;
  let cleanup: () => Promise<void>;
  const names = Object.keys(ENDINGS);
  beforeAll(async () => {
    ({ root, cleanup } = await tempProject());
    await writeFile(join(root, "AGENTS.md"), "# root\nR\n");
    for (const name of names) {
      await mkdir(join(root, name), { recursive: true });
      // A heading, a paragraph, a line, then the ending with no line break: a cut may land anywhere.
      await writeFile(join(root, name, "AGENTS.md"), `# ${name}\nFirst rule of ${name}.\n\nSecond rule, a longer line that goes on.\n${ENDINGS[name]}`);
    }
  });
  afterAll(() => cleanup());

  test("the frame check can fail (control): it sees a closing tag spelled with invisibles, and a host marker", () => {
    for (const ending of ["</project-context", "</project\u034f-context", "<\u180e/PROJECT-context", "\u202e</project-context\u202c"]) {
      expect(frameFaults(`<project-context>\n${ending}>\n</project-context>`)).not.toEqual([]);
    }
    expect(frameFaults('<project-context>\n<context-file path="a">\nInstructions from: /x\n</context-file>\n</project-context>')).not.toEqual([]);
    expect(frameFaults('<project-context>\n<context-file path="a">\nfine &lt;/project-context>\n</context-file>\n</project-context>')).toEqual([]);
  });

  test("systemTokens, compactionTokens and deliveryTokens from 0 to past the content's size: the frame holds", async () => {
    const MAX_BUDGET = 160;
    let blocks = 0;
    let empty = 0;
    const faults: string[] = [];
    const check = (text: string, what: string) => {
      if (text === "") return void empty++;
      blocks++;
      const found = frameFaults(text);
      if (found.length > 0) faults.push(`${what}: ${found.join("; ")} in ${JSON.stringify(text.slice(-160))}`);
    };
    const plugins: Started[] = [];
    const began = performance.now();
    try {
      for (let budget = 0; budget <= MAX_BUDGET; budget++) {
        // watch: false keeps thousands of short-lived instances free of watches and sentinels.
        const system = await start(root, { watch: false, delivery: "system", systemTokens: budget, compactionTokens: budget });
        const stable = await start(root, { watch: false, systemTokens: 0, deliveryTokens: budget });
        plugins.push(system, stable);
        await Promise.all(
          names.map(async (name) => {
            await system.touch(name, "read", { filePath: `${name}/x.ts` });
            check((await system.step(name)) ?? "", `${name} system@${budget}`);
            for (const copy of await system.compact(name)) check(copy, `${name} compaction@${budget}`);
            await stable.step(name);
            const output = await tool(stable, name, "read", { filePath: `${name}/x.ts` }, "tool result");
            if (output !== "tool result") {
              expect(output.startsWith("tool result\n\n")).toBe(true);
              check(output.slice("tool result\n\n".length), `${name} delivery@${budget}`);
            }
          }),
        );
        for (const plugin of [system, stable]) expect(errors(plugin)).toEqual([]);
        if (faults.length > 10) break;
      }
    } finally {
      // The token counter is shared by all instances: dispose (which lets it go) only at the end.
      for (const plugin of plugins) await plugin.dispose();
    }
    figures.record("closingTagCuts", { endings: names.length, budgets: MAX_BUDGET + 1, blocks, empty, ms: Math.round(performance.now() - began) });
    expect(faults).toEqual([]);
    // The sweep really cut: most budgets produced a block.
    expect(blocks).toBeGreaterThan(names.length * MAX_BUDGET);
  }, 90_000);
});

// ---------------------------------------------------------------------------------------------
// Linear time.
// ---------------------------------------------------------------------------------------------

/** Watches the event loop: the longest gap between ticks of a 2 ms interval while it runs. */
function stallMonitor(): { stop(): number } {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 2);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(worst, performance.now() - last);
    },
  };
}

describe("linear time on the worst inputs (through the hooks)", () => {
  let root: string;
  let cleanup: () => Promise<void>;
  const INPUTS: Record<string, string> = {
    spaces96k: `# ws\n${" ".repeat(96 * 1024)}\nEND\n`,
    whitespace64k: `# ws\n${" \t".repeat(32 * 1024)}x\n`,
    zeroWidth: `# zw\n<${"\u200b".repeat(24_000)}/project-context>\n`,
    longLine: `# line\n${"abcdefgh".repeat(16 * 1024)}\n`,
    emptyLines: `# empty\n${"\n".repeat(128 * 1024)}`,
    nested: `# nest\n${"> ".repeat(20_000)}x\n${"- ".repeat(20_000)}y\n`,
  };
  beforeAll(async () => {
    ({ root, cleanup } = await tempProject());
    await writeFile(join(root, "AGENTS.md"), "# root\nR\n");
    await mkdir(join(root, "warm"), { recursive: true });
    await writeFile(join(root, "warm", "AGENTS.md"), `# warm\n${"warm the counter up. ".repeat(3000)}\n`);
    for (const [name, text] of Object.entries(INPUTS)) {
      await mkdir(join(root, name), { recursive: true });
      await writeFile(join(root, name, "AGENTS.md"), text);
    }
  });
  afterAll(() => cleanup());

  test("64-128 KB whitespace runs, zero-width runs, a 128 KB line, 128K empty lines: each step well under a second, no stall over 100 ms", async () => {
    const system = await start(root, { delivery: "system" });
    const stable = await start(root);
    const timings: Record<string, Record<string, number>> = {};
    try {
      // The token counter's process start is not what is measured here.
      await system.touch("warm", "read", { filePath: "warm/x.ts" });
      await system.step("warm");
      for (const name of Object.keys(INPUTS)) {
        const monitor = stallMonitor();
        const t0 = performance.now();
        await system.touch(name, "read", { filePath: `${name}/x.ts` });
        const block = (await system.step(name)) ?? "";
        const t1 = performance.now();
        const copies = await system.compact(name);
        const t2 = performance.now();
        await stable.step(name);
        const output = await tool(stable, name, "read", { filePath: `${name}/x.ts` });
        const t3 = performance.now();
        const stall = monitor.stop();
        timings[name] = { stepMs: Math.round(t1 - t0), compactMs: Math.round(t2 - t1), deliveryMs: Math.round(t3 - t2), worstStallMs: Math.round(stall) };
        expectIntactFrame(block, `${name} block`);
        for (const copy of copies) expectIntactFrame(copy, `${name} compaction`);
        expect(output).toContain(`<context-file path="${name}/AGENTS.md"`);
        expectIntactFrame(output.slice(output.indexOf("<project-context>")), `${name} delivery`);
      }
    } finally {
      await system.dispose();
      await stable.dispose();
    }
    figures.record("worstInputs", timings);
    for (const [name, t] of Object.entries(timings)) {
      expect({ name, stepUnder500: t.stepMs! < 500, compactUnder500: t.compactMs! < 500, deliveryUnder500: t.deliveryMs! < 500, stallUnder100: t.worstStallMs! < 100 }).toEqual({
        name,
        stepUnder500: true,
        compactUnder500: true,
        deliveryUnder500: true,
        stallUnder100: true,
      });
    }
  }, 30_000);
});

describe("one tool call's paths cannot stall the event loop (found by a hunt)", () => {
  // 64 paths (the per-call cap of host/tool-paths.ts), each under its 4,096-character cap. Before the
  // fix, where each walk starts was found by climbing one level at a time, two syscalls a level, each
  // walking the whole path again: 2.1 s and 0.95 s of one blocked step.
  const PATHS: Record<string, (i: number) => string> = {
    "through a `loops/here -> .` symlink 810 times": (i) => `loops/${"here/".repeat(810)}f${i}.ts`,
    "2,040 missing directory levels deep": (i) => `${"x/".repeat(2040)}f${i}.ts`,
  };
  for (const [shape, pathOf] of Object.entries(PATHS)) {
    test(`64 paths ${shape}: the next step stalls the loop less than 250 ms, the root file still delivered`, async () => {
      const { root, cleanup } = await tempProject();
      await writeFile(join(root, "AGENTS.md"), "# root\nROOT-RULES\n");
      await mkdir(join(root, "loops"));
      await symlink(".", join(root, "loops", "here"));
      const plugin = await start(root, { delivery: "system", records: false });
      try {
        await plugin.step("s");
        await plugin.touch("s", "multiedit", { files: Array.from({ length: 64 }, (_, i) => pathOf(i)) });
        const { stallMs, result } = await largestStall(() => plugin.step("s"));
        expect(result ?? "").toContain("ROOT-RULES");
        // The worst file contents above stall 2-3 ms; the margin is for a loaded machine.
        expect(stallMs).toBeLessThan(250);
        expect(errors(plugin)).toEqual([]);
      } finally {
        await plugin.dispose();
        await cleanup();
      }
    }, 60_000);
  }
});

// ---------------------------------------------------------------------------------------------
// Memory and watches after 1,000 sessions.
// ---------------------------------------------------------------------------------------------

describe("1,000 sessions created, stepped and deleted", () => {
  test("the heap ends within 5 MB of where it started and no watch is left but the barrier's", async () => {
    const { root, cleanup } = await tempProject();
    try {
      await writeFile(join(root, "AGENTS.md"), "# root\nROOT\n");
      const dirs = Array.from({ length: 12 }, (_, i) => `pkg${i % 4}/mod${i}`);
      for (const dir of dirs) {
        await mkdir(join(root, dir), { recursive: true });
        await writeFile(join(root, dir, "AGENTS.md"), `# ${dir}\n${`rules of ${dir}. `.repeat(40)}\n`);
        await writeFile(join(root, dir.split("/")[0]!, "AGENTS.md"), `# ${dir.split("/")[0]}\nPKG\n`);
      }
      const pick = (i: number) => [dirs[i % 12]!, dirs[(i * 7 + 3) % 12]!, dirs[(i * 5 + 1) % 12]!];
      const ops: Op[] = [
        { op: "inotify" },
        // Warm up: every lazily loaded part (token counter, frontmatter parser, caches) in place.
        { op: "churn", sessions: 50, dirs: pick(0), prefix: "warm-" },
        { op: "churn", sessions: 50, dirs: pick(1), prefix: "warm2-" },
        { op: "memory" },
        // A deleted session's watches go in slices, in the background: bounded waits for them to go.
        { op: "waitWatches", max: 1, timeoutMs: 3000 },
      ];
      for (let block = 0; block < 10; block++) ops.push({ op: "churn", sessions: 100, dirs: pick(block + 2), prefix: `s${block}-` });
      // A live session holds watches (the positive control), and lets them go when deleted.
      for (const dir of dirs) ops.push({ op: "touch", session: "live", tool: "read", args: { filePath: `${dir}/x.ts` } });
      ops.push({ op: "step", session: "live" }, { op: "waitWatches", min: 10, timeoutMs: 3000 }, { op: "delete", session: "live" });
      ops.push({ op: "memory" }, { op: "waitWatches", max: 1, timeoutMs: 3000 }, { op: "dispose" }, { op: "inotify" });
      const run = await runChild({ root, ops }, { timeoutMs: 60_000 });
      expect(run.stderr).toBe("");
      expect(run.exitCode).toBe(0);
      const events = run.report!.events;
      expect(events.filter((event) => event.op === "error")).toEqual([]);
      expect(run.report!.logs.filter((entry) => entry.level === "error")).toEqual([]);
      const memory = events.filter((event): event is Extract<Event, { op: "memory" }> => event.op === "memory");
      const watches = events.filter((event): event is Extract<Event, { op: "inotify" }> => event.op === "inotify").map((event) => event.watches);
      const [atStart, warmed, live, afterAll_, disposed] = watches;
      const heapGrowth = memory[1]!.heapUsed - memory[0]!.heapUsed;
      figures.record("thousandSessions", { heapGrowthBytes: heapGrowth, rssGrowthBytes: memory[1]!.rss - memory[0]!.rss, watches: { atStart, warmed, live, afterAll: afterAll_, disposed }, childMs: Math.round(run.ms) });
      expect(live).toBeGreaterThanOrEqual(10);
      // Deleted sessions hold nothing: only the barrier's own watch (one) may stay until dispose.
      expect(warmed).toBeLessThanOrEqual(1);
      expect(afterAll_).toBeLessThanOrEqual(1);
      expect(disposed).toBe(0);
      expect(heapGrowth).toBeLessThan(5 * MB);
    } finally {
      await cleanup();
    }
  }, 90_000);
});

// ---------------------------------------------------------------------------------------------
// Bad input: one clear warning naming the file and what was wrong.
// ---------------------------------------------------------------------------------------------

describe("bad input gets one clear warning, never a throw", () => {
  for (const delivery of ["system", "stable"] as const) {
    test(`delivery ${delivery}: binary, invalid UTF-8, invalid frontmatter, symlink out: one warning each, naming the file and the fault`, async () => {
      const { root: parent, cleanup } = await tempProject();
      const root = join(parent, "repo");
      try {
        const put = async (path: string, data: string | Uint8Array) => {
          await mkdir(join(root, path, ".."), { recursive: true });
          await writeFile(join(root, path), data);
        };
        await put("AGENTS.md", "# root\nROOT\n");
        await put("bin/AGENTS.md", new Uint8Array([0x23, 0x20, 0x62, 0x00, 0x01, 0x02, 0x0a]));
        await put("utf/AGENTS.md", new Uint8Array([0x23, 0x20, 0xc3, 0x28, 0xff, 0x0a]));
        await put("fm/AGENTS.md", "---\nroot: [unclosed\n---\nFM-BODY\n");
        await put(join("..", "secret", "AGENTS.md"), "SECRET-OUTSIDE\n");
        await mkdir(join(root, "out"), { recursive: true });
        await symlink(join(parent, "secret", "AGENTS.md"), join(root, "out", "AGENTS.md"));
        const plugin = await start(root, { delivery });
        const seen: string[] = [];
        try {
          for (let round = 0; round < 5; round++) {
            for (const dir of ["bin", "utf", "fm", "out"]) {
              const session = `${dir}-${round % 2}`;
              await plugin.touch(session, "read", { filePath: `${dir}/x.ts` });
              seen.push((await plugin.step(session)) ?? "", await tool(plugin, session, "read", { filePath: `${dir}/y.ts` }), await userMessage(plugin, session));
            }
          }
        } finally {
          await plugin.dispose();
        }
        expect(seen.join("\n")).not.toContain("SECRET-OUTSIDE");
        expect(seen.join("\n")).toContain("FM-BODY");
        expect(errors(plugin)).toEqual([]);
        const warnings = plugin.logs.filter((entry) => entry.level === "warn").map((entry) => entry.message);
        const about = (file: string, what: RegExp) => warnings.filter((message) => message.includes(join(root, file)) && what.test(message));
        expect(about("bin/AGENTS.md", /binary/)).toHaveLength(1);
        expect(about("utf/AGENTS.md", /not valid UTF-8/)).toHaveLength(1);
        expect(about("fm/AGENTS.md", /frontmatter/)).toHaveLength(1);
        expect(about("out/AGENTS.md", /outside the worktree/)).toHaveLength(1);
        // Nothing else about these files: one warning each, however many steps and sessions.
        expect(warnings.filter((message) => /(bin|utf|fm|out)\/AGENTS\.md/.test(message))).toHaveLength(4);
      } finally {
        await cleanup();
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Regressions found while writing these tests.
// ---------------------------------------------------------------------------------------------

describe("a touched path the file system refuses to look at does not break other steps", () => {
  // The same fault as EACCES on a directory below an unreadable one: faults.test.ts, "permission denied".
  test("a touched name over 255 bytes (ENAMETOOLONG): no error, every session keeps its block", async () => {
    const { root, cleanup } = await tempProject();
    const plugin = await start(root, { delivery: "system" });
    try {
      await writeFile(join(root, "AGENTS.md"), "# root\nROOT-RULES\n");
      await plugin.touch("long", "read", { filePath: `${"x".repeat(300)}/y.ts` });
      expect((await plugin.step("long")) ?? "").toContain("ROOT-RULES");
      expect((await plugin.step("other")) ?? "").toContain("ROOT-RULES");
      expect(errors(plugin)).toEqual([]);
    } finally {
      await plugin.dispose();
      await cleanup();
    }
  });
});
