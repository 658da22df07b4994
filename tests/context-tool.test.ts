// The project_context tool, the per-request records and the TUI's steering requests, driven through
// the plugin's hooks as OpenCode calls them, on a real copy of the monorepo fixture.
import { describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { existsSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ToolContext } from "@opencode-ai/plugin";
import { appendSteer, readRecords, type RequestRecord } from "../plugin/records/format.ts";
import { projects, sectionPaths, waitFor, type Started } from "./helpers/harness.ts";

const openProject = projects();

async function withRecords(options: Record<string, unknown> = {}, history: unknown[] = []) {
  const dir = await mkdtemp(join(tmpdir(), "opc-records-"));
  const plugin = await openProject("monorepo", { recordsDir: dir, ...options }, { history });
  return { plugin, dir, [Symbol.asyncDispose]: () => rm(dir, { recursive: true, force: true }) };
}

/** Calls the tool as OpenCode does: before, execute, after; returns what the model gets. */
async function contextTool(plugin: Started, sessionID: string, args: Record<string, string>): Promise<string> {
  const full = { path: "", section: "", content: "", ...args };
  const callID = `call-${Math.random()}`;
  await plugin.hooks["tool.execute.before"]!({ tool: "project_context", sessionID, callID }, { args: full });
  const output = await plugin.hooks.tool!.project_context!.execute(full as never, { sessionID, messageID: "msg_1", agent: "build" } as unknown as ToolContext);
  const result = { title: "project_context", output: output as string, metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "project_context", sessionID, callID, args: full }, result);
  return result.output;
}

async function read(plugin: Started, sessionID: string, filePath: string): Promise<string> {
  const args = { filePath };
  await plugin.touch(sessionID, "read", args);
  const result = { title: "read", output: "file text", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID, callID: `call-${Math.random()}`, args }, result);
  return result.output;
}

const recordsOf = (dir: string, session: string, count: number) =>
  waitFor(() => {
    const records = readRecords(dir, session);
    return records.length >= count ? records : undefined;
  }, 3000, `${count} records of ${session}`);

const byPath = (record: RequestRecord | undefined) => new Map((record?.files ?? []).map((file) => [file.path, file]));

