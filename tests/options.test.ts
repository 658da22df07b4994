import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join } from "node:path";
import { DEFAULT_OPTIONS, resolveOptions } from "../plugin/options.ts";
import { appendSteer, recordsDirOf } from "../plugin/records/format.ts";
import { callContextTool, projects, start, tempProject } from "./helpers/harness.ts";

const open = projects();

describe("resolveOptions", () => {
  test("no options means the documented defaults", async () => {
    expect(await resolveOptions(undefined, () => {})).toEqual({
      fileNames: ["AGENTS.md", "CLAUDE.md"],
      maxDepth: 10,
      systemTokens: 8000,
      compactionTokens: 1000,
      maxFileBytes: 131072,
      maxTouchedDirs: 4096,
      watch: true,
      maxWatchedDirs: 8192,
      delivery: "stable",
      deliveryTokens: 6000,
      maxCacheBytes: 33554432,
      records: true,
      recordsDir: "",
      pin: [],
      rules: [".opencode/rules/**/*.md"],
      maxIndexEntries: 200000,
      agentThreshold: 0.2,
      agentTop: 2,
    });
  });

  test("a bad value is reported and only that option falls back to its default", async () => {
    const warnings: string[] = [];
    const given = { systemTokens: "lots", maxDepth: 3, fileNames: ["../AGENTS.md"], bogus: 1 };
    const resolved = await resolveOptions(given, (message) => warnings.push(message));
    expect(resolved.systemTokens).toBe(8000);
    expect(resolved.maxDepth).toBe(3);
    expect(resolved.fileNames).toEqual(["AGENTS.md", "CLAUDE.md"]);
    expect(warnings).toHaveLength(3);
    expect(warnings.join("\n")).toContain('option "systemTokens" is invalid');
    expect(warnings.join("\n")).toContain('unknown option "bogus"');
    expect(given).toEqual({ systemTokens: "lots", maxDepth: 3, fileNames: ["../AGENTS.md"], bogus: 1 });
  });

  test("a file name whose .override.md variant passes the file system's 255 bytes is refused once, not failed on in every directory (found in a hunt)", async () => {
    for (const name of [`${"A".repeat(250)}.md`, `${"é".repeat(200)}.md`]) {
      const warnings: string[] = [];
      expect((await resolveOptions({ fileNames: [name, "AGENTS.md"] }, (message) => warnings.push(message))).fileNames).toEqual(["AGENTS.md", "CLAUDE.md"]);
      expect(warnings.join("\n")).toContain("fits a file name (255 bytes of UTF-8)");
    }
    // The longest that fits: 243 bytes of stem, then ".override.md".
    expect((await resolveOptions({ fileNames: [`${"A".repeat(243)}.md`] }, () => {})).fileNames).toEqual([`${"A".repeat(243)}.md`]);
  });

  test("options that are not an object are reported and the defaults used", async () => {
    for (const raw of ["x", 7, [1], true]) {
      const warnings: string[] = [];
      expect(await resolveOptions(raw, (message) => warnings.push(message))).toBe(DEFAULT_OPTIONS);
      expect(warnings).toHaveLength(1);
    }
  });

  test("the caller's arrays are copied, never kept", async () => {
    const fileNames = ["A.md"];
    const resolved = await resolveOptions({ fileNames }, () => {});
    fileNames.push("B.md");
    expect(resolved.fileNames).toEqual(["A.md"]);
  });
});

