import { describe, expect, test } from "bun:test";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { projects, sectionPaths } from "./helpers/harness.ts";
import { lines, tokens } from "./helpers/measure.ts";

const open = projects();

describe("the compacting hook", () => {
  test("pushes the closest file first, then its parents, within compactionTokens", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    const [copy] = await plugin.compact("s");
    expect(sectionPaths(copy)).toEqual(["services/api/plugins/payments/AGENTS.md", "services/api/AGENTS.md", "AGENTS.md"]);
    expect(tokens(copy!)).toBeLessThanOrEqual(1000);
  });

  test("over compactionTokens: a cut names the file to read, and every file left out is listed by path and tokens", async () => {
    const plugin = await open("monorepo");
    await writeFile(join(plugin.root, "services/api/AGENTS.md"), lines("api", 400));
    await plugin.touch("s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    const [copy] = await plugin.compact("s");
    expect(tokens(copy!)).toBeLessThanOrEqual(1000);
    expect(copy).toContain("Amounts are integers in minor units");
    expect(copy).toContain("api rule 0");
    expect(copy).toMatch(/\[cut to fit the budget: \d+ tokens left out; read "services\/api\/AGENTS\.md" from line \d+\]/);
    expect(copy).not.toContain("# Acme monorepo");
    expect(copy).toMatch(/not included \(budget\): "AGENTS\.md" \(\d+ tokens\)/);
  });

  test("a small compactionTokens still names every file", async () => {
    const plugin = await open("monorepo", { compactionTokens: 120 });
    await plugin.touch("s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    const [copy] = await plugin.compact("s");
    expect(tokens(copy!)).toBeLessThanOrEqual(120);
    for (const rel of ["services/api/plugins/payments/AGENTS.md", "services/api/AGENTS.md", "AGENTS.md"]) expect(copy).toContain(rel);
  });

  test("the session keeps its touched paths through compaction: the next system block carries its whole hierarchy", async () => {
    const plugin = await open("monorepo");
    await plugin.step("s");
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    await plugin.compact("s");
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } as never });
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });
});

// Found in review (0.3.16; failed before its fix): the copy fitted its list of names before any file,
// and eighty small files' names left no room for a priority: critical one.
test("the compaction copy keeps a priority: critical file whole beside many other files (critical first and whole; the copy follows the same order)", async () => {
  const critical = `---\npriority: critical\n---\n# Crit\n${Array.from({ length: 40 }, (_, i) => `- critical rule number ${i}: never skip it.`).join("\n")}\nCRITICAL-END\n`;
  const packages = Array.from({ length: 80 }, (_, i) => `packages/service-number-${i}`);
  const plugin = await open(undefined, {}, { files: { "crit/AGENTS.md": critical, ...Object.fromEntries(packages.map((dir) => [`${dir}/AGENTS.md`, "Use tabs.\n"])) } });
  await plugin.touch("s", "read", { filePath: join(plugin.root, "crit/x.ts") });
  for (const dir of packages) await plugin.touch("s", "read", { filePath: join(plugin.root, dir, "x.ts") });
  await plugin.stepUntil("s", (block) => block?.includes("CRITICAL-END") === true, "the critical file in the system block");
  const copy = (await plugin.compact("s")).join("\n");
  expect(copy).toContain('<context-file path="crit/AGENTS.md">');
  expect(copy).toContain("CRITICAL-END");
  expect(copy).not.toContain("read crit/AGENTS.md from line");
});
