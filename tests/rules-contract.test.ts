// The frontmatter rules contract (issue 11), end to end through the plugin's hooks as OpenCode calls
// them, on a real git repository made from tests/fixtures/rules-contract: every key with valid values,
// each class of bad value, include modes, paths, agents, priority, merging, imports and file variants.
import { afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { cp, mkdir, mkdtemp, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { readRecords, type FileRecord, type RequestRecord } from "../plugin/records/format.ts";
import { agentIndexesBuilt } from "../plugin/rules/rank.ts";
import { callContextTool as contextTool, sectionPaths, start, waitFor, type Started } from "./helpers/harness.ts";

const FIXTURE = join(import.meta.dir, "fixtures", "rules-contract");

/** Text of a file outside the worktree (next to it) that an import tries to reach. */
const OUTSIDE_MARKER = "OUTSIDE-MARKER-4c1d9e";

/**
 * Written by the test, not kept in the fixture: this repository's own .gitignore ignores node_modules/
 * (so those files could not be committed), and a .gitignore in the fixture would apply to this
 * repository too.
 */
const WRITTEN: Readonly<Record<string, string>> = {
  ".gitignore": "node_modules/\n*.local.md\n",
  "node_modules/pkg/AGENTS.md": "---\ninclude: always\n---\nNODE-MODULES-RULE: a package's file, never loaded.\n",
  "node_modules/pkg/AGENTS.local.md": "NODE-MODULES-LOCAL-RULE: a local variant in an ignored directory.\n",
  "ovr/AGENTS.local.md": "OVR-LOCAL-RULE: personal, git-ignored.\n",
};

/** What every session has from its first step: the root file (the session's directory), the always files and the rule file without include. */
const EVERY_SESSION = ["AGENTS.md", ".opencode/rules/general.md", "always/deep/AGENTS.md", "bad/nontouched/AGENTS.md"];

interface Repo {
  plugin: Started;
  root: string;
  records: string;
}

/** For this file: a fresh git repository from the fixture per call, its plugin disposed and everything removed after each test. */
function repositories() {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  return async (options: Record<string, unknown> = {}, { directory = "" } = {}): Promise<Repo> => {
    const parent = await realpath(await mkdtemp(join(tmpdir(), "rules-contract-")));
    let plugin: Started | undefined;
    cleanups.push(async () => {
      await plugin?.dispose();
      await rm(parent, { recursive: true, force: true });
    });
    const root = join(parent, "repo");
    await cp(FIXTURE, root, { recursive: true });
    for (const [rel, text] of Object.entries(WRITTEN)) {
      await mkdir(dirname(join(root, rel)), { recursive: true });
      await writeFile(join(root, rel), text);
    }
    // bad/outside/AGENTS.md imports @../../../outside.md: this file, one level above the worktree.
    await writeFile(join(parent, "outside.md"), `${OUTSIDE_MARKER}\n`);
    const init = spawnSync("git", ["init", "-q"], { cwd: root, encoding: "utf8" });
    if (init.status !== 0) throw new Error(`git init failed: ${init.stderr}`);
    const records = join(parent, "records");
    plugin = await start(root, { recordsDir: records, ...options }, { directory: join(root, directory) });
    return { plugin, root, records };
  };
}

const open = repositories();

/** A tool call as OpenCode runs it (before, then after with its result); returns what the model gets. */
async function tool(plugin: Started, sessionID: string, name: string, args: Record<string, unknown>): Promise<string> {
  await plugin.touch(sessionID, name, args);
  const result = { title: name, output: "tool result", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: name, sessionID, callID: `call-${Math.random()}`, args } as never, result as never);
  return result.output;
}

const read = (plugin: Started, sessionID: string, filePath: string) => tool(plugin, sessionID, "read", { filePath });

/** A user message through chat.message with the given agent; returns the parts the plugin added. */
async function message(plugin: Started, sessionID: string, agent: string, text: string): Promise<{ text?: string }[]> {
  const id = `msg_${Math.random().toString(36).slice(2)}`;
  const parts: { id: string; type: string; text?: string }[] = [{ id: `prt_${id}_1`, type: "text", text }];
  await plugin.hooks["chat.message"]!({ sessionID, agent } as never, { message: { id }, parts } as never);
  return parts.slice(1);
}


/** The text of one file's section in a block. */
function sectionOf(block: string | undefined, rel: string): string | undefined {
  const head = `<context-file path="${rel}">\n`;
  const at = block?.indexOf(head) ?? -1;
  if (block === undefined || at === -1) return undefined;
  return block.slice(at + head.length, block.indexOf("</context-file>", at));
}

const recordsOf = (repo: Repo, sessionID: string, count: number): Promise<RequestRecord[]> =>
  waitFor(() => {
    const records = readRecords(repo.records, sessionID);
    return records.length >= count ? records : undefined;
  }, 3000, `${count} records of ${sessionID}`);

const filesOf = (record: RequestRecord | undefined): Map<string, FileRecord> => new Map((record?.files ?? []).map((file) => [file.path, file]));

const warnings = (plugin: Started) => plugin.logs.filter((entry) => entry.level === "warn").map((entry) => entry.message);

/** A frontmatter line of any key the fixture uses: none may ever reach the model. */
const FRONTMATTER_LINE = /^(?:include|description|paths|agents|exclude_agents|apply_to|priority|merge|watch|owner):/m;

const DB_QUESTION = "How do I write a reversible database migration for the SQL schema?";
const CSS_REQUEST = "Fix the CSS styling of the React header component";

describe("include modes", () => {
  test("always: every session has the always files (anywhere in the worktree) and the rule file without include from its first step", async () => {
    const { plugin } = await open({ delivery: "system" });
    for (const session of ["ses_one", "ses_two"]) {
      const block = await plugin.step(session);
      expect(sectionPaths(block)).toEqual(EVERY_SESSION);
      expect(sectionOf(block, "always/deep/AGENTS.md")).toBe("ALWAYS-RULE: never log secrets.\n");
      expect(sectionOf(block, ".opencode/rules/general.md")).toBe("RULE-GENERAL: prefer composition over inheritance.\n");
    }
  });

  test("a git-ignored directory loads nothing, always or touched, not even a local variant a package might ship", async () => {
    const { plugin } = await open({ delivery: "system" });
    expect(await plugin.step("ses_nm")).not.toContain("NODE-MODULES");
    await read(plugin, "ses_nm", "node_modules/pkg/index.js");
    const block = await plugin.step("ses_nm");
    expect(block).not.toContain("NODE-MODULES-RULE");
    expect(block).not.toContain("NODE-MODULES-LOCAL-RULE");
  });

  test("manual: touching its directory is not enough; project_context load pins it, recorded as manual", async () => {
    const repo = await open({ delivery: "system" });
    const { plugin } = repo;
    await read(plugin, "ses_m", "manual/notes.md");
    expect(await plugin.step("ses_m")).not.toContain("MANUAL-RULE");
    expect(await contextTool(plugin, "ses_m", { action: "list" })).toContain("- manual/AGENTS.md: not loaded: include: manual, and not pinned");
    expect(await contextTool(plugin, "ses_m", { action: "load", path: "manual/AGENTS.md" })).toContain("pinned manual/AGENTS.md");
    expect(sectionOf(await plugin.step("ses_m"), "manual/AGENTS.md")).toBe("MANUAL-RULE: bump the version before tagging.\n");
    const records = await recordsOf(repo, "ses_m", 2);
    expect(filesOf(records.at(-1)).get("manual/AGENTS.md")).toMatchObject({ mode: "manual", state: "system" });
  });

  test("manual: the pin option loads it in every session from its first step", async () => {
    const { plugin } = await open({ delivery: "system", pin: ["manual/AGENTS.md"] });
    for (const session of ["ses_p1", "ses_p2"]) {
      expect(sectionPaths(await plugin.step(session))).toEqual([...EVERY_SESSION, "manual/AGENTS.md"]);
    }
  });

  test("agent: a message about its description attaches it with its score; an unrelated one attaches nothing; attached once", async () => {
    const repo = await open({ delivery: "system" });
    const { plugin } = repo;
    await message(plugin, "ses_a", "build", "What is the weather like today?");
    expect(sectionPaths(await plugin.step("ses_a"))).toEqual(EVERY_SESSION);
    await message(plugin, "ses_a", "build", DB_QUESTION);
    const block = await plugin.step("ses_a");
    expect(sectionPaths(block)).toEqual([...EVERY_SESSION.slice(0, 2), "agent/db/AGENTS.md", ...EVERY_SESSION.slice(2)]);
    expect(sectionOf(block, "agent/db/AGENTS.md")).toStartWith("# Database migrations\n\nAGENT-DB-RULE");
    const list = await contextTool(plugin, "ses_a", { action: "list" });
    expect(list).toMatch(/- agent\/db\/AGENTS\.md: \w+, agent \(score 0\.\d+\)/);
    expect(list).toContain("- agent/ui/AGENTS.md: agent, not loaded (offered when a user message is about it): Frontend CSS styling and React components");
    const records = await recordsOf(repo, "ses_a", 2);
    const db = filesOf(records.at(-1)).get("agent/db/AGENTS.md");
    expect(db).toMatchObject({ mode: "agent", state: "system" });
    expect(db!.score).toBeGreaterThan(0.2);
    expect(db!.score).toBeLessThanOrEqual(1);
    // The same question again changes nothing: the file is the session's already.
    await message(plugin, "ses_a", "build", DB_QUESTION);
    expect(await plugin.step("ses_a")).toBe(block);
  });

  test("agent: a touch is relevance too: the file loads without a message, recorded as agent with no score", async () => {
    const repo = await open({ delivery: "system" });
    await read(repo.plugin, "ses_at", "agent/ui/src/Header.tsx");
    expect(sectionPaths(await repo.plugin.step("ses_at"))).toContain("agent/ui/AGENTS.md");
    const ui = filesOf((await recordsOf(repo, "ses_at", 1)).at(-1)).get("agent/ui/AGENTS.md");
    expect(ui).toMatchObject({ mode: "agent", state: "system" });
    expect(ui!.score).toBeUndefined();
  });
});

describe("paths", () => {
  test("loads only once a touched FILE matches (not the bare directory), then stays for the session", async () => {
    const repo = await open({ delivery: "system" });
    const { plugin } = repo;
    await read(plugin, "ses_s", "sql/notes.txt");
    await tool(plugin, "ses_s", "grep", { pattern: "SELECT", path: "sql" });
    expect(await plugin.step("ses_s")).not.toContain("PATHS-RULE");
    expect(await contextTool(plugin, "ses_s", { action: "list" })).toContain("- sql/AGENTS.md: not loaded: no touched file matches paths: **/*.sql");
    await read(plugin, "ses_s", "sql/schema.sql");
    expect(sectionOf(await plugin.step("ses_s"), "sql/AGENTS.md")).toBe("PATHS-RULE: uppercase SQL keywords.\n");
    await read(plugin, "ses_s", "pkg/index.ts");
    await read(plugin, "ses_s", "sec/index.ts");
    expect(sectionOf(await plugin.step("ses_s"), "sql/AGENTS.md")).toBe("PATHS-RULE: uppercase SQL keywords.\n");
    expect(filesOf((await recordsOf(repo, "ses_s", 3)).at(-1)).get("sql/AGENTS.md")).toMatchObject({ mode: "touched", state: "system" });
  });

  test("a file named first as a directory (grep's path), then read, is a touched file for paths (found by a hostile run)", async () => {
    const { plugin } = await open();
    await plugin.step("ses_g2");
    await tool(plugin, "ses_g2", "grep", { pattern: "SELECT", path: "sql/schema.sql" });
    const output = await read(plugin, "ses_g2", "sql/schema.sql");
    expect(output).toContain("PATHS-RULE");
  });

  test("a rule file's paths (a string here) are worktree-relative; with no include it applies always where they match", async () => {
    const repo = await open({ delivery: "system" });
    const { plugin } = repo;
    await read(plugin, "ses_r", ".opencode/rules/notes.csv");
    expect(await plugin.step("ses_r")).not.toContain("RULE-DATA");
    await read(plugin, "ses_r", "data/a.csv");
    expect(sectionOf(await plugin.step("ses_r"), ".opencode/rules/data.md")).toBe("RULE-DATA: CSV files use semicolons.\n");
    expect(filesOf((await recordsOf(repo, "ses_r", 2)).at(-1)).get(".opencode/rules/data.md")).toMatchObject({ mode: "always" });
  });
});

describe("agents, exclude_agents, apply_to", () => {
  const scoped = (block: string | undefined) => sectionPaths(block).filter((rel) => /^(builders|planners|reviewers)\//.test(rel));

  test("the agent of the session's latest chat.message decides; before any message it is build", async () => {
    const { plugin } = await open({ delivery: "system" });
    for (const dir of ["builders", "planners", "reviewers"]) await read(plugin, "ses_g", `${dir}/x.ts`);
    expect(scoped(await plugin.step("ses_g"))).toEqual(["builders/AGENTS.md", "planners/AGENTS.md"]);
    const expected: [string, string[]][] = [
      ["plan", []],
      ["review", ["planners/AGENTS.md", "reviewers/AGENTS.md"]],
      ["build", ["builders/AGENTS.md", "planners/AGENTS.md"]],
    ];
    for (const [agent, files] of expected) {
      await message(plugin, "ses_g", agent, "carry on");
      expect(scoped(await plugin.step("ses_g"))).toEqual(files);
    }
  });

  test("each session has its own agent (a subagent session carries its own)", async () => {
    const { plugin } = await open({ delivery: "system" });
    await message(plugin, "ses_main", "build", "carry on");
    await message(plugin, "ses_sub", "plan", "look around");
    for (const session of ["ses_main", "ses_sub"]) await read(plugin, session, "builders/x.ts");
    expect(scoped(await plugin.step("ses_main"))).toEqual(["builders/AGENTS.md"]);
    expect(scoped(await plugin.step("ses_sub"))).toEqual([]);
  });

  test("an agent file is attached only for the agents it applies to", async () => {
    const { plugin } = await open({ delivery: "system" });
    await message(plugin, "ses_x", "plan", `${DB_QUESTION} ${CSS_REQUEST}`);
    // agent/ui has exclude_agents: [plan]; agent/db has no agents key, so every agent.
    expect(sectionPaths(await plugin.step("ses_x")).filter((rel) => rel.startsWith("agent/"))).toEqual(["agent/db/AGENTS.md"]);
    await message(plugin, "ses_x", "build", CSS_REQUEST);
    expect(sectionPaths(await plugin.step("ses_x")).filter((rel) => rel.startsWith("agent/"))).toEqual(["agent/db/AGENTS.md", "agent/ui/AGENTS.md"]);
  });

  test("a file not for the agent takes none of the message's agentTop places (found in review)", async () => {
    const { plugin } = await open({ delivery: "system", agentTop: 1 });
    // The CSS file ranks first (0.46) but excludes plan: the database file, second (0.25), is the one place's.
    await message(plugin, "ses_y", "plan", `${CSS_REQUEST}, then the database migration`);
    expect(sectionPaths(await plugin.step("ses_y")).filter((rel) => rel.startsWith("agent/"))).toEqual(["agent/db/AGENTS.md"]);
  });
});

describe("priority", () => {
  test("critical first and whole, then high, then closest first; low dropped before anything is cut", async () => {
    const repo = await open({ delivery: "system", systemTokens: 500 });
    const { plugin } = repo;
    await read(plugin, "ses_pr", "prio/crit/leaf/x.ts");
    const block = await plugin.step("ses_pr");
    const [record] = (await recordsOf(repo, "ses_pr", 1)).slice(-1);
    // Records list the files in the budget's order.
    expect(record!.files.map((file) => file.path)).toEqual([
      "prio/crit/AGENTS.md",
      "always/deep/AGENTS.md",
      "prio/crit/leaf/AGENTS.md",
      "AGENTS.md",
      ".opencode/rules/general.md",
      "bad/nontouched/AGENTS.md",
      "prio/AGENTS.md",
    ]);
    const files = filesOf(record);
    expect(files.get("prio/crit/AGENTS.md")).toMatchObject({ state: "system" });
    expect(files.get("always/deep/AGENTS.md")).toMatchObject({ state: "system" });
    expect(files.get("prio/crit/leaf/AGENTS.md")).toMatchObject({ state: "cut" });
    expect(files.get("prio/AGENTS.md")).toMatchObject({ state: "omitted", tokens: 0 });
    expect(sectionOf(block, "prio/crit/AGENTS.md")).toEndWith("CRITICAL-RULE-END\n");
    expect(block).not.toContain("LOW-RULE");
    expect(block).toMatch(/\[not included \(budget\): [^\]]*"prio\/AGENTS\.md" \(\d+ tokens\)\]/);
  });

  test("a critical file past the whole budget is sent whole anyway, with one warning", async () => {
    const { plugin } = await open({ delivery: "system", systemTokens: 150 });
    await read(plugin, "ses_c", "prio/crit/leaf/x.ts");
    await plugin.step("ses_c");
    const block = await plugin.step("ses_c");
    // The block grows by what the critical file needs beside a bare count of the others, no more.
    expect(sectionPaths(block)).toEqual(["prio/crit/AGENTS.md"]);
    expect(sectionOf(block, "prio/crit/AGENTS.md")).toEndWith("CRITICAL-RULE-END\n");
    const critical = warnings(plugin).filter((line) => line.includes("priority: critical"));
    expect(critical).toHaveLength(1);
    expect(critical[0]).toContain("prio/crit/AGENTS.md");
    expect(critical[0]).toContain("sent whole anyway");
  });
});

describe("merge", () => {
  test("override: the ancestors' text is gone from chains through it and kept for another touched chain; the block says so", async () => {
    const { plugin } = await open({ delivery: "system" });
    await read(plugin, "ses_o", "pkg/inner/x.ts");
    const block = await plugin.step("ses_o");
    expect(block).not.toContain("PKG-PARENT-RULE");
    expect(sectionOf(block, "pkg/inner/AGENTS.md")).toBe(
      "[overrides AGENTS.md, pkg/AGENTS.md (merge: override): their text does not apply here]\n\nINNER-OVERRIDE-RULE: this directory has its own logger.\n",
    );
    // The root stays: the session's own directory (the worktree root) is a chain that does not go through pkg/inner.
    expect(sectionOf(block, "AGENTS.md")).toStartWith("[overridden by pkg/inner/AGENTS.md (merge: override) in pkg/inner and below]\n\n# Root rules");
    expect(await contextTool(plugin, "ses_o", { action: "list" })).toContain("- pkg/AGENTS.md: not loaded: overridden by pkg/inner/AGENTS.md");
    await read(plugin, "ses_o", "pkg/index.ts");
    expect(sectionOf(await plugin.step("ses_o"), "pkg/AGENTS.md")).toBe(
      "[overridden by pkg/inner/AGENTS.md (merge: override) in pkg/inner and below]\n\n# Package\n\nPKG-PARENT-RULE: use the package logger.\n",
    );
  });

  test("override: a session working inside the overriding directory has none of its ancestors' text", async () => {
    const { plugin } = await open({ delivery: "system" }, { directory: "pkg/inner" });
    const block = await plugin.step("ses_oi");
    expect(sectionPaths(block)).toEqual([".opencode/rules/general.md", "always/deep/AGENTS.md", "bad/nontouched/AGENTS.md", "pkg/inner/AGENTS.md"]);
    expect(block).not.toContain("ROOT-RULE");
    expect(block).not.toContain("PKG-PARENT-RULE");
  });

  test("sections: the child's \"## TESTING\" replaces the root's \"## Testing\" in its place (case-insensitive); the other sections stay", async () => {
    const { plugin } = await open({ delivery: "system" }, { directory: "sec" });
    const block = await plugin.step("ses_sec");
    const root = sectionOf(block, "AGENTS.md")!;
    expect(root).not.toContain("ROOT-TESTING");
    expect(root).toStartWith('[section "Testing" replaced by the one of sec/AGENTS.md (merge: sections), shown in its place]\n\n# Root rules\n\nROOT-RULE');
    expect(root).toContain('[section "TESTING" from sec/AGENTS.md, replacing this file\'s]\n## TESTING\nSEC-TESTING: run bun test in sec.\n');
    expect(root.indexOf("SEC-TESTING")).toBeLessThan(root.indexOf("ROOT-STYLE"));
    expect(block!.split("SEC-TESTING")).toHaveLength(2);
    const sec = sectionOf(block, "sec/AGENTS.md")!;
    expect(sec).toContain("SEC-INTRO");
    expect(sec).toContain('[section "TESTING" of this file is shown in AGENTS.md, in place of that file\'s]');
  });

  test("sections: while the session's own chain (the root) does not go through the child, both sections stay and the child's is noted", async () => {
    const { plugin } = await open({ delivery: "system" });
    await read(plugin, "ses_sr", "sec/x.ts");
    const block = await plugin.step("ses_sr");
    expect(sectionOf(block, "AGENTS.md")).toContain("ROOT-TESTING");
    expect(sectionOf(block, "sec/AGENTS.md")).toStartWith('[section "TESTING" replaces the one of AGENTS.md (merge: sections)]\n\n# Sec');
  });
});

describe("imports and file variants", () => {
  test("@docs/style.md is inlined with its frontmatter stripped and not obeyed", async () => {
    const { plugin } = await open({ delivery: "system" });
    const block = await plugin.step("ses_i");
    expect(sectionOf(block, "AGENTS.md")).toContain("\n[imported from docs/style.md]\nIMPORTED-STYLE: two spaces, never tabs.\n[end of docs/style.md]\n");
    expect(block).not.toContain("IMPORTED-FRONTMATTER");
    // Its `include: always` is not obeyed: it is no context file of its own.
    expect(sectionPaths(block)).not.toContain("docs/style.md");
    // The one bad value of the fixture in an always file is warned about from the start (it loads without a touch).
    expect(warnings(plugin)).toEqual(['bad/nontouched/AGENTS.md: frontmatter "paths": ["*.never"] applies only to include: touched (this file is always); ignored']);
  });

  test("AGENTS.override.md replaces AGENTS.md of its directory (even with no base file); AGENTS.local.md loads too, git-ignored", async () => {
    const { plugin } = await open({ delivery: "system" });
    await read(plugin, "ses_v", "ovr/x.ts");
    await read(plugin, "ses_v", "ovr-only/x.ts");
    const block = await plugin.step("ses_v");
    // OpenCode's own prompt may still carry the base file: the override says it wins.
    const replaces = "[this file replaces AGENTS.md of its directory: where they disagree, follow this one]\n\n";
    expect(sectionOf(block, "ovr/AGENTS.override.md")).toBe(`${replaces}OVR-OVERRIDE-RULE: the override of this directory.\n`);
    expect(sectionOf(block, "ovr/AGENTS.local.md")).toBe("OVR-LOCAL-RULE: personal, git-ignored.\n");
    expect(sectionOf(block, "ovr-only/AGENTS.override.md")).toBe(`${replaces}OVERRIDE-ALONE-RULE: an override with no base file.\n`);
    expect(block).not.toContain("OVR-BASE-RULE");
  });
});

describe("watch", () => {
  test("a watched file (a plain path, or a context file matching a glob) that changes gives one notice naming both files", async () => {
    const { plugin, root } = await open({ delivery: "system" });
    await plugin.step("ses_w");
    await writeFile(join(root, "docs/style.md"), "IMPORTED-STYLE: tabs after all.\n");
    const notice = '["docs/style.md" was changed; "always/deep/AGENTS.md" keeps an eye on it (watch): its instructions may need a review]';
    expect(await plugin.stepUntil("ses_w", (block) => block?.includes(notice) === true, "the docs/style.md notice")).toContain(notice);
    expect(await plugin.step("ses_w")).not.toContain("was changed");
    await writeFile(join(root, "pkg/inner/AGENTS.md"), "INNER: rewritten.\n");
    const glob = '["pkg/inner/AGENTS.md" was changed; "always/deep/AGENTS.md" keeps an eye on it (watch)';
    expect(await plugin.stepUntil("ses_w", (block) => block?.includes(glob) === true, "the pkg/inner notice")).toContain(glob);
  });

  test("parallel calls share a check of the watched files only when it began after their tool ran: a change saved after one call's check is in the next call's output", async () => {
    const { plugin, root } = await open({});
    const notice = '["docs/style.md" was changed; "always/deep/AGENTS.md" keeps an eye on it (watch)';
    await plugin.stepUntil("ses_wp", (block) => block?.includes("ALWAYS-RULE") === true, "the watching file");
    const after = async (callID: string) => {
      const output = { title: "read", output: "tool result", metadata: {} };
      await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "ses_wp", callID, args: { filePath: join(root, "README.md") } } as never, output as never);
      return output.output;
    };
    for (let call = 0; call < 2; call++) await plugin.touch("ses_wp", "read", { filePath: join(root, "README.md") });
    expect(await after("c1")).not.toContain("was changed");
    await writeFile(join(root, "docs/style.md"), "IMPORTED-STYLE: spaces again.\n");
    expect(await after("c2")).toContain(notice);
  });
});

