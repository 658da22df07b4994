import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { clearDocs, compose, docOf } from "../../plugin/block/compose.ts";
import { disposeTokens, tokenStats } from "../../plugin/block/tokens.ts";
import type { FileVersion } from "../../plugin/files/contained.ts";
import { recordingLogger } from "../files/helpers.ts";

/** A context file version as the store makes them (the text is what matters here; each test its own numbers). */
const version = (i: number, body = `# Package ${i}\n\n- rule ${i}: keep the tests green.\n`): FileVersion =>
  Object.freeze({ path: `/w/p${i}/AGENTS.md`, dir: `/w/p${i}`, rel: `p${i}/AGENTS.md`, raw: body, body, frontmatter: {}, root: false, sha256: `sha${i}`, size: body.length, truncated: false, mtimeMs: 0 });

describe("a block with no file", () => {
  test("is empty exactly when there is no notice and no deletion to tell, for every kind; else it tells each", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("system" as const, "delivery" as const, "compaction" as const),
        fc.array(fc.stringMatching(/^[a-z][a-z ]{0,20}$/), { maxLength: 2 }),
        fc.array(fc.stringMatching(/^[a-z]{1,8}\/AGENTS\.md$/), { maxLength: 2 }),
        fc.boolean(),
        async (kind, notices, deleted, updated) => {
          const extras = { notices, deleted, ...(updated ? { updated: new Set(["x"]) } : {}) };
          const { text, tokens, entries } = await compose(kind, [], 8000, recordingLogger(), extras);
          expect(entries).toEqual([]);
          if (notices.length === 0 && deleted.length === 0) {
            expect(text).toBe("");
            expect(tokens).toBe(0);
          } else {
            for (const said of [...notices, ...deleted]) expect(text).toContain(said);
            expect(tokens).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("exact counts asked for in slices", () => {
  test("a counter that dies while 800 files are asked for: no block this time, said once, and nothing unhandled", async () => {
    await disposeTokens();
    const words = ["keep", "tests", "green", "module", "imports", "sorted", "before", "commit"];
    const items = Array.from({ length: 800 }, (_, i) => {
      const lines = Array.from({ length: 120 }, (_, j) => `- ${words[(i + j) % 8]} rule ${i}.${j} ${Math.random().toString(36).slice(2)}\n`);
      return { file: version(i, lines.join("")), tier: 0 };
    });
    const log = recordingLogger();
    const composing = compose("compaction", items, 1000, log);
    for (const until = performance.now() + 5000; tokenStats().pid === undefined && performance.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 1));
    process.kill(tokenStats().pid!, "SIGKILL");
    const composed = await composing;
    expect(composed).toMatchObject({ text: "", failed: true });
    expect(log.lines.filter((line) => line.message.includes("could not count tokens"))).toHaveLength(1);
    // Counts asked for after the kill started a new counter: let go of it (other files expect none).
    await disposeTokens();
  });
});

describe("the units kept in memory", () => {
  test("deliveries, which show each file once, leave the units of the latest few only (256 were kept for them: about 5 MiB of the RSS benchmark)", async () => {
    clearDocs();
    const files = Array.from({ length: 100 }, (_, i) => version(4000 + i));
    const made: (readonly string[])[] = [];
    for (const file of files) {
      await compose("delivery", [{ file, tier: 0 }], 6000, recordingLogger());
      made.push(docOf(file).units);
    }
    // The latest are kept (the same arrays), the first ones were let go and are made again on demand, equal.
    expect(docOf(files[99]!).units).toBe(made[99]!);
    const again = docOf(files[0]!).units;
    expect(again).not.toBe(made[0]!);
    expect(again).toEqual(made[0]!);
  });

  test("a system block, made again at every step with delivery \"system\", keeps the units of every file it shows, however many", async () => {
    clearDocs();
    const items = Array.from({ length: 300 }, (_, i) => ({ file: version(1000 + i), tier: 0 }));
    const first = await compose("system", items, 100_000, recordingLogger());
    expect(first.entries.filter((entry) => entry.state === "whole")).toHaveLength(300);
    const made = items.map(({ file }) => docOf(file).units);
    const second = await compose("system", items, 100_000, recordingLogger());
    expect(second.text).toBe(first.text);
    items.forEach(({ file }, i) => expect(docOf(file).units).toBe(made[i]!));
  });
});

describe("the units kept in memory, several sessions (found in review)", () => {
  test('two sessions of delivery "system" whose blocks alternate (a subagent beside its parent) keep the units of both blocks', async () => {
    clearDocs();
    const big = Array.from({ length: 100 }, (_, i) => ({ file: version(2000 + i), tier: 0 }));
    const small = Array.from({ length: 10 }, (_, i) => ({ file: version(3000 + i), tier: 0 }));
    await compose("system", big, 100_000, recordingLogger(), { owner: "ses_parent" });
    const made = big.map(({ file }) => docOf(file).units);
    await compose("system", small, 100_000, recordingLogger(), { owner: "ses_child" });
    await compose("system", big, 100_000, recordingLogger(), { owner: "ses_parent" });
    // The small block must not shrink the room to its own size: the big one's units would be made again at each of its steps.
    big.forEach(({ file }, i) => expect(docOf(file).units).toBe(made[i]!));
  });
});
