/**
 * gray-matter (with js-yaml and esprima: 20-35 ms of loading, in three tasks) loads only when a
 * context file needs it: the worktree's catalog loads it before parsing the first file whose
 * frontmatter is not of the plain shape read without it. Each case runs in a fresh process: what a
 * process has loaded is process-wide, and other tests load gray-matter.
 */
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

const PLUGIN = resolve(import.meta.dir, "../plugin");
const BOM = "\uFEFF";

/** Whether this process has loaded gray-matter (a child's preamble). */
const LOADED = `
import { createRequire } from "node:module";
import { sep } from "node:path";
const cache = createRequire(import.meta.url).cache;
const loaded = () => Object.keys(cache).some((key) => key.includes(sep + "gray-matter" + sep));
`;

/**
 * Starts the plugin on the worktree, steps a session (delivery "system", so each step's block has
 * what the catalog holds by then) until its block holds every one of the markers (10 s at most).
 */
const PLUGIN_CHILD = `${LOADED}
const [plugin, root, ...markers] = process.argv.slice(2);
const { ProjectContext } = await import(plugin + "/index.ts");
const warnings = [];
const client = { app: { log: async ({ body }) => { if (body.level !== "info" && body.level !== "debug") warnings.push(body.message); return {}; } }, session: { messages: async () => ({ data: [] }) } };
const hooks = await ProjectContext({ client, directory: root, worktree: root, project: {}, serverUrl: new URL("http://127.0.0.1:4096"), $: undefined }, { delivery: "system", records: false });
let block = "";
for (const deadline = Date.now() + 10_000; Date.now() < deadline && !markers.every((marker) => block.includes(marker)); await Bun.sleep(20)) {
  const output = { system: ["You are opencode."] };
  await hooks["experimental.chat.system.transform"]({ sessionID: "ses_libraries", model: {} }, output);
  block = output.system[1] ?? "";
}
console.log(JSON.stringify({ loaded: loaded(), block, warnings }));
await hooks.dispose();
`;

/** Builds the catalog alone, with the loads the plugin gives it, and says whether gray-matter was loaded when they were asked for. */
const CATALOG_CHILD = `${LOADED}
const [plugin, root] = process.argv.slice(2);
const { Catalog } = await import(plugin + "/rules/catalog.ts");
const { WARM_FRONTMATTER } = await import(plugin + "/files/frontmatter.ts");
const asked = [];
const log = { log() {}, once() {} };
const loadLibraries = async () => {
  asked.push(loaded());
  for (const load of WARM_FRONTMATTER) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    load();
  }
};
const catalog = await Catalog.build({ worktree: root, fileNames: ["AGENTS.md", "CLAUDE.md"], rules: [".opencode/rules/**/*.md"], maxEntries: 10_000, maxFileBytes: 65_536, watch: false, log, loadLibraries });
console.log(JSON.stringify({ asked, loaded: loaded(), entries: [...catalog.all].map((entry) => entry.file.rel).sort() }));
catalog.dispose();
`;

function run<T>(script: string, files: Record<string, string>, args: string[] = []): T {
  const parent = realpathSync(mkdtempSync(join(tmpdir(), "libraries-")));
  try {
    const root = join(parent, "worktree");
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, rel)), { recursive: true });
      writeFileSync(join(root, rel), text);
    }
    const path = join(parent, "child.ts");
    writeFileSync(path, script);
    const child = spawnSync(process.execPath, [path, PLUGIN, root, ...args], { encoding: "utf8", timeout: 30_000 });
    expect(child.stderr).toBe("");
    return JSON.parse(child.stdout.trim().split("\n").at(-1)!) as T;
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
}

type PluginRun = { loaded: boolean; block: string; warnings: string[] };

