import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { callContextTool, inotifyWatches, projects, start, tempProject, type Started } from "./helpers/harness.ts";

const openProject = projects();
const N = 3000;
const rule = (i: number) => `---\ninclude: manual\n---\n# manual rule ${i}\n`;

async function after(plugin: Started, callID: string, filePath: string) {
  const result = { title: "read", output: "x", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID, args: { filePath } } as never, result as never);
  return result.output;
}

describe("the catalog refresh, which gives the loop turns, and the rules (found in review)", () => {
  for (const busy of [false, true]) {
    test(`a file touched while a parallel call waits for the catalog's refresh still matches a paths: rule (refresh busy: ${busy})`, async () => {
      const files: Record<string, string> = {
        "AGENTS.md": "# root\n",
        "pkg/AGENTS.md": '---\npaths: ["**/*.sql"]\n---\n# SQL RULES\n',
        "pkg/a.ts": "",
        "pkg/schema.sql": "",
      };
      for (let i = 0; i < N; i++) files[`.opencode/rules/r${i}.md`] = rule(i);
      const plugin = await openProject(undefined, { records: false }, { files });
      await callContextTool(plugin, "warm", { action: "list" }); // waits for the catalog
      await plugin.step("s");
      await plugin.touch("s", "read", { filePath: "pkg/a.ts" });
      expect(await after(plugin, "c1", "pkg/a.ts")).not.toContain("SQL RULES");
      await plugin.step("s");
      // A formatter or checkout saves the rule files again (same bytes): the next refresh reads each, in slices.
      if (busy) for (let i = 0; i < N; i++) writeFileSync(join(plugin.root, `.opencode/rules/r${i}.md`), rule(i));
      await plugin.touch("s", "read", { filePath: "pkg/a.ts" });
      const second = after(plugin, "c2", "pkg/a.ts");
      await Bun.sleep(15);
      // The next call of the same response starts meanwhile (tool.execute.before).
      await plugin.touch("s", "read", { filePath: "pkg/schema.sql" });
      const outputs = (await second) + (await after(plugin, "c3", "pkg/schema.sql"));
      // On whichever of the two outputs, once.
      expect(outputs.split("SQL RULES").length - 1).toBe(1);
    }, 30_000);
  }
});

test("a step that waits for the catalog's build sees an always rule file edited before it (git worktree; found in review)", async () => {
  const project = await tempProject();
  const files: Record<string, string> = {
    "AGENTS.md": "# root\n@docs/extra.md\n",
    "docs/extra.md": "extra notes\n",
    ".opencode/rules/0000-always.md": "# OLD ALWAYS RULE\n",
  };
  for (let i = 1; i <= 4000; i++) files[`.opencode/rules/r${String(i).padStart(5, "0")}.md`] = `---\ninclude: manual\n---\n# manual ${i}\n`;
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(project.root, rel)), { recursive: true });
    writeFileSync(join(project.root, rel), text);
  }
  execFileSync("git", ["init", "-q"], { cwd: project.root });
  const plugin = await start(project.root, { records: false });
  try {
    const rulesIno = statSync(join(plugin.root, ".opencode/rules")).ino.toString(16);
    // The build has read the first rule file (sorted first) once it watches that file's directory.
    const deadline = Date.now() + 10_000;
    while (!inotifyWatches().inodes.includes(rulesIno)) {
      if (Date.now() > deadline) throw new Error("the catalog never started");
      await Bun.sleep(1);
    }
    writeFileSync(join(plugin.root, ".opencode/rules/0000-always.md"), "# NEW ALWAYS RULE\n");
    // The session's first step: saved before it, the edit must be in its block.
    const block = (await plugin.step("s")) ?? "";
    expect(block).toContain("ALWAYS RULE");
    expect(block).toContain("NEW ALWAYS RULE");
  } finally {
    await plugin.dispose();
    await project.cleanup();
  }
}, 60_000);