describe("recordsDir", () => {
  const env = { HOME: "/home/u", XDG_STATE_HOME: "/state" };
  test("\"\" is the default, ~ the home directory, an absolute path itself; a relative one is refused with the default used (found in a hunt)", () => {
    expect(recordsDirOf("", env)).toEqual({ dir: "/state/opencode-project-context" });
    expect(recordsDirOf("~", env)).toEqual({ dir: "/home/u" });
    expect(recordsDirOf("~/records", env)).toEqual({ dir: "/home/u/records" });
    expect(recordsDirOf("/var/x/../records", env)).toEqual({ dir: "/var/records" });
    for (const relative of ["records", "./records", "~user/records", "../records"]) {
      const { dir, problem } = recordsDirOf(relative, env);
      expect([dir, problem?.includes("is relative")]).toEqual(["/state/opencode-project-context", true]);
    }
  });

  test("a relative $XDG_STATE_HOME or $HOME is ignored, as the XDG spec says: the default never lands where OpenCode runs (found in review)", () => {
    expect(recordsDirOf("", { HOME: "/home/u", XDG_STATE_HOME: "rel-state" })).toEqual({ dir: "/home/u/.local/state/opencode-project-context" });
    for (const HOME of ["", "rel-home"]) {
      const { dir } = recordsDirOf("", { HOME });
      expect([isAbsolute(dir), dir.endsWith("/.local/state/opencode-project-context")]).toEqual([true, true]);
      expect(isAbsolute(recordsDirOf("~/records", { HOME }).dir)).toBe(true);
    }
  });

  test("a recordsDir a shell sources (~/.bashrc.d, set by a project's opencode.json) runs nothing a repository named: no $ or backquote is written (found in review)", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "pc-sourced-"));
    try {
      const records = join(scratch, "bashrc.d");
      const evil = "d$(touch PWNED)`touch PWNED2`";
      const plugin = await open(undefined, { records: true, recordsDir: records }, { files: { [`${evil}/AGENTS.md`]: "# evil\n", [`${evil}/x.ts`]: "" } });
      await plugin.touch("ses_evil", "read", { filePath: `${evil}/x.ts` });
      await plugin.step("ses_evil");
      appendSteer(records, "ses_evil", "load", `${evil}/AGENTS.md`);
      await plugin.dispose();
      const files = readdirSync(records);
      expect(files.sort()).toEqual(["ses_evil.jsonl", "ses_evil.steer.jsonl"]);
      for (const file of files) {
        const text = readFileSync(join(records, file), "utf8");
        // The same JSON: the names read back as they are.
        expect(text.split("\n").filter((line) => line !== "").some((line) => JSON.stringify(JSON.parse(line)).includes(evil))).toBe(true);
        spawnSync("bash", ["-c", `. ${JSON.stringify(join(records, file))}`], { cwd: scratch });
      }
      expect(readdirSync(scratch).filter((name) => name.startsWith("PWNED"))).toEqual([]);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test("through the plugin: a relative recordsDir is logged and nothing is made where OpenCode runs", async () => {
    const plugin = await open("monorepo", { recordsDir: "~user-records/x" });
    await plugin.step("s");
    await plugin.dispose();
    expect(plugin.logs.some((entry) => entry.level === "warn" && entry.message.includes('option "recordsDir" "~user-records/x" is relative'))).toBe(true);
    expect(existsSync(join(process.cwd(), "~user-records"))).toBe(false);
  });
});

