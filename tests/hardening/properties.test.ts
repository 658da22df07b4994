/**
 * Property tests: tool calls of any shape, fed through the real hooks of a plugin loaded the way
 * OpenCode loads it, over a worktree surrounded by context files that must never be read (see
 * util.ts `sandbox`). The main run uses `watch: false` and `delivery: "system"`, so that every step
 * re-validates by stat and rebuilds its block (the most work per step); a shorter run uses the
 * default options (watcher on, stable delivery: what tool outputs get is checked as blocks too). The syscall
 * proof that nothing outside is read runs in a child process (outside-reads.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { Started } from "../helpers/harness.ts";
import { sectionPaths, start } from "../helpers/harness.ts";
import { call, toolName } from "./arbitraries.ts";
import { figures } from "./figures.ts";
import { leakedMarkers, sandbox, type Sandbox } from "./util.ts";

const RUNS = Number(process.env.HARDENING_RUNS ?? 200);
const SEED = Number(process.env.HARDENING_SEED ?? 20250505);

let box: Sandbox;
let plugin: Started;
let watching: Started;

beforeAll(async () => {
  box = await sandbox();
  // The most work per step: every directory stat'd, the block rebuilt each step.
  plugin = await start(box.repo, { watch: false, delivery: "system" });
  watching = await start(box.repo);
});

afterAll(async () => {
  await plugin.dispose();
  await watching.dispose();
  await box.cleanup();
});

/** A well-formed block: one frame, sections whose paths are relative and inside the worktree. */
function checkBlock(text: string, what: string): void {
  expect(leakedMarkers(text), `${what} leaks text from outside the worktree`).toEqual([]);
  if (text === "") return;
  expect(text.startsWith("<project-context>\n")).toBe(true);
  expect(text.endsWith("</project-context>")).toBe(true);
  expect(text.match(/<\s*\/\s*project-context\s*>/gi)?.length).toBe(1);
  for (const path of sectionPaths(text)) {
    expect(path.startsWith("/") || path === ".." || path.startsWith("../") || path.includes("/../"), `${what}: section path ${path}`).toBe(false);
  }
}

/**
 * What the plugin appended to a tool's output (stable delivery): "" when nothing. The output itself
 * may have lost OpenCode's reminder (a copy the conversation holds already), so the block is found
 * by its own framing, which the plugin always separates with a blank line.
 */
function delivered(before: string, after: string): string {
  if (after === before) return "";
  const added = after.startsWith(before) ? after.slice(before.length) : after.slice(Math.max(0, after.lastIndexOf("\n\n<project-context>\n")));
  expect(added.startsWith("\n\n<project-context>\n"), `tool output changed without a block: ${JSON.stringify(added.slice(0, 200))}`).toBe(true);
  return added.slice(2);
}

/** Error-level log entries from index `from` on: a guard that caught a throw logs one. */
const errorsSince = (from: number, of: Started = plugin) => of.logs.slice(from).filter((entry) => entry.level === "error").map((entry) => entry.message);

/**
 * fc.assert, with the report cut short: counterexamples here hold megabyte-long strings. No
 * shrinking: the plugin logs a given error once per instance, so a shrunk replay would not see it.
 */
async function check<T>(property: fc.IAsyncPropertyWithHooks<T>, params: fc.Parameters<T>): Promise<number> {
  const details = await fc.check(property, { endOnFailure: true, ...params });
  if (details.failed) {
    const cut = (text: string) => text.replace(/(.)\1{200,}/gs, (run, char: string) => `${char}…(×${run.length})`).replace(/((?:\*\*\* Update File: \.\.\/outside\/AGENTS\.md\\n){3})(?:\*\*\* Update File: \.\.\/outside\/AGENTS\.md\\n)+/g, "$1…");
    const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    throw new Error(`${cut(cause).slice(0, 3000)}\n${cut(fc.defaultReportMessage(details) ?? "property failed").slice(0, 4000)}`);
  }
  return details.numRuns;
}

