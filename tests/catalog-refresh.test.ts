import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { callContextTool, projects, type Started } from "./helpers/harness.ts";

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