describe("per-request records", () => {
  test("each step appends one line: every file with its hash, tokens, mode, level and state; never file text", async () => {
    await using setup = await withRecords();
    const { plugin, dir } = setup;
    await plugin.hooks["chat.message"]!({ sessionID: "ses_a", agent: "build" } as never, { message: { id: "msg_1" }, parts: [] } as never);
    await plugin.step("ses_a");
    await read(plugin, "ses_a", "services/api/plugins/payments/src/charge.ts");
    await plugin.step("ses_a");
    const records = await recordsOf(dir, "ses_a", 2);
    expect(records).toHaveLength(2);
    const [first, second] = records;
    expect(first!.message).toBe("msg_1");
    expect(first!.agent).toBe("build");
    expect(first!.files.map((file) => [file.path, file.state, file.level, file.mode])).toEqual([["AGENTS.md", "system", "root", "touched"]]);
    const files = byPath(second);
    expect(files.get("services/api/plugins/payments/AGENTS.md")).toMatchObject({ state: "conversation", level: "direct", mode: "touched" });
    expect(files.get("services/api/AGENTS.md")).toMatchObject({ state: "conversation", level: "parent" });
    for (const file of second!.files) {
      expect(file.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(file.tokens).toBeGreaterThan(0);
    }
    const text = await readFile(join(dir, "ses_a.jsonl"), "utf8");
    const root = await readFile(join(plugin.root, "AGENTS.md"), "utf8");
    expect(text).not.toContain(root.split("\n").find((line) => line.length > 20)!);
    expect(statSync(join(dir, "ses_a.jsonl")).mode & 0o777).toBe(0o600);
  });

  test("records: false writes nothing; a session id that could name a path is never a file name", async () => {
    await using setup = await withRecords({ records: false });
    await setup.plugin.step("ses_b");
    await setup.plugin.step("../../escape");
    await setup.plugin.dispose();
    expect(readdirSync(setup.dir)).toEqual([]);
  });

  test("a session id with a path in it gets no records and no error", async () => {
    await using setup = await withRecords();
    expect(await setup.plugin.step("../x")).toBeDefined();
    await setup.plugin.dispose();
    expect(readdirSync(setup.dir)).toEqual([]);
    expect(existsSync(join(setup.dir, "..", "x.jsonl"))).toBe(false);
  });
});

describe("the project_context tool", () => {
  test("list names every file with its level, mode, tokens and state", async () => {
    await using setup = await withRecords();
    const { plugin } = setup;
    await plugin.step("ses_l");
    await read(plugin, "ses_l", "apps/web/src/App.tsx");
    const list = await contextTool(plugin, "ses_l", { action: "list" });
    expect(list).toContain("- AGENTS.md: root, touched,");
    expect(list).toContain("whole in the system block");
    expect(list).toMatch(/- apps\/web\/AGENTS\.md: direct, touched, \d+ tokens; whole in the conversation/);
    expect(list).toContain("Pinned: (nothing)");
  });

  test("load pins a directory's chain: its files ride on the tool's own output, are recorded as manual, and survive a restart", async () => {
    await using setup = await withRecords();
    const { plugin, dir } = setup;
    await plugin.step("ses_p");
    const output = await contextTool(plugin, "ses_p", { action: "load", path: "services/api/plugins/payments" });
    expect(output).toContain("pinned the context files from services/api/plugins/payments");
    expect(sectionPaths(output)).toEqual(["services/api/plugins/payments/AGENTS.md", "services/api/AGENTS.md"]);
    await plugin.step("ses_p");
    const records = await recordsOf(dir, "ses_p", 2);
    expect(records.at(-1)!.pins).toEqual(["services/api/plugins/payments"]);
    expect(byPath(records.at(-1)).get("services/api/AGENTS.md")).toMatchObject({ mode: "manual", state: "conversation" });

    // A new process (OpenCode restarted): the pin comes back from the session's history.
    const history = [
      { info: { id: "msg_1", role: "user", sessionID: "ses_p" }, parts: [{ type: "text", text: "pin it" }] },
      {
        info: { id: "msg_2", role: "assistant", sessionID: "ses_p" },
        parts: [{ type: "tool", callID: "c1", tool: "project_context", state: { status: "completed", input: { action: "load", path: "services/api/plugins/payments", section: "", content: "" }, output: "pruned", time: { start: 1, end: 2, compacted: 3 } } }],
      },
    ];
    const restarted = await openProject("monorepo", { recordsDir: dir }, { history });
    await restarted.step("ses_p");
    const list = await contextTool(restarted, "ses_p", { action: "list" });
    expect(list).toContain("Pinned: services/api/plugins/payments");
    expect(list).toContain("- services/api/plugins/payments/AGENTS.md: direct, manual");
  });

  test("a pinned context file comes alone, not its chain; a file that is not a context file is refused with what to do", async () => {
    await using setup = await withRecords({ delivery: "system" });
    const { plugin } = setup;
    await plugin.step("ses_f");
    expect(await contextTool(plugin, "ses_f", { action: "load", path: "services/api/plugins/payments/src/charge.ts" })).toContain("is not a context file");
    expect(await contextTool(plugin, "ses_f", { action: "load", path: join(plugin.root, "services/api/plugins/payments/AGENTS.md") })).toContain("pinned services/api/plugins/payments/AGENTS.md");
    expect(sectionPaths(await plugin.step("ses_f"))).toEqual(["AGENTS.md", "services/api/plugins/payments/AGENTS.md"]);
  });

  test("unload takes a file out until a tool call touches its directory; the model is told to disregard it", async () => {
    await using setup = await withRecords({ delivery: "system" });
    const { plugin, dir } = setup;
    await read(plugin, "ses_u", "apps/web/src/App.tsx");
    expect(sectionPaths(await plugin.step("ses_u"))).toContain("apps/web/AGENTS.md");
    const output = await contextTool(plugin, "ses_u", { action: "unload", path: "apps/web/AGENTS.md" });
    expect(output).toContain("disregard its instructions");
    expect(sectionPaths(await plugin.step("ses_u"))).not.toContain("apps/web/AGENTS.md");
    await read(plugin, "ses_u", "services/api/src/x.ts");
    expect(sectionPaths(await plugin.step("ses_u"))).not.toContain("apps/web/AGENTS.md");
    const records = await recordsOf(dir, "ses_u", 3);
    expect(byPath(records.at(-1)).get("apps/web/AGENTS.md")).toMatchObject({ state: "unloaded", tokens: 0 });
    await read(plugin, "ses_u", "apps/web/index.html");
    expect(sectionPaths(await plugin.step("ses_u"))).toContain("apps/web/AGENTS.md");
  });

  test("update replaces one section atomically, keeps the frontmatter, and the new text is live at the next step", async () => {
    await using setup = await withRecords({ delivery: "system" });
    const { plugin } = setup;
    const path = join(plugin.root, "services/api/AGENTS.md");
    await writeFile(path, "---\nroot: false\n---\n# API\n\n## Testing\nRun the old suite.\n\n## Style\nTabs.\n");
    await read(plugin, "ses_w", "services/api/src/x.ts");
    expect(await plugin.step("ses_w")).toContain("Run the old suite.");
    const output = await contextTool(plugin, "ses_w", { action: "update", path: "services/api/AGENTS.md", section: "testing", content: "Run `bun test` in services/api." });
    expect(output).toContain('replaced the section "testing" of services/api/AGENTS.md');
    expect(await readFile(path, "utf8")).toBe("---\nroot: false\n---\n# API\n\n## Testing\nRun `bun test` in services/api.\n\n## Style\nTabs.\n");
    await plugin.stepUntil("ses_w", (block) => block?.includes("Run `bun test` in services/api.") === true, "the updated section");
    expect(await contextTool(plugin, "ses_w", { action: "update", path: "services/api/AGENTS.md", section: "Deploys", content: "Never on Fridays." })).toContain('added the section "Deploys"');
    expect(await readFile(path, "utf8")).toEndWith("Tabs.\n\n## Deploys\nNever on Fridays.\n");
    expect(readdirSync(join(plugin.root, "services/api")).filter((name) => name.endsWith(".tmp"))).toEqual([]);
  });

  test("bad arguments get one line the model can act on; nothing outside the worktree is read or written", async () => {
    await using setup = await withRecords();
    const { plugin } = setup;
    const outside = await mkdtemp(join(tmpdir(), "opc-outside-"));
    try {
      await writeFile(join(outside, "AGENTS.md"), "secret\n");
      await symlink(outside, join(plugin.root, "link"));
      const cases: [Record<string, string>, string][] = [
        [{ action: "delete" }, "action must be one of list, load, unload, update"],
        [{ action: "load" }, "load needs a path"],
        [{ action: "load", path: "../../etc" }, "is outside the worktree"],
        [{ action: "load", path: "/etc/passwd" }, "is outside the worktree"],
        [{ action: "load", path: "link" }, "leads outside the worktree"],
        [{ action: "update", path: "link/AGENTS.md", section: "x", content: "y" }, "leads outside the worktree"],
        [{ action: "load", path: "no/such/dir" }, "does not exist"],
        [{ action: "update", path: "AGENTS.md", section: "", content: "x" }, "update needs a section"],
        [{ action: "update", path: "services/api/src", section: "x", content: "y" }, "is not a context file"],
        [{ action: "update", path: "AGENTS.md", section: "Style", content: "## Another\nsplits it" }, "opens the section"],
        [{ action: "unload", path: "tools" }, "is not in this session's context"],
      ];
      for (const [args, expected] of cases) {
        const output = await contextTool(plugin, "ses_bad", args);
        expect(output).toContain(expected);
        expect(output.split("\n")[0]).toContain("project_context");
      }
      expect(await readFile(join(outside, "AGENTS.md"), "utf8")).toBe("secret\n");
      const raw = await plugin.hooks.tool!.project_context!.execute(null as never, { sessionID: "ses_bad" } as unknown as ToolContext);
      expect(raw).toContain("arguments must be an object");
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });
});

describe("steering from the TUI", () => {
  test("a load the TUI wrote is applied at the session's next step; an unload of a pin undoes it", async () => {
    await using setup = await withRecords({ delivery: "system" });
    const { plugin, dir } = setup;
    expect(sectionPaths(await plugin.step("ses_t"))).toEqual(["AGENTS.md"]);
    appendSteer(dir, "ses_t", "load", "tools/scripts");
    expect(sectionPaths(await plugin.step("ses_t"))).toEqual(["AGENTS.md", "tools/scripts/CLAUDE.md"]);
    appendSteer(dir, "ses_t", "unload", "tools/scripts");
    expect(sectionPaths(await plugin.step("ses_t"))).toEqual(["AGENTS.md"]);
    const records = await recordsOf(dir, "ses_t", 3);
    expect(records.map((record) => record.pins)).toEqual([[], ["tools/scripts"], []]);
  });
});

describe("watch: in frontmatter", () => {
  test("a watched file edited, created or deleted gives the session that loaded the watcher one notice naming both files", async () => {
    await using setup = await withRecords({ delivery: "system" });
    const { plugin } = setup;
    await writeFile(join(plugin.root, "AGENTS.md"), "---\nwatch: [\"services/*/AGENTS.md\", \"docs/API.md\"]\n---\n# Root\nKeep the service guides in line with this file.\n");
    await read(plugin, "ses_w", "apps/web/src/App.tsx");
    const first = await plugin.step("ses_w");
    expect(first).not.toContain("keeps an eye on it");
    expect(first).not.toContain("watch:");
    await writeFile(join(plugin.root, "services/api/AGENTS.md"), "# API\nChanged.\n");
    const noticed = await plugin.stepUntil("ses_w", (block) => block?.includes("keeps an eye on it") === true, "a watch notice");
    expect(noticed).toContain("[services/api/AGENTS.md was changed; AGENTS.md keeps an eye on it (watch): its instructions may need a review]");
    // Said once.
    expect(await plugin.step("ses_w")).not.toContain("keeps an eye on it");
    await mkdir(join(plugin.root, "docs"), { recursive: true });
    await writeFile(join(plugin.root, "docs/API.md"), "# API docs\n");
    expect(await plugin.step("ses_w")).toContain("[docs/API.md was created; AGENTS.md keeps an eye on it");
    await rm(join(plugin.root, "docs/API.md"));
    expect(await plugin.step("ses_w")).toContain("[docs/API.md was deleted; AGENTS.md keeps an eye on it");
    // A session that loads the watcher later gets no old notices.
    expect(await plugin.step("ses_late")).not.toContain("keeps an eye on it");
  });
});