test("a worktree whose frontmatter is all of the plain shape never loads gray-matter; its always files are in the catalog all the same", () => {
  const result = run<PluginRun>(
    PLUGIN_CHILD,
    {
      "AGENTS.md": "# Root\n",
      "packages/a/AGENTS.md": "---\ninclude: always\ndescription: Plain words\n---\nALWAYS-PLAIN-A\n",
      // A byte order mark before the block: the file is read as the block it opens with.
      "packages/bom/AGENTS.md": `${BOM}---\ninclude: always\n---\nALWAYS-BOM\n`,
      "packages/b/AGENTS.md": '---\ndescription: Conventions for b\nglobs: ["**/*.ts"]\n---\nTOUCHED-ONLY-B\n',
      ".opencode/rules/style.md": "---\ndescription: Style\n---\nRULE-PLAIN-C\n",
    },
    ["ALWAYS-PLAIN-A", "ALWAYS-BOM", "RULE-PLAIN-C"],
  );
  expect(result.block).toContain("ALWAYS-PLAIN-A");
  expect(result.block).toContain("ALWAYS-BOM");
  expect(result.block).toContain("RULE-PLAIN-C");
  expect(result.block).not.toContain("TOUCHED-ONLY-B");
  expect(result.loaded).toBe(false);
  expect(result.warnings).toEqual([]);
});

test("the plugin loads gray-matter for the first file that needs it and reads every file with it: a rule file (first in the walk) with a folded description, an always file with a block list", () => {
  const result = run<PluginRun>(
    PLUGIN_CHILD,
    {
      "AGENTS.md": "# Root\n",
      ".opencode/rules/style.md": "---\ndescription: >\n  Folded\n  style\n---\nRULE-FOLDED-C\n",
      "packages/a/AGENTS.md": "---\ninclude: always\nagents:\n  - build\n---\nALWAYS-LISTED-A\n",
      ".opencode/rules/plain.md": "---\ndescription: Plain\n---\nRULE-PLAIN-D\n",
    },
    ["RULE-FOLDED-C", "ALWAYS-LISTED-A", "RULE-PLAIN-D"],
  );
  expect(result.loaded).toBe(true);
  for (const marker of ["RULE-FOLDED-C", "ALWAYS-LISTED-A", "RULE-PLAIN-D"]) expect(result.block).toContain(marker);
  // Their frontmatter was parsed, not shown as text.
  expect(result.block).not.toContain("Folded");
  expect(result.block).not.toContain("- build");
  expect(result.warnings).toEqual([]);
});

test("the catalog asks for the libraries once, before any file loads gray-matter, for a file that needs them whatever its kind (a context file, or a rule file behind a byte order mark), and not for a block refused unparsed", () => {
  type CatalogRun = { asked: boolean[]; loaded: boolean; entries: string[] };
  const plain = { "AGENTS.md": "# Root\n", "packages/a/AGENTS.md": "---\ninclude: always\n---\nA\n" };
  const none = run<CatalogRun>(CATALOG_CHILD, plain);
  expect(none).toEqual({ asked: [], loaded: false, entries: ["packages/a/AGENTS.md"] });

  const context = run<CatalogRun>(CATALOG_CHILD, { ...plain, "packages/b/AGENTS.md": "---\ninclude: always\ndescription: |\n  Two\n  lines\n---\nB\n" });
  expect(context).toEqual({ asked: [false], loaded: true, entries: ["packages/a/AGENTS.md", "packages/b/AGENTS.md"] });

  const rule = run<CatalogRun>(CATALOG_CHILD, { ...plain, ".opencode/rules/bom.md": `${BOM}---\ndescription: >\n  Folded\n---\nRULE\n` });
  expect(rule).toEqual({ asked: [false], loaded: true, entries: [".opencode/rules/bom.md", "packages/a/AGENTS.md"] });

  // A block refused unparsed (more than 64 aliases) needs no library: the decision is parseFrontmatter's own.
  const refused = run<CatalogRun>(CATALOG_CHILD, { ...plain, "packages/c/AGENTS.md": `---\ninclude: always\ns: &s x\nlist: [${Array(65).fill("*s").join(", ")}]\n---\nC\n` });
  expect(refused).toEqual({ asked: [], loaded: false, entries: ["packages/a/AGENTS.md"] });
});
