import { describe, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { condense } from "../plugin/condense.ts";
import { projects, sectionPaths } from "./helpers/harness.ts";
import { lines, measure, section, tokenizer } from "./helpers/measure.ts";

const open = projects();

describe("condense", () => {
  test("keeps the given order and cuts the first file that does not fit, marked (truncated)", () => {
    const sections = ["near", "mid", "far"].map((label) => section(`${label}/AGENTS.md`, lines(label, 100)));
    const copy = condense(sections, 1000, measure);
    expect(tokenizer.count(copy)).toBeLessThanOrEqual(1000);
    expect(sectionPaths(copy)).toEqual(["near/AGENTS.md", "mid/AGENTS.md"]);
    expect(copy).toContain("near rule 99");
    expect(copy).toContain("(truncated)");
    expect(copy).not.toContain("far rule");
  });
});

describe("condense with many files", () => {
  test("hundreds of files still fill the budget with the closest ones, within it", () => {
    const sections = Array.from({ length: 600 }, (_, i) => section(`d${i}/AGENTS.md`, lines(`f${i}`, 3 + (i % 40))));
    const copy = condense(sections, 1000, measure);
    expect(tokenizer.count(copy)).toBeLessThanOrEqual(1000);
    expect(tokenizer.count(copy)).toBeGreaterThan(800);
    expect(sectionPaths(copy).slice(0, 3)).toEqual(["d0/AGENTS.md", "d1/AGENTS.md", "d2/AGENTS.md"]);
    expect(copy).toContain("(truncated)");
  });
});

describe("the compacting hook", () => {
  test("pushes the closest file first, then its parents, within compactionTokens", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    const [copy] = await plugin.compact("s");
    expect(sectionPaths(copy)).toEqual(["services/api/plugins/payments/AGENTS.md", "services/api/AGENTS.md", "AGENTS.md"]);
    expect(tokenizer.count(copy!)).toBeLessThanOrEqual(1000);
  });

  test("over compactionTokens the copy is cut with a visible (truncated) marker", async () => {
    const plugin = await open("monorepo");
    const root = plugin.root;
    await writeFile(join(root, "services/api/AGENTS.md"), lines("api", 400));
    await plugin.touch("s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    const [copy] = await plugin.compact("s");
    expect(tokenizer.count(copy!)).toBeLessThanOrEqual(1000);
    expect(copy).toContain("Amounts are integers in minor units");
    expect(copy).toContain("api rule 0");
    expect(copy).toContain("(truncated)");
    expect(copy).not.toContain("# Acme monorepo");
  });

  test("honours a smaller compactionTokens", async () => {
    const plugin = await open("monorepo", { compactionTokens: 120 });
    await plugin.touch("s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    const [copy] = await plugin.compact("s");
    expect(tokenizer.count(copy!)).toBeLessThanOrEqual(120);
    expect(copy).toContain("(truncated)");
  });

  test("the session keeps its touched paths through compaction: the next step injects the same block", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    const before = await plugin.step("s");
    await plugin.compact("s");
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } as never });
    expect(await plugin.step("s")).toBe(before!);
  });
});
