import { describe, expect, test } from "bun:test";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { walkUp } from "../plugin/discover.ts";
import { projects, sectionPaths } from "./helpers/harness.ts";

const open = projects();

describe("walkUp", () => {
  test("visits the start directory and its parents up to the stop directory, closest first", () => {
    expect(walkUp("/r/a/b/c", "/r", 10)).toEqual(["/r/a/b/c", "/r/a/b", "/r/a", "/r"]);
  });

  test("never goes above the stop directory, and never starts outside it", () => {
    expect(walkUp("/r", "/r", 10)).toEqual(["/r"]);
    expect(walkUp("/elsewhere/x", "/r", 10)).toEqual([]);
    expect(walkUp("/rx/y", "/r", 10)).toEqual([]);
  });

  test("climbs at most maxDepth levels", () => {
    expect(walkUp("/r/a/b/c", "/r", 2)).toEqual(["/r/a/b/c", "/r/a/b", "/r/a"]);
    expect(walkUp("/r/a", "/r", 0)).toEqual(["/r/a"]);
  });
});

describe("discovery through the plugin", () => {
  test("nothing is injected before a touch: the session directory's own files are the host's", async () => {
    const plugin = await open("monorepo");
    expect(await plugin.step("s")).toContain('<context-file path="AGENTS.md">');
    const withHost = await plugin.step("s", `You are opencode.\nInstructions from: ${plugin.root}/AGENTS.md\n# Acme`);
    expect(withHost).toBeUndefined();
  });

  test("a touched file brings in every context file from the root down to its directory, root first", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    expect(sectionPaths(await plugin.step("s"))).toEqual([
      "AGENTS.md",
      "services/api/AGENTS.md",
      "services/api/plugins/payments/AGENTS.md",
    ]);
  });

  test("untouched subtrees never appear", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "edit", { filePath: "apps/web/src/App.tsx", oldString: "a", newString: "b" });
    const block = await plugin.step("s");
    expect(sectionPaths(block)).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
    expect(block).not.toContain("Payments plugin");
    expect(block).not.toContain("Release scripts");
  });

  test("frontmatter is parsed and left out of the injected text", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    const block = await plugin.step("s");
    expect(block).toContain("# Web app (React + Vite)");
    expect(block).not.toContain("owner: web-team");
  });

  test("in each directory the first existing name of fileNames wins, and CLAUDE.md is the fallback", async () => {
    const plugin = await open("fallbacks");
    for (const dir of ["claude-only", "both", "dir-named", "none"]) await plugin.touch("s", "read", { filePath: `${dir}/src/file.ts` });
    const block = await plugin.step("s");
    expect(sectionPaths(block)).toEqual(["AGENTS.md", "claude-only/CLAUDE.md", "both/AGENTS.md", "dir-named/CLAUDE.md"]);
    expect(block).toContain("Both: AGENTS wins");
    expect(block).not.toContain("CLAUDE loses");
  });

  test("fileNames changes which names count, and in what order", async () => {
    const plugin = await open("fallbacks", { fileNames: ["CLAUDE.md", "AGENTS.md"] });
    await plugin.touch("s", "read", { filePath: "both/src/file.ts" });
    const block = await plugin.step("s");
    expect(sectionPaths(block)).toEqual(["AGENTS.md", "both/CLAUDE.md"]);
  });

  test("root: true stops the walk above its directory", async () => {
    const plugin = await open("root-true");
    await plugin.touch("s", "read", { filePath: "pkg/sub/file.ts" });
    // The session directory's own chain still brings the outer file; a session rooted in pkg would not.
    const block = await plugin.step("s");
    expect(sectionPaths(block)).toEqual(["AGENTS.md", "pkg/AGENTS.md", "pkg/sub/AGENTS.md"]);
    expect(block).not.toContain("root: true");
  });

  test("a session that starts below a root: true file never sees what lies above it", async () => {
    const plugin = await open("root-true", {}, { directory: (root) => join(root, "pkg") });
    await plugin.touch("s", "read", { filePath: "sub/file.ts" });
    const block = await plugin.step("s");
    expect(sectionPaths(block)).toEqual(["pkg/AGENTS.md", "pkg/sub/AGENTS.md"]);
    expect(block).not.toContain("Outer rules");
  });

  test("outside a git repository (OpenCode's worktree is /) nothing above the session directory is read", async () => {
    const plugin = await open("monorepo", {}, { worktree: "/", directory: (root) => join(root, "services/api") });
    await plugin.touch("s", "read", { filePath: "plugins/payments/src/charge.ts" });
    await plugin.touch("s", "read", { filePath: "../../apps/web/src/App.tsx" });
    const block = await plugin.step("s");
    expect(sectionPaths(block)).toEqual(["AGENTS.md", "plugins/payments/AGENTS.md"]);
    expect(block).toContain("# API service");
    expect(block).not.toContain("Acme monorepo");
    expect(block).not.toContain("Web app");
  });

  test("walks climb at most maxDepth levels above the touched directory", async () => {
    const plugin = await open("monorepo", { maxDepth: 1 });
    const root = plugin.root;
    const deep = join(root, "a", "b", "c", "d");
    await mkdir(deep, { recursive: true });
    for (const dir of ["a", "a/b", "a/b/c", "a/b/c/d"]) await writeFile(join(root, dir, "AGENTS.md"), `# level ${dir}\n`);
    await plugin.touch("s", "read", { filePath: "a/b/c/d/file.ts" });
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "a/b/c/AGENTS.md", "a/b/c/d/AGENTS.md"]);
  });

  test("sections join in the order their directories were first touched; earlier text stays a prefix", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "read", { filePath: "tools/scripts/release.sh" });
    const first = (await plugin.step("s"))!;
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    const second = (await plugin.step("s"))!;
    expect(sectionPaths(second)).toEqual(["AGENTS.md", "tools/scripts/CLAUDE.md", "apps/web/AGENTS.md"]);
    const closing = "</project-context>";
    expect(second.startsWith(first.slice(0, -closing.length))).toBe(true);
  });

  test("the block is byte-identical from step to step while nothing changed", async () => {
    const plugin = await open("monorepo");
    await plugin.touch("s", "read", { filePath: "services/api/src/server.ts" });
    const blocks = [];
    for (let i = 0; i < 5; i++) blocks.push(await plugin.step("s"));
    expect(new Set(blocks).size).toBe(1);
    expect(blocks[0]).toBeString();
  });
});