describe("override notes", () => {
  test("an override names the base it replaces (CONVENTIONS.txt, not a guessed .md); a rule file named *.override.md replaces nothing", async () => {
    const root = await realpath(await mkdtemp(join(tmpdir(), "rules-override-")));
    let plugin: Started | undefined;
    try {
      await mkdir(join(root, "pkg"), { recursive: true });
      await mkdir(join(root, ".opencode/rules"), { recursive: true });
      await writeFile(join(root, "pkg/CONVENTIONS.override.md"), "PKG-OVERRIDE\n");
      await writeFile(join(root, ".opencode/rules/db.override.md"), "RULE-NAMED-OVERRIDE\n");
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
      plugin = await start(root, { delivery: "system", fileNames: ["AGENTS.md", "CONVENTIONS.txt"] });
      await plugin.touch("ses_ovr", "read", { filePath: join(root, "pkg/x.ts") });
      // Rule files join once the worktree's catalog is built (a step does not wait for it).
      const block = await plugin.stepUntil("ses_ovr", (text) => sectionOf(text, ".opencode/rules/db.override.md") !== undefined, "the rule file");
      expect(sectionOf(block, "pkg/CONVENTIONS.override.md")).toBe("[this file replaces CONVENTIONS.txt of its directory: where they disagree, follow this one]\n\nPKG-OVERRIDE\n");
      expect(sectionOf(block, ".opencode/rules/db.override.md")).toBe("RULE-NAMED-OVERRIDE\n");
    } finally {
      await plugin?.dispose();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("watch past its cap", () => {
  test("watch globs that take too long to match against the worktree's files stop at their matching budget, with one warning naming the file; another watching file is not cut short", async () => {
    // Eight 256-character globs against paths of 14 levels of 250 characters: about 18 ms a path each
    // time the index changes (a worst-case hunt: 37 s for 2,002 paths). Unbounded, these 600 paths
    // take about 11 s and no warning comes.
    const root = await realpath(await mkdtemp(join(tmpdir(), "w-")));
    let plugin: Started | undefined;
    try {
      const globs = Array.from({ length: 8 }, (_, i) => `"**/*${"a".repeat(246)}${i}b"`).join(", ");
      await writeFile(join(root, "AGENTS.md"), `---\nwatch: [${globs}]\n---\nROOT-RULE\n`);
      // An ordinary watching file, matched after the hostile one (found in review: one shared budget cut it off for good).
      await mkdir(join(root, ".opencode/rules"), { recursive: true });
      await writeFile(join(root, ".opencode/rules/b.md"), '---\ninclude: always\nwatch: ["pkg/*/AGENTS.md"]\n---\nB-RULE\n');
      await mkdir(join(root, "pkg/p1"), { recursive: true });
      await writeFile(join(root, "pkg/p1/AGENTS.md"), "P1\n");
      const deep = join(root, ...Array.from({ length: 13 }, (_, i) => `${"a".repeat(249)}${String.fromCharCode(99 + (i % 20))}`));
      for (let i = 0; i < 600; i++) {
        await mkdir(join(deep, `${"a".repeat(240)}${String(i).padStart(10, "0")}`), { recursive: true });
        await writeFile(join(deep, `${"a".repeat(240)}${String(i).padStart(10, "0")}`, "AGENTS.md"), `package ${i}\n`);
      }
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
      plugin = await start(root, { delivery: "system" });
      await plugin.stepUntil("ses_work", (text) => text?.includes("ROOT-RULE") === true && text.includes("B-RULE"), "the root file and the rule file");
      await waitFor(async () => {
        await plugin!.step("ses_work");
        return warnings(plugin!).some((line) => line.includes("watch globs against the worktree's files took too long"));
      }, 6_000, "the matching budget's warning");
      expect(warnings(plugin).filter((line) => line.includes("took too long"))).toEqual([
        "AGENTS.md: matching its watch globs against the worktree's files took too long (more than 2000000 steps); only the files matched before that are watched",
      ]);
      await writeFile(join(root, "pkg/p1/AGENTS.md"), "P1, changed\n");
      await plugin.stepUntil("ses_work", (text) => text?.includes('["pkg/p1/AGENTS.md" was changed') === true, "the rule file's watch notice");
    } finally {
      await plugin?.dispose();
      await rm(root, { recursive: true, force: true });
    }
  }, 15_000);

  test("watch globs that match more than 256 files watch the first 256, with one warning naming the file", async () => {
    const root = await realpath(await mkdtemp(join(tmpdir(), "rules-watch-cap-")));
    let plugin: Started | undefined;
    try {
      await writeFile(join(root, "AGENTS.md"), '---\nwatch: ["pkg/*/AGENTS.md"]\n---\nROOT-RULE\n');
      for (let i = 0; i < 300; i++) {
        await mkdir(join(root, `pkg/p${i}`), { recursive: true });
        await writeFile(join(root, `pkg/p${i}/AGENTS.md`), `package ${i}\n`);
      }
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
      plugin = await start(root, { delivery: "system" });
      expect(await plugin.step("ses_cap")).toContain("ROOT-RULE");
      await plugin.step("ses_cap");
      const capped = warnings(plugin).filter((line) => line.includes("watch globs match more than 256 files"));
      expect(capped).toEqual(["AGENTS.md: its watch globs match more than 256 files; only the first 256 (in the worktree index's order) are watched"]);
      // Every matching file changes: 256 of them are told, in blocks of at most half the budget (none lost, each once).
      for (let i = 0; i < 300; i++) await writeFile(join(root, `pkg/p${i}/AGENTS.md`), `package ${i}, changed\n`);
      const first = await plugin.stepUntil("ses_cap", (text) => text?.includes("was changed") === true, "the watch notices");
      const told = [...(first?.match(/\["pkg\/p\d+\/AGENTS\.md" was changed/g) ?? [])];
      expect(told.length).toBeGreaterThan(0);
      expect(told.length).toBeLessThan(256);
      for (let step = 0; step < 10 && told.length < 256; step++) told.push(...((await plugin.step("ses_cap"))?.match(/\["pkg\/p\d+\/AGENTS\.md" was changed/g) ?? []));
      expect(told).toHaveLength(256);
      expect(new Set(told).size).toBe(256);
      expect((await plugin.step("ses_cap"))?.includes("was changed")).toBe(false);
    } finally {
      await plugin?.dispose();
      await rm(root, { recursive: true, force: true });
    }
  });
});

/** A git worktree whose root AGENTS.md (ROOT-RULE) watches the AGENTS.md of 120 packages, and an app/ (APP-RULE). */
async function watchedPackages(prefix: string): Promise<string> {
  const root = await realpath(await mkdtemp(join(tmpdir(), prefix)));
  await writeFile(join(root, "AGENTS.md"), '---\nwatch: ["pkg/*/AGENTS.md"]\n---\nROOT-RULE\n');
  for (let i = 0; i < 120; i++) {
    await mkdir(join(root, `pkg/p${i}`), { recursive: true });
    await writeFile(join(root, `pkg/p${i}/AGENTS.md`), `package ${i}\n`);
  }
  await mkdir(join(root, "app"));
  await writeFile(join(root, "app/AGENTS.md"), "APP-RULE\n");
  expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
  return root;
}

/**
 * Runs `body` on watchedPackages' worktree with the plugin started (deliveryTokens 1,000) and the
 * session's first step taken (the root file in it); cleans up after.
 */
async function inWatchedPackages(prefix: string, session: string, body: (plugin: Started, root: string) => Promise<void>): Promise<void> {
  const root = await watchedPackages(prefix);
  let plugin: Started | undefined;
  try {
    plugin = await start(root, { deliveryTokens: 1000 });
    expect(await plugin.step(session)).toContain("ROOT-RULE");
    await body(plugin, root);
  } finally {
    await plugin?.dispose();
    await rm(root, { recursive: true, force: true });
  }
}

/** The packages' files an output tells changed, in order. */
const changedIn = (output: string) => [...output.matchAll(/\["(pkg\/p\d+\/AGENTS\.md)" was changed/g)].map(([, rel]) => rel!);

describe("watch notices past a step's budget", () => {
  test("delivery stable: a burst of notices larger than half the step's budget is told over the next steps, each once, and the files reached still arrive", () =>
    inWatchedPackages("rules-watch-burst-", "ses_burst", async (plugin, root) => {
      for (let i = 0; i < 120; i++) await writeFile(join(root, `pkg/p${i}/AGENTS.md`), `package ${i}, changed\n`);
      // The step that reaches app/ gets its file and the first notices (about 30 tokens each: 120 are over 3,000).
      const first = await tool(plugin, "ses_burst", "read", { filePath: join(root, "app/AGENTS.md") });
      expect(first).toContain("APP-RULE");
      const told = changedIn(first);
      expect(told.length).toBeGreaterThan(0);
      expect(told.length).toBeLessThan(120);
      for (let step = 0; step < 20 && told.length < 120; step++) {
        // The next request gives the next step its budget.
        await plugin.step("ses_burst");
        told.push(...changedIn(await tool(plugin, "ses_burst", "read", { filePath: join(root, "app/AGENTS.md") })));
      }
      expect(new Set(told).size).toBe(120);
      expect(told).toHaveLength(120);
    }));
});

describe("a watched file that keeps changing while its notice waits", () => {
  test("delivery stable: its notice waits once, not once per change: after five rounds of edits to 120 watched files, each is told once more and the backlog is gone", () =>
    inWatchedPackages("rules-watch-again-", "ses_again", async (plugin, root) => {
      // Each round changes all 120; a step tells about 15 (half its budget): the rest waits.
      let during = 0;
      for (let round = 0; round < 5; round++) {
        for (let i = 0; i < 120; i++) await writeFile(join(root, `pkg/p${i}/AGENTS.md`), `package ${i}, round ${round}\n`);
        await plugin.step("ses_again");
        during += changedIn(await tool(plugin, "ses_again", "read", { filePath: join(root, "app/AGENTS.md") })).length;
      }
      expect(during).toBeGreaterThan(0);
      expect(during).toBeLessThan(120);
      const after: string[] = [];
      for (let step = 0; step < 40; step++) {
        await plugin.step("ses_again");
        const told = changedIn(await tool(plugin, "ses_again", "read", { filePath: join(root, "app/AGENTS.md") }));
        if (told.length === 0) break;
        after.push(...told);
      }
      // Queued once each (one per change, five rounds, made a backlog of about 525 that took 35 steps to tell).
      expect(after.length).toBeLessThanOrEqual(120);
      expect(new Set(after).size).toBe(after.length);
      expect(after.length + during).toBeGreaterThanOrEqual(120);
    }), 20_000);
});

describe("a watch notice in a small budget", () => {
  for (const deliveryTokens of [64, 73, 90]) test(`deliveryTokens ${deliveryTokens}: told once where a block can hold it with its frame, else let go with a warning (found in review)`, async () => {
    const root = await realpath(await mkdtemp(join(tmpdir(), "rules-watch-small-")));
    let plugin: Started | undefined;
    try {
      await writeFile(join(root, "AGENTS.md"), '---\nwatch: ["packages/*/docs/AGENTS.md"]\n---\nROOT-RULE\n');
      await mkdir(join(root, "packages/payments-service/docs"), { recursive: true });
      await writeFile(join(root, "packages/payments-service/docs/AGENTS.md"), "package 0\n");
      await mkdir(join(root, "app"));
      await writeFile(join(root, "app/x.txt"), "x\n");
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
      plugin = await start(root, { deliveryTokens });
      await plugin.step("ses_small");
      await writeFile(join(root, "packages/payments-service/docs/AGENTS.md"), "package 0, changed\n");
      let told = 0;
      for (let step = 0; step < 5; step++) {
        await plugin.step("ses_small");
        told += [...(await tool(plugin, "ses_small", "read", { filePath: join(root, "app/x.txt") })).matchAll(/was changed/g)].length;
      }
      const letGo = warnings(plugin).filter((line) => line.includes("could not be told"));
      // 64: the block's frame and the notice are more than a whole block.
      expect([told, letGo.length]).toEqual(deliveryTokens === 64 ? [0, 1] : [1, 0]);
    } finally {
      await plugin?.dispose();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("watch notices beside deletions", () => {
  test("notices leave room for the deletions a block must tell: a small budget still says every deletion, and later every notice (found in review)", async () => {
    const root = await realpath(await mkdtemp(join(tmpdir(), "rules-watch-deleted-")));
    let plugin: Started | undefined;
    try {
      await writeFile(join(root, "AGENTS.md"), '---\nwatch: ["w/*/AGENTS.md"]\n---\nR\n');
      for (const name of ["a", "b", "c", "d"]) {
        await mkdir(join(root, `packages/${name}`), { recursive: true });
        await writeFile(join(root, `packages/${name}/AGENTS.md`), `${name}\n`);
      }
      for (let i = 0; i < 12; i++) {
        await mkdir(join(root, `w/p${i}`), { recursive: true });
        await writeFile(join(root, `w/p${i}/AGENTS.md`), `w ${i}\n`);
      }
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
      plugin = await start(root, { deliveryTokens: 150 });
      await plugin.step("ses_del");
      for (const name of ["a", "b", "c", "d"]) {
        expect(await tool(plugin, "ses_del", "read", { filePath: join(root, `packages/${name}/AGENTS.md`) })).toContain(`${name}\n`);
        await plugin.step("ses_del");
      }
      for (const name of ["a", "b", "c", "d"]) await rm(join(root, `packages/${name}/AGENTS.md`));
      for (let i = 0; i < 12; i++) await writeFile(join(root, `w/p${i}/AGENTS.md`), `w ${i}, changed\n`);
      let said = "";
      for (let step = 0; step < 20 && (said.match(/was changed/g) ?? []).length < 12; step++) {
        await plugin.step("ses_del");
        said += await tool(plugin, "ses_del", "read", { filePath: join(root, "packages") });
      }
      for (const name of ["a", "b", "c", "d"]) expect(said).toContain(`["packages/${name}/AGENTS.md" no longer applies`);
      expect((said.match(/was changed/g) ?? []).length).toBe(12);
    } finally {
      await plugin?.dispose();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("watch targets through symlinks (found by a hunt)", () => {
  test("a target that resolves outside the worktree (a symlink out at its end or on its way) counts as absent, logged once each; a symlink inside is followed", async () => {
    const parent = await realpath(await mkdtemp(join(tmpdir(), "rules-watch-links-")));
    const root = join(parent, "repo");
    const outside = join(parent, "outside");
    let plugin: Started | undefined;
    try {
      await mkdir(join(root, "docs"), { recursive: true });
      await mkdir(outside);
      await writeFile(join(root, "AGENTS.md"), '---\nwatch: ["docs/peek.md", "docs/via-dir/peek.md", "docs/inside.md"]\n---\nROOT-RULE\n');
      await writeFile(join(outside, "peek.md"), "v1\n");
      await writeFile(join(root, "docs/real.md"), "v1\n");
      await symlink(join(outside, "peek.md"), join(root, "docs/peek.md"));
      await symlink(outside, join(root, "docs/via-dir"));
      await symlink("real.md", join(root, "docs/inside.md"));
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
      plugin = await start(root, { delivery: "system" });
      // The step that first delivers the watching file records what its targets are.
      await plugin.stepUntil("ses_links", (text) => text?.includes("ROOT-RULE") === true, "the watching file");
      await writeFile(join(outside, "peek.md"), "version two, longer\n");
      await writeFile(join(root, "docs/real.md"), "version two, longer\n");
      let said = "";
      for (let step = 0; step < 20 && !said.includes("[docs/inside.md was changed"); step++) said += (await plugin.step("ses_links")) ?? "";
      expect(said).toContain('["docs/inside.md" was changed; "AGENTS.md" keeps an eye on it (watch)');
      expect(said).not.toContain("[docs/peek.md");
      expect(said).not.toContain("[docs/via-dir/peek.md");
      expect(warnings(plugin).filter((line) => line.includes("leads outside the worktree"))).toEqual([
        "AGENTS.md: its watch target docs/peek.md leads outside the worktree; it counts as absent",
        "AGENTS.md: its watch target docs/via-dir/peek.md leads outside the worktree; it counts as absent",
      ]);
    } finally {
      await plugin?.dispose();
      await rm(parent, { recursive: true, force: true });
    }
  });
});

describe("bad values", () => {
  /** Each bad file: what its one warning must name (the file, the key, the value). */
  const BAD: readonly (readonly [rel: string, ...named: string[]])[] = [
    ["bad/mode/AGENTS.md", 'frontmatter "include"', '"sometimes"'],
    ["bad/glob/AGENTS.md", 'frontmatter "paths"', '"["', "does not parse"],
    ["bad/list/AGENTS.md", 'frontmatter "agents"', '{"build": true}'],
    ["bad/type/AGENTS.md", 'frontmatter "priority"', "got 3"],
    ["bad/merge/AGENTS.md", 'frontmatter "merge"', '"sideways"'],
    // The value ["*.never"] is not named in this one (reported as a gap).
    ["bad/nontouched/AGENTS.md", 'frontmatter "paths"', "applies only to include: touched"],
    ["bad/outside/AGENTS.md", 'import "@../../../outside.md"', "leads outside the worktree"],
    ["bad/missing/AGENTS.md", 'import "@nope.md"', "no such file"],
  ];

  test("each gives exactly one warning naming the file, the key and the value; valid and unknown keys give none", async () => {
    const { plugin } = await open({ delivery: "system" });
    for (const [rel] of BAD) await read(plugin, "ses_b", `${dirname(rel)}/x.ts`);
    for (const agent of ["build", "plan", "review"]) {
      await message(plugin, "ses_b", agent, DB_QUESTION);
      await plugin.step("ses_b");
    }
    for (const dir of ["builders", "planners", "reviewers", "pkg/inner", "sec", "sql", "manual", "ovr", "prio/crit/leaf", "agent/ui"]) await read(plugin, "ses_b", `${dir}/x.ts`);
    await plugin.step("ses_b");
    const logged = warnings(plugin);
    for (const [rel, ...named] of BAD) {
      const mine = logged.filter((line) => line.startsWith(`${rel}: `));
      expect(mine).toHaveLength(1);
      for (const part of named) expect(mine[0]).toContain(part);
    }
    expect(logged).toHaveLength(BAD.length);
  });

  test("each file behaves as if the bad key were absent", async () => {
    const repo = await open({ delivery: "system" });
    const { plugin } = repo;
    // include: always with paths: always (paths ignored), from the first step.
    const first = await plugin.step("ses_bb");
    expect(sectionOf(first, "bad/nontouched/AGENTS.md")).toBe("BAD-NONTOUCHED-RULE: always, paths ignored.\n");
    // include: sometimes is touched: not there before a touch.
    expect(first).not.toContain("BAD-MODE-RULE");
    await message(plugin, "ses_bb", "plan", "carry on");
    for (const dir of ["mode", "glob", "list", "type", "merge", "outside", "missing"]) await read(plugin, "ses_bb", `bad/${dir}/notes.txt`);
    const block = await plugin.step("ses_bb");
    // paths "[" is no restriction (notes.txt matches nothing); agents {build: true} is every agent (plan here).
    for (const marker of ["BAD-MODE-RULE", "BAD-GLOB-RULE", "BAD-LIST-RULE", "BAD-TYPE-RULE", "BAD-MERGE-RULE"]) expect(block).toContain(marker);
    // merge: sideways appends: nothing of anyone else's is replaced or noted.
    expect(block).not.toContain("(merge:");
    // A bad import stays as written, and nothing outside the worktree is read.
    expect(sectionOf(block, "bad/outside/AGENTS.md")).toEndWith("\n@../../../outside.md\n");
    expect(sectionOf(block, "bad/missing/AGENTS.md")).toEndWith("\n@nope.md\n");
    expect(block).not.toContain(OUTSIDE_MARKER);
    const [record] = (await recordsOf(repo, "ses_bb", 2)).slice(-1);
    const order = record!.files.map((file) => file.path);
    // priority: 3 is normal: after the high always/deep file, among the touched files.
    expect(order.indexOf("bad/type/AGENTS.md")).toBeGreaterThan(order.indexOf("always/deep/AGENTS.md"));
    expect(filesOf(record).get("bad/mode/AGENTS.md")).toMatchObject({ mode: "touched" });
    expect(filesOf(record).get("bad/nontouched/AGENTS.md")).toMatchObject({ mode: "always" });
  });
});

describe("frontmatter never reaches the model", () => {
  test("no block, delivery or message part of any mode carries a frontmatter line", async () => {
    const seen: string[] = [];
    for (const delivery of ["system", "stable"]) {
      const { plugin } = await open({ delivery, pin: ["manual"] });
      seen.push((await plugin.step("ses_f")) ?? "");
      seen.push(...(await message(plugin, "ses_f", "build", DB_QUESTION)).map((part) => part.text ?? ""));
      seen.push(...(await message(plugin, "ses_f", "build", CSS_REQUEST)).map((part) => part.text ?? ""));
      for (const dir of ["sql", "builders", "planners", "pkg/inner", "sec", "prio/crit/leaf", "bad/mode", "bad/glob", "bad/list", "bad/type", "bad/merge", "bad/outside", "bad/missing"]) {
        seen.push(await read(plugin, "ses_f", `${dir}/x.sql`));
      }
      seen.push((await plugin.step("ses_f")) ?? "");
    }
    const all = seen.join("\n");
    // Everything above reached the model: markers of files from every key.
    for (const marker of ["ALWAYS-RULE", "MANUAL-RULE", "AGENT-DB-RULE", "AGENT-UI-RULE", "PATHS-RULE", "BUILD-ONLY-RULE", "INNER-OVERRIDE-RULE", "SEC-TESTING", "CRITICAL-RULE", "BAD-MERGE-RULE"]) {
      expect(all).toContain(marker);
    }
    expect(all).not.toMatch(FRONTMATTER_LINE);
    expect(all).not.toContain("---\n");
    expect(all).not.toContain("IMPORTED-FRONTMATTER");
  });
});

describe("agent files at scale", () => {
  test("the catalog indexes the agent files in the background once it is built: the first message ranked after that indexes none of them", async () => {
    // Indexed by the first message ranked, 200 agent files of 3 KB were one task of 155 ms (a worst-case hunt).
    const root = await realpath(await mkdtemp(join(tmpdir(), "rules-agents-")));
    let plugin: Started | undefined;
    try {
      await writeFile(join(root, "AGENTS.md"), "ROOT\n");
      await mkdir(join(root, "always"), { recursive: true });
      await writeFile(join(root, "always/AGENTS.md"), "---\ninclude: always\n---\nALWAYS-MARKER\n");
      for (let i = 0; i < 40; i++) {
        await mkdir(join(root, `agents/a${i}`), { recursive: true });
        await writeFile(join(root, `agents/a${i}/AGENTS.md`), `---\ninclude: agent\ndescription: Conventions of the module${i} service\n---\n# Module${i}\n\nAGENT-${i}-MARKER rules.\n`);
      }
      expect(spawnSync("git", ["init", "-q"], { cwd: root }).status).toBe(0);
      const atStart = agentIndexesBuilt();
      plugin = await start(root, { delivery: "system" });
      await plugin.stepUntil("ses_idx", (text) => text?.includes("ALWAYS-MARKER") === true, "the catalog");
      // In the background, once the catalog is in use (its always files do not wait for them).
      await waitFor(() => agentIndexesBuilt() - atStart >= 40, 3000, "the agent files' indexes");
      const before = agentIndexesBuilt();
      await message(plugin, "ses_idx", "build", "What are the conventions of the module7 service?");
      expect(agentIndexesBuilt() - before).toBe(0);
      expect(await plugin.step("ses_idx")).toContain("AGENT-7-MARKER");
    } finally {
      await plugin?.dispose();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("stable delivery (the default)", () => {
  test("the always files are in the first block; an agent file rides on the chat.message part; the block does not move", async () => {
    const repo = await open();
    const { plugin } = repo;
    const first = await plugin.step("ses_st");
    expect(sectionPaths(first)).toEqual(EVERY_SESSION);
    const parts = await message(plugin, "ses_st", "build", DB_QUESTION);
    expect(parts).toHaveLength(1);
    expect(sectionPaths(parts[0]!.text)).toEqual(["agent/db/AGENTS.md"]);
    expect(parts[0]!.text).toContain("AGENT-DB-RULE");
    expect(await plugin.step("ses_st")).toBe(first);
    expect(await message(plugin, "ses_st", "build", "What is the weather like today?")).toEqual([]);
    const files = filesOf((await recordsOf(repo, "ses_st", 2)).at(-1));
    expect(files.get("agent/db/AGENTS.md")).toMatchObject({ mode: "agent", state: "conversation" });
    expect(files.get("always/deep/AGENTS.md")).toMatchObject({ mode: "always", state: "system" });
  });

  test("a session's first message (before its first step) brings its agent file into the first block", async () => {
    const { plugin } = await open();
    expect(await message(plugin, "ses_first", "build", DB_QUESTION)).toEqual([]);
    expect(sectionPaths(await plugin.step("ses_first"))).toContain("agent/db/AGENTS.md");
  });
});

describe("per-request records", () => {
  test("each file's mode: always, manual, agent with its score, touched", async () => {
    const repo = await open({ delivery: "system" });
    const { plugin } = repo;
    await message(plugin, "ses_rec", "build", DB_QUESTION);
    await contextTool(plugin, "ses_rec", { action: "load", path: "manual" });
    await read(plugin, "ses_rec", "sql/schema.sql");
    await plugin.step("ses_rec");
    const [record] = (await recordsOf(repo, "ses_rec", 1)).slice(-1);
    expect(record!.agent).toBe("build");
    expect(record!.pins).toEqual(["manual"]);
    const modes = Object.fromEntries(record!.files.map((file) => [file.path, file.score === undefined ? file.mode : `${file.mode} ${file.score}`]));
    expect(modes).toMatchObject({
      "always/deep/AGENTS.md": "always",
      ".opencode/rules/general.md": "always",
      "manual/AGENTS.md": "manual",
      "sql/AGENTS.md": "touched",
      "AGENTS.md": "touched",
    });
    expect(modes["agent/db/AGENTS.md"]).toMatch(/^agent 0\.\d+$/);
  });
});

describe("freshness and order of what the rules add", () => {
  test("an edit of an imported file is in the next step (imports are checked by stat when the session steps)", async () => {
    const { plugin } = await open({ delivery: "system" });
    expect(await plugin.step("ses_fi")).toContain("IMPORTED-STYLE: two spaces, never tabs.");
    await writeFile(join(plugin.root, "docs/style.md"), "---\ninclude: always\n---\nIMPORTED-STYLE: tabs after all.\n");
    const block = await plugin.step("ses_fi");
    expect(block).toContain("IMPORTED-STYLE: tabs after all.");
    expect(block).not.toContain("two spaces");
  });

  test("a personal AGENTS.local.md follows its directory's AGENTS.md in the block (root first, the local amendment last)", async () => {
    const { plugin } = await open({ delivery: "system" });
    await mkdir(join(plugin.root, "d"), { recursive: true });
    await writeFile(join(plugin.root, "d/AGENTS.md"), "D-BASE\n");
    await writeFile(join(plugin.root, "d/AGENTS.local.md"), "D-LOCAL\n");
    await read(plugin, "ses_lo", "d/x.ts");
    const paths = sectionPaths(await plugin.step("ses_lo"));
    expect(paths.indexOf("d/AGENTS.md")).toBeGreaterThanOrEqual(0);
    expect(paths.indexOf("d/AGENTS.local.md")).toBe(paths.indexOf("d/AGENTS.md") + 1);
  });

  test("paths: a file written into directories that do not exist yet matches at once", async () => {
    const { plugin } = await open({ delivery: "system" });
    await mkdir(join(plugin.root, "e"), { recursive: true });
    await writeFile(join(plugin.root, "e/AGENTS.md"), '---\npaths: ["gen/*.ts"]\n---\nE-GENERATED-RULE\n');
    await plugin.touch("ses_gen", "write", { filePath: "e/gen/new.ts", content: "x" });
    expect(await plugin.step("ses_gen")).toContain("E-GENERATED-RULE");
  });
});