describe("tool calls of any shape through the real hooks", () => {
  const sequences = (target: () => Started, numRuns: number, figure: string) => async () => {
    const plugin = target();
    const logsBefore = plugin.logs.length;
    let calls = 0;
    let slowestBefore = 0;
    let beforeTotal = 0;
    const began = performance.now();
    const runs = await check(
      fc.asyncProperty(fc.array(call(box.repo, box.parent), { minLength: 1, maxLength: 4 }), async (sequence) => {
        const logsAtStart = plugin.logs.length;
        for (const { session, tool, args, output } of sequence) {
          calls++;
          const t0 = performance.now();
          // Exactly what OpenCode passes: input { tool, sessionID, callID }, output { args }.
          await plugin.hooks["tool.execute.before"]!({ tool, sessionID: session, callID: `c${calls}` } as never, { args });
          const spent = performance.now() - t0;
          beforeTotal += spent;
          slowestBefore = Math.max(slowestBefore, spent);
          const out = { title: "", output, metadata: {} };
          await plugin.hooks["tool.execute.after"]!({ tool, sessionID: session, callID: `c${calls}`, args } as never, out);
          checkBlock(delivered(output, out.output), "tool output");
          const id = typeof session === "string" ? session : "ses_a";
          checkBlock((await plugin.step(id)) ?? "", "block");
          for (const copy of await plugin.compact(id)) checkBlock(copy, "compaction copy");
        }
        expect(errorsSince(logsAtStart, plugin)).toEqual([]);
      }),
      { numRuns, seed: SEED },
    );
    expect(errorsSince(logsBefore, plugin)).toEqual([]);
    const total = performance.now() - began;
    figures.record(figure, { runs, toolCalls: calls, ms: Math.round(total), beforeHookTotalMs: Math.round(beforeTotal), beforeHookMaxMs: +slowestBefore.toFixed(2) });
    // Loose bounds: tool.execute.before is synchronous string work (the benchmark owns the real targets).
    expect(slowestBefore).toBeLessThan(250);
    expect(beforeTotal / calls).toBeLessThan(5);
    expect(total / calls).toBeLessThan(100);
  };

  test("never throw, reject or log an error; never carry text from outside the worktree; stay fast", sequences(() => plugin, RUNS, "properties"), 60_000);
  test("the same with the default options (watcher on)", sequences(() => watching, Math.ceil(RUNS / 4), "propertiesWatching"), 30_000);

  test("hooks given malformed input and output objects do nothing and never throw", async () => {
    const junk = fc.anything({ maxDepth: 2, withNullPrototype: true, withMap: true, withBigInt: true, withTypedArray: true });
    const hookNames = ["tool.execute.before", "tool.execute.after", "experimental.chat.system.transform", "experimental.session.compacting", "event"] as const;
    const logsBefore = plugin.logs.length;
    let calls = 0;
    await check(
      fc.asyncProperty(
        fc.constantFrom(...hookNames),
        fc.oneof(junk, fc.record({ sessionID: fc.oneof(fc.constant("ses_junk"), junk), tool: toolName(), args: junk, event: junk }, { requiredKeys: [] })),
        fc.oneof(junk, fc.record({ system: junk, context: junk, args: junk, output: junk }, { requiredKeys: [] })),
        async (name, input, output) => {
          calls++;
          const hook = plugin.hooks[name] as unknown as (a: unknown, b: unknown) => Promise<void>;
          await hook(input, output);
        },
      ),
      { numRuns: RUNS * 2, seed: SEED },
    );
    figures.record("malformedHookCalls", { calls });
    expect(errorsSince(logsBefore)).toEqual([]);
  }, 30_000);

  test("the session's block still shows the worktree's own files after all that", async () => {
    await plugin.touch("ses_final", "read", { filePath: "src/deep/er/file.ts" });
    const block = (await plugin.step("ses_final")) ?? "";
    expect(sectionPaths(block)).toEqual(["AGENTS.md", "src/AGENTS.md"]);
    checkBlock(block, "block");
  });
});