describe("bad options through the plugin", () => {
  test("a manual rule file named by the pin option loads in a session that starts before the catalog is built (found in review)", async () => {
    const files = {
      "AGENTS.md": "# root\n",
      ".opencode/rules/deploy.md": "---\ninclude: manual\ndescription: deploy steps\n---\n# DEPLOY RULES\n",
      "x.ts": "",
    };
    const plugin = await open(undefined, { delivery: "system", records: false, pin: [".opencode/rules/deploy.md"] }, { files });
    await plugin.touch("s", "read", { filePath: "x.ts" });
    const block = await plugin.stepUntil("s", (text) => text?.includes("DEPLOY RULES") === true, "the pinned manual rule file", 3000).catch((error: Error) => error.message);
    const warnings = plugin.logs.filter((entry) => entry.message.includes('option "pin"')).map((entry) => entry.message);
    expect({ block: typeof block === "string" && block.includes("DEPLOY RULES"), warnings }).toEqual({ block: true, warnings: [] });
  });

  test("a pinned path that is not a context file is logged, as the tool's load says it (found in a hunt)", async () => {
    const plugin = await open("monorepo", { pin: ["apps/web/src/App.tsx", "apps/web/AGENTS.md"] });
    // Once the catalog is built (list waits for it), which knows the rule files a pin may name besides context file names.
    await callContextTool(plugin, "warm", { action: "list" });
    await plugin.step("s");
    const warnings = plugin.logs.filter((entry) => entry.level === "warn").map((entry) => entry.message);
    expect(warnings.filter((message) => message.includes('option "pin"'))).toEqual(['option "pin": apps/web/src/App.tsx is not a context file (AGENTS.md, CLAUDE.md); ignored']);
    expect((await callContextTool(plugin, "s", { action: "list" })).split("\n").at(-1)).toBe("Pinned: apps/web/AGENTS.md");
  });

  /**
   * The blocks of two sessions touching sub/x.ts in a git repository made by `setUp` under `options`:
   * one stepped at once (the catalog, which knows what git ignores, maybe not built yet), one once it is.
   */
  async function blocksBeforeAndAfterCatalog(setUp: (root: string) => Promise<void>, options: Record<string, unknown>) {
    const project = await tempProject();
    await setUp(project.root);
    expect(spawnSync("git", ["init", "-q"], { cwd: project.root }).status).toBe(0);
    const plugin = await start(project.root, { delivery: "system", records: false, ...options });
    try {
      await plugin.touch("s", "read", { filePath: "sub/x.ts" });
      const before = await plugin.step("s");
      // Once the catalog is built too (list waits for it).
      await callContextTool(plugin, "warm", { action: "list" });
      await plugin.touch("t", "read", { filePath: "sub/x.ts" });
      const after = await plugin.step("t");
      return { blocks: [before ?? "", after ?? ""], warnings: plugin.logs.filter((entry) => entry.level === "warn").map((entry) => entry.message) };
    } finally {
      await plugin.dispose();
      await project.cleanup();
    }
  }

  test("fileNames naming a git-ignored file that is no context file (.env) never puts it in the prompt: a project's opencode.json may set them (found in review)", async () => {
    const files = { ".gitignore": ".env\nCLAUDE.md\n", ".env": "API_KEY=root-secret\n", "CLAUDE.md": "# personal, ignored\n", "sub/.env": "API_KEY=sub-secret\n", "sub/x.ts": "", "sub/AGENTS.md": "# sub\n" };
    const setUp = async (root: string) => {
      for (const [rel, text] of Object.entries(files)) {
        await mkdir(dirname(join(root, rel)), { recursive: true });
        await writeFile(join(root, rel), text);
      }
    };
    const { blocks, warnings } = await blocksBeforeAndAfterCatalog(setUp, { fileNames: [".env", "AGENTS.md", "CLAUDE.md"], pin: [".env"] });
    for (const block of blocks) {
      expect(block).not.toContain("secret");
      // A default name keeps loading when git ignores it (a personal CLAUDE.md), and a tracked-to-be AGENTS.md.
      expect(block).toContain("# personal, ignored");
      expect(block).toContain("# sub");
    }
    expect(warnings.some((message) => message.includes(".env") && message.includes("git ignores it"))).toBe(true);
  });

  test("a name of the fileNames option that is a committed link to a git-ignored file (NOTES.md -> .env) loads nothing of it (found in review)", async () => {
    const setUp = async (root: string) => {
      await writeFile(join(root, ".gitignore"), ".env\n");
      await writeFile(join(root, ".env"), "API_KEY=linked-secret\n");
      await mkdir(join(root, "sub"), { recursive: true });
      await writeFile(join(root, "sub/x.ts"), "");
      await writeFile(join(root, "sub/AGENTS.md"), "# sub\n");
      await symlink("../.env", join(root, "sub/NOTES.md"));
      await symlink(".env", join(root, "NOTES.md"));
    };
    const { blocks, warnings } = await blocksBeforeAndAfterCatalog(setUp, { fileNames: ["NOTES.md", "AGENTS.md"] });
    for (const block of blocks) {
      expect(block).not.toContain("secret");
      // The next name is tried.
      expect(block).toContain("# sub");
    }
    expect(warnings.some((message) => message.includes("NOTES.md") && message.includes("git ignores"))).toBe(true);
  });

  test("are logged through client.app.log and the plugin runs on defaults", async () => {
    const plugin = await open("monorepo", { systemTokens: -5, watch: "yes" });
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    expect(await plugin.step("s")).toContain("Web app");
    const warnings = plugin.logs.filter((entry) => entry.level === "warn").map((entry) => entry.message);
    expect(warnings.some((message) => message.includes('option "systemTokens" is invalid'))).toBe(true);
    expect(warnings.some((message) => message.includes('option "watch" is invalid'))).toBe(true);
    expect(plugin.logs.every((entry) => entry.service === "project-context")).toBe(true);
  });
});
