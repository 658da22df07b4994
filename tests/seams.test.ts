import { afterEach, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Host, latest, promptOf } from "./helpers/conversation.ts";
import { appendSteer } from "../plugin/records/format.ts";
import { callContextTool, start, waitFor, type Started } from "./helpers/harness.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function project(files: Record<string, string>, options: Record<string, unknown> = {}): Promise<Started> {
  const root = await realpath(await mkdtemp(join(tmpdir(), "seams-")));
  for (const [rel, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, rel)), { recursive: true });
    await writeFile(join(root, rel), text);
  }
  spawnSync("git", ["init", "-q"], { cwd: root });
  const plugin = await start(root, options);
  cleanups.push(async () => {
    await plugin.dispose();
    await rm(root, { recursive: true, force: true });
  });
  return plugin;
}

/** A tool call through both hooks, its output as the model gets it. */
async function tool(plugin: Started, sessionID: string, name: string, args: Record<string, unknown>): Promise<string> {
  await plugin.touch(sessionID, name, args);
  const output = { title: name, output: "tool result", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: name, sessionID, callID: `call-${Math.random()}`, args } as never, output as never);
  return output.output;
}

// Found by a review helper (each failed before its fix, 0.3.15): the seams between the frozen block,
// what the conversation still carries, and the worktree catalog.

/** A session that has had an always file and a rule file delivered (catalog files, off its chains). */
async function setup(): Promise<Started> {
  const plugin = await project({ "AGENTS.md": "# Root\n", "src/x.ts": "x", "docs/AGENTS.md": "---\ninclude: always\n---\nALWAYS-DOCS v1\n", ".opencode/rules/r.md": "RULE-R v1\n" });
  let seen = "";
  await waitFor(async () => {
    seen += (await plugin.step("s")) ?? "";
    seen += await tool(plugin, "s", "read", { filePath: "src/x.ts" });
    return seen.includes("ALWAYS-DOCS v1") && seen.includes("RULE-R v1");
  }, 5000, "always + rule delivered");
  return plugin;
}

/** Steps and calls until `text` has reached the model (the catalog builds in the background). */
async function deliveredBy(plugin: Started, text: string, what: string): Promise<void> {
  let seen = "";
  await waitFor(async () => {
    seen += (await plugin.step("s")) ?? "";
    seen += await tool(plugin, "s", "read", { filePath: "src/x.ts" });
    return seen.includes(text);
  }, 5000, what);
}

async function after(plugin: Started) {
  await plugin.step("s");
  let out = "";
  for (let i = 0; i < 3; i++) out += await tool(plugin, "s", "read", { filePath: "src/x.ts" });
  return out;
}

test("control: editing a delivered always file is delivered", async () => {
  const plugin = await setup();
  await writeFile(join(plugin.root, "docs/AGENTS.md"), "---\ninclude: always\n---\nALWAYS-DOCS v2\n");
  expect(await after(plugin)).toContain("ALWAYS-DOCS v2");
});

test("deleting a delivered always file is announced", async () => {
  const plugin = await setup();
  await rm(join(plugin.root, "docs/AGENTS.md"));
  const out = await after(plugin);
  const list = await callContextTool(plugin, "s", { action: "list" });
  expect(list).not.toContain("docs/AGENTS.md"); // the plugin knows it is gone
  expect(out).toContain('"docs/AGENTS.md" no longer applies');
});

test("deleting a delivered rule file is announced", async () => {
  const plugin = await setup();
  await rm(join(plugin.root, ".opencode/rules/r.md"));
  const out = await after(plugin);
  expect(await callContextTool(plugin, "s", { action: "list" })).not.toContain("rules/r.md");
  expect(out).toContain('".opencode/rules/r.md" no longer applies');
});

test("an always file made include: manual is announced as no longer applying", async () => {
  const plugin = await setup();
  await writeFile(join(plugin.root, "docs/AGENTS.md"), "---\ninclude: manual\n---\nALWAYS-DOCS v1\n");
  const out = await after(plugin);
  expect(await callContextTool(plugin, "s", { action: "list" })).toContain("docs/AGENTS.md: manual, not loaded");
  expect(out).toContain('"docs/AGENTS.md" no longer applies');
});

test("a prune rebuild does not put a newer version in the block while a later tool output holds an older copy: the next delivery sends it after that copy", async () => {
  const plugin = await project({ "CLAUDE.md": "ROOT v1\n", "pkg/AGENTS.md": "PKG v1\n", "pkg/x.ts": "x", "src/y.ts": "y" });
  const h = new Host(plugin.hooks, "ses_a");
  await h.user("go");
  let req = await h.request();
  expect(req.system[1]).toContain("ROOT v1");
  const { ids: [c1] } = await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  await h.request();
  await writeFile(join(plugin.root, "CLAUDE.md"), "ROOT v2\n");
  const { out: [o2] } = await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  expect(o2).toContain("ROOT v2");
  await h.request();
  await writeFile(join(plugin.root, "CLAUDE.md"), "ROOT v3\n");
  h.prune(c1!);
  req = await h.request();
  // also one more tool call and request: v3 should be the latest copy the model reads
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  req = await h.request();
  const prompt = promptOf(req);
  expect(latest(prompt).get("CLAUDE.md")).toBe("ROOT v3");
});

for (const tail of [0, 1]) test(`an edit saved before a compaction (tail ${tail}): no newer text before an older copy the kept tail still has, and the new text is the latest by the next tool output`, async () => {
  const plugin = await project({ "AGENTS.md": "ROOT v1\n", "pkg/AGENTS.md": "PKG v1\n", "pkg/x.ts": "x" });
  const h = new Host(plugin.hooks, "ses_c");
  await h.user("go");
  await h.request();
  const { out } = await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  expect(out[0]).toContain("PKG v1");
  await h.request();
  await writeFile(join(plugin.root, "pkg/AGENTS.md"), "PKG v2\n");
  await h.compact(tail);
  let req = await h.request();
  // With the old copy kept (tail 1), the block leaves the file to the next delivery: before, it put
  // v2 in the block, ahead of the kept v1, which the model then read as the latest.
  expect(latest(promptOf(req)).get("pkg/AGENTS.md")).toBe(tail === 0 ? "PKG v2" : "PKG v1");
  await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  req = await h.request();
  expect(latest(promptOf(req)).get("pkg/AGENTS.md")).toBe("PKG v2");
});

test("a deletion notice pruned: the block is built again without the deleted file (its copy there is not back in force)", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT\n", "pkg/AGENTS.md": "PKG: always use tabs\n", "pkg/x.ts": "x", "src/y.ts": "y" });
  const h = new Host(plugin.hooks, "ses_d");
  await h.user("go");
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  await h.request();
  await h.compact(0); // now pkg/AGENTS.md is in the system block
  let req = await h.request();
  expect(req.system[1]).toContain("PKG: always use tabs");
  await rm(join(plugin.root, "pkg/AGENTS.md"));
  const { out: [o], ids: [c] } = await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  expect(o).toContain('"pkg/AGENTS.md" no longer applies');
  req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  h.prune(c!);
  req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  req = await h.request();
  const prompt = promptOf(req);
  // The model reads the deleted file's rules with nothing saying they no longer apply.
  expect(prompt.includes("PKG: always use tabs") ? latest(prompt).get("pkg/AGENTS.md") : "DELETED").toBe("DELETED");
});

test("an unload's output pruned: the block is built again without the unloaded file", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT: answer in French\n", "src/y.ts": "y" });
  const h = new Host(plugin.hooks, "ses_u");
  await h.user("go");
  let req = await h.request();
  expect(req.system[1]).toContain("ROOT: answer in French");
  // the project_context tool, as OpenCode runs it
  const args = { action: "unload", path: "AGENTS.md", section: "", content: "" };
  const ctx = { sessionID: "ses_u", messageID: "m", agent: "build" };
  const text = await plugin.hooks.tool!.project_context!.execute(args as never, ctx as never);
  const { ids: [c] } = await h.tools([{ tool: "project_context", args, output: text as string }]);
  expect(text).toContain("disregard");
  req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  h.prune(c!);
  req = await h.request();
  const prompt = promptOf(req);
  const disregarded = /AGENTS\.md[^\n]*disregard/.test(prompt);
  expect(prompt.includes("ROOT: answer in French") && !disregarded).toBe(false);
});

test("a file a prune rebuild leaves out of the block (its touch forgotten) is not counted as held there: when it applies again it is sent", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT\n", "pkg/AGENTS.md": "PKG: use tabs\n", "pkg/x.ts": "x", "a/AGENTS.md": "A\n", "a/x.ts": "x", "b/AGENTS.md": "B\n", "b/x.ts": "x" }, { maxTouchedDirs: 2 });
  const h = new Host(plugin.hooks, "ses_e");
  await h.user("go");
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  await h.request();
  await h.compact(0);
  let req = await h.request();
  expect(req.system[1]).toContain("PKG: use tabs"); // whole hierarchy after the compaction
  // Two other directories: pkg/x.ts is the oldest touch and is forgotten (maxTouchedDirs 2).
  const { ids: [ca] } = await h.tools([{ tool: "read", args: { filePath: "a/x.ts" } }]);
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "b/x.ts" } }]);
  await h.request();
  // OpenCode prunes the output that carried a/AGENTS.md: the system block is rebuilt, without pkg/AGENTS.md.
  h.prune(ca!);
  req = await h.request();
  expect(req.system[1]).not.toContain("PKG: use tabs");
  // The agent works in pkg again.
  const { out: [back] } = await h.tools([{ tool: "edit", args: { filePath: "pkg/x.ts" } }]);
  req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  req = await h.request();
  expect(latest(promptOf(req)).get("pkg/AGENTS.md")).toBe("PKG: use tabs");
});

for (const watch of [true, false]) for (const gap of [0, 1100]) test(`a rule file deleted and created again is delivered (watch: ${watch}, ${gap} ms between)`, async () => {
  const plugin = await project({ "AGENTS.md": "R\n", "src/x.ts": "x", ".opencode/rules/r1.md": "RULE1\n", ".opencode/rules/r2.md": "RULE2 v1\n" }, { watch });
  await deliveredBy(plugin, "RULE2 v1", "rules");
  await rm(join(plugin.root, ".opencode/rules/r2.md"));
  await plugin.step("s");
  await tool(plugin, "s", "read", { filePath: "src/x.ts" });
  await Bun.sleep(gap);
  await writeFile(join(plugin.root, ".opencode/rules/r2.md"), "RULE2 v2\n");
  expect(await after(plugin)).toContain("RULE2 v2");
});

for (const watch of [true, false]) test(`a new rule file in the rules directory is delivered (watch: ${watch})`, async () => {
  const plugin = await project({ "AGENTS.md": "R\n", "src/x.ts": "x", ".opencode/rules/r1.md": "RULE1\n" }, { watch });
  await deliveredBy(plugin, "RULE1", "rules");
  await writeFile(join(plugin.root, ".opencode/rules/r3.md"), "RULE3 new\n");
  expect(await after(plugin)).toContain("RULE3 new");
});
test("a new always file beside an existing always file is delivered (watch: true; with watch false, a documented limit)", async () => {
  const plugin = await project({ "AGENTS.md": "R\n", "src/x.ts": "x", "docs/AGENTS.md": "---\ninclude: always\n---\nDOCS\n" , "docs/b/x.md": "x" }, { watch: true });
  await deliveredBy(plugin, "DOCS", "always");
  await writeFile(join(plugin.root, "docs/AGENTS.local.md"), "---\ninclude: always\n---\nDOCS LOCAL\n");
  expect(await after(plugin)).toContain("DOCS LOCAL");
});

test("files whose paths leave no room in the delivery budget are named once, not again at every call that reaches them (a hunt: 3.7 KB at every call, forever)", async () => {
  const long = "x".repeat(240);
  const files: Record<string, string> = { "AGENTS.md": "# root\n" };
  let dir = "";
  for (let level = 0; level < 14; level++) {
    dir += `${long}-${level}/`;
    files[`${dir}AGENTS.md`] = `# level ${level}\n\nrule ${level}.\n`;
  }
  files[`${dir}leaf.ts`] = "x";
  const plugin = await project(files);
  await plugin.step("s");
  const appended: number[] = [];
  for (let call = 0; call < 16; call++) {
    appended.push((await tool(plugin, "s", "read", { filePath: `${dir}leaf.ts` })).length - "tool result".length);
    await plugin.step("s");
  }
  // Files are sent while they fit; then nothing more is appended (before: the same list of names at every call).
  expect(appended.slice(0, 2).every((chars) => chars > 0)).toBe(true);
  expect(appended.slice(-4)).toEqual([0, 0, 0, 0]);
});

// Found by a review of the fixes above (each fails on 9edef17).
// A fenced block cannot be cut: the file is sent whole or only named.
const fenced = (head: string, lines: number) => "```\n" + head + "\n" + Array.from({ length: lines }, (_, i) => `v${i} = ${i}`).join("\n") + "\n```\n";

test("a file only named in a step short of budget is delivered by a later call that reaches it with the full budget", async () => {
  const plugin = await project({ "AGENTS.md": "# root\n", "big/AGENTS.md": fenced("BIG", 400), "big/inner/AGENTS.md": fenced("INNER", 30), "big/inner/a.ts": "a", "y/AGENTS.md": fenced("Y-RULE: use tabs", 40), "y/b.ts": "b" }, { deliveryTokens: 400 });
  const h = new Host(plugin.hooks, "ses_n");
  await h.user("go");
  await h.request();
  // One step, two calls: big/AGENTS.md never fits; y/AGENTS.md is named by the first call and does not fit what the step has left.
  await h.tools([{ tool: "read", args: { filePath: "big/inner/a.ts" } }, { tool: "read", args: { filePath: "y/b.ts" } }]);
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "big/inner/a.ts" } }]); // a new step: big's file is only named again (not sent)
  await h.request();
  let out = "";
  for (let i = 0; i < 3; i++) { out += (await h.tools([{ tool: "read", args: { filePath: "y/b.ts" } }])).out[0]; await h.request(); }
  expect(out).toContain("Y-RULE: use tabs"); // 400 tokens a step: y/AGENTS.md fits whole
});

/** A session whose frozen block holds a French-speaking root file, with the TUI's steering file (records) to unpin it. */
async function frenchRoot(sessionID: string): Promise<{ plugin: Started; h: Host; records: string }> {
  const records = await realpath(await mkdtemp(join(tmpdir(), "seams-records-")));
  const plugin = await project({ "AGENTS.md": "ROOT: answer in French\n", "src/y.ts": "y" }, { recordsDir: records });
  // After the plugin's dispose, which writes its last records.
  cleanups.push(() => rm(records, { recursive: true, force: true }));
  const h = new Host(plugin.hooks, sessionID);
  await h.user("go");
  expect((await h.request()).system[1]).toContain("ROOT: answer in French");
  return { plugin, h, records };
}

test("the TUI's unload of a file of the frozen block: its notice pruned, the block's copy is not back in force", async () => {
  const { plugin, h, records } = await frenchRoot("ses_tu");
  let req: Awaited<ReturnType<Host["request"]>>;
  appendSteer(records, "ses_tu", "unload", "AGENTS.md");
  await h.request(); // the TUI's request is applied
  const { out: [o], ids: [c] } = await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  expect(o).toContain("disregard");
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  h.prune(c!);
  req = await h.request();
  const prompt = promptOf(req);
  expect(prompt.includes("ROOT: answer in French") && !/AGENTS\.md[^\n]*disregard/.test(prompt)).toBe(false);
});

/** A provider that numbers calls per response: the first call of every step is "call_0". */
class ReusingHost extends Host {
  override nextId(p: string) { return p === "call" ? "call_0" : super.nextId(p); }
}

for (const [ids, Conversation] of [["its own id", Host], ["an id reused by every step (call_0)", ReusingHost]] as const) test(`after OpenCode's /undo removes the turn whose tool output carried a file (each call ${ids}), the file is sent again when reached`, async () => {
  const plugin = await project({ "AGENTS.md": "ROOT\n", "a/AGENTS.md": "A rules\n", "a/x.ts": "x", "pkg/AGENTS.md": "PKG: use tabs\n", "pkg/x.ts": "x" });
  const h = new Conversation(plugin.hooks, "ses_r");
  const before = await stepThenTurn(h, "a/x.ts", "edit pkg/x.ts");
  const { out: [o] } = await h.tools([{ tool: "edit", args: { filePath: "pkg/x.ts" } }]);
  expect(o).toContain("PKG: use tabs");
  await h.request();
  // /undo (SessionRevert): the last user message and everything after it leave the session.
  h.messages = h.messages.slice(0, before);
  await h.user("edit pkg/x.ts differently");
  await h.request();
  await h.tools([{ tool: "edit", args: { filePath: "pkg/x.ts" } }]);
  const req = await h.request();
  expect(latest(promptOf(req)).get("pkg/AGENTS.md")).toBe("PKG: use tabs");
});

/** A first step reading `read` (the block holding `expected`, if given), then the user's turn `said` begun: where that turn begins (for an /undo). */
async function stepThenTurn(h: Host, read: string, said: string, expected?: string): Promise<number> {
  await h.user("go");
  const first = await h.request();
  if (expected !== undefined) expect(first.system[1]).toContain(expected);
  await h.tools([{ tool: "read", args: { filePath: read } }]);
  await h.request();
  const before = h.messages.length;
  await h.user(said);
  await h.request();
  return before;
}

test("/undo of the turn that unloaded a file of the frozen block: the file is in force again, once (not silently dropped, nor sent again beside the block's copy)", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT: answer in French\n", "src/y.ts": "y" });
  const h = new Host(plugin.hooks, "ses_u");
  const before = await stepThenTurn(h, "src/y.ts", "unload the root instructions", "ROOT: answer in French");
  let req: Awaited<ReturnType<Host["request"]>>;
  const args = { action: "unload", path: "AGENTS.md", section: "", content: "" };
  const text = await plugin.hooks.tool!.project_context!.execute(args as never, { sessionID: "ses_u", messageID: "m", agent: "build" } as never);
  await h.tools([{ tool: "project_context", args, output: text as string }]);
  await h.request();
  h.messages = h.messages.slice(0, before); // /undo: the unload's turn is gone
  await h.user("carry on");
  req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  req = await h.request();
  const prompt = promptOf(req);
  // The root file's text is in force again, once: the block's copy, not one more on an output (a third review).
  expect(prompt.split("ROOT: answer in French").length - 1).toBe(1);
});

async function call(plugin: Started, callID: string, args: Record<string, unknown>) {
  await plugin.touch("s", "read", args);
  const result = { title: "read", output: "x", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID, args } as never, result as never);
  return result.output;
}

test("a continued session: deleting an always file a tool output delivered before the restart is announced", async () => {
  const root = await realpath(await mkdtemp(join(tmpdir(), "tmpx-")));
  for (const [rel, text] of Object.entries({ "AGENTS.md": "# Root\n", "src/x.ts": "x", "docs/AGENTS.md": "---\ninclude: always\n---\nALWAYS-DOCS v1\n" })) { await mkdir(dirname(join(root, rel)), { recursive: true }); await writeFile(join(root, rel), text); }
  spawnSync("git", ["init", "-q"], { cwd: root });
  const first = await start(root, { records: false });
  cleanups.push(async () => { await rm(root, { recursive: true, force: true }); });
  await first.step("s");
  // the catalog is built after the first block: the always file rides on a tool output
  const parts: unknown[] = [];
  let n = 0;
  await waitFor(async () => {
    const id = `c${++n}`;
    const output = await call(first, id, { filePath: "src/x.ts" });
    parts.push({ type: "tool", callID: id, tool: "read", state: { status: "completed", input: { filePath: "src/x.ts" }, output, time: { start: 1, end: 2 } } });
    return output.includes("ALWAYS-DOCS v1");
  }, 5000, "always file on an output");
  await first.dispose();
  const history = [
    { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
    { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts },
  ];
  const again = await start(root, { records: false }, { history });
  cleanups.unshift(() => again.dispose());
  await again.step("s");
  let out = "";
  for (let i = 0; i < 2; i++) out += await call(again, `d${i}`, { filePath: "src/x.ts" });
  expect(out).not.toContain("ALWAYS-DOCS v1"); // held by the restored output: not repeated
  await rm(join(root, "docs/AGENTS.md"));
  await again.step("s");
  out = "";
  for (let i = 0; i < 3; i++) out += await call(again, `e${i}`, { filePath: "src/x.ts" });
  expect(out).toContain('"docs/AGENTS.md" no longer applies');
});

// Found by a second review of the fixes (each fails on 1c3123a).
test("an /undo of an unrelated turn does not make every surviving output's named files be named again", async () => {
  const long = "x".repeat(240);
  const files: Record<string, string> = { "AGENTS.md": "# root\n", "other/o.ts": "o" };
  let dir = "";
  for (let level = 0; level < 14; level++) { dir += `${long}-${level}/`; files[`${dir}AGENTS.md`] = `# level ${level}\n\nrule ${level}.\n`; }
  files[`${dir}leaf.ts`] = "x";
  const plugin = await project(files);
  const h = new Host(plugin.hooks, "ses_c");
  await h.user("go");
  await h.request();
  const appended: number[] = [];
  for (let call = 0; call < 12; call++) { appended.push((await h.tools([{ tool: "read", args: { filePath: `${dir}leaf.ts` } }])).out[0]!.length - "tool result".length); await h.request(); }
  expect(appended.slice(-3)).toEqual([0, 0, 0]);
  const before = h.messages.length;
  await h.user("look at other");
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "other/o.ts" } }]);
  await h.request();
  h.messages = h.messages.slice(0, before); // /undo of that turn: the outputs naming the files all survive
  await h.user("again");
  await h.request();
  const after: number[] = [];
  for (let call = 0; call < 3; call++) { after.push((await h.tools([{ tool: "read", args: { filePath: `${dir}leaf.ts` } }])).out[0]!.length - "tool result".length); await h.request(); }
  expect(after).toEqual([0, 0, 0]);
});

/** In a user's turn, the model unloads `path`; then that turn is undone (/undo) and the user says more. */
async function unloadThenUndo(plugin: Started, h: Host, path: string): Promise<void> {
  const before = h.messages.length;
  await h.user(`drop ${path}`);
  await h.request();
  const { out: [unloaded] } = await ctx(plugin, h, { action: "unload", path });
  expect(unloaded).toContain("disregard");
  await h.request();
  h.messages = h.messages.slice(0, before);
  await h.user("carry on");
}

/** The model's unload of lib undone, lib/AGENTS.md edited: the latest text of it the model reads two steps later. */
async function editAfterUndoneUnload(plugin: Started, h: Host): Promise<string | undefined> {
  await unloadThenUndo(plugin, h, "lib");
  await h.request();
  await writeFile(join(plugin.root, "lib/AGENTS.md"), "LIB: use spaces\n");
  let req = await h.request();
  for (let i = 0; i < 2; i++) {
    await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
    req = await h.request();
  }
  return latest(promptOf(req)).get("lib/AGENTS.md");
}

async function ctx(plugin: Started, h: Host, args: Record<string, string>) {
  const full = { path: "", section: "", content: "", ...args };
  const text = await plugin.hooks.tool!.project_context!.execute(full as never, { sessionID: h.id, messageID: "m", agent: "build" } as never);
  return h.tools([{ tool: "project_context", args: full, output: text as string }]);
}

test("/undo of the unload of a pinned directory whose file is in the frozen block: the file's later edit reaches the model", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT\n", "lib/AGENTS.md": "LIB: use tabs\n", "lib/l.ts": "l", "src/y.ts": "y" }, { pin: ["lib"] });
  const h = new Host(plugin.hooks, "ses_f");
  await h.user("go");
  let req = await h.request();
  expect(req.system[1]).toContain("LIB: use tabs"); // pinned by the option: in the frozen block
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  await h.request();
  expect(await editAfterUndoneUnload(plugin, h)).toBe("LIB: use spaces");
});

// The TUI's unload, told on a tool output of a turn the user later undoes: the file the user took out comes back.
test("a TUI unload survives an /undo of the turn whose output happened to tell its notice", async () => {
  const { plugin, h, records } = await frenchRoot("ses_tu");
  let req: Awaited<ReturnType<Host["request"]>>;
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  await h.request();
  const before = h.messages.length;
  await h.user("refactor y");
  appendSteer(records, "ses_tu", "unload", "AGENTS.md"); // the user unpins the root file in the TUI
  await h.request();
  const { out: [o] } = await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  expect(o).toContain("taken out of this session's context by the user");
  await h.request();
  h.messages = h.messages.slice(0, before); // /undo of the refactor turn (not of the TUI's unpin)
  await h.user("refactor y another way");
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  req = await h.request();
  const prompt = promptOf(req);
  // The user's unpin still holds: its text is not in force without a word.
  expect(prompt.includes("ROOT: answer in French") && !/AGENTS\.md[^\n]*disregard/.test(prompt)).toBe(false);
});

// A git whose listing hangs (a huge or network worktree): rev-parse and config answer at once, ls-files never.
function slowGit(dir: string): string {
  const bin = join(dir, "bin");
  mkdirSync(bin);
  writeFileSync(join(bin, "git"), `#!/bin/bash\nfor a in "$@"; do if [ "$a" = "ls-files" ]; then exec sleep 30; fi; done\nexec /usr/bin/git "$@"\n`);
  chmodSync(join(bin, "git"), 0o755);
  return bin;
}

test("a continued session's first step waits for the worktree catalog a bounded time: a git whose listing hangs held it 10 s", async () => {
  const root = await realpath(await mkdtemp(join(tmpdir(), "tmpx-")));
  const scratch = await realpath(await mkdtemp(join(tmpdir(), "tmpx-bin-")));
  for (const [rel, text] of Object.entries({ "AGENTS.md": "# Root\n", "src/x.ts": "x" })) { mkdirSync(dirname(join(root, rel)), { recursive: true }); writeFileSync(join(root, rel), text); }
  spawnSync("git", ["init", "-q"], { cwd: root });
  const path = process.env.PATH;
  process.env.PATH = `${slowGit(scratch)}:${path}`;
  const history = [
    { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
    { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts: [{ type: "tool", callID: "c1", tool: "read", state: { status: "completed", input: { filePath: "src/x.ts" }, output: "x", time: { start: 1, end: 2 } } }] },
  ];
  const plugin = await start(root, { records: false }, { history });
  cleanups.push(async () => { await plugin.dispose(); await rm(root, { recursive: true, force: true }); await rm(scratch, { recursive: true, force: true }); });
  const t0 = performance.now();
  const block = await plugin.step("s");
  const ms = performance.now() - t0;
  process.env.PATH = path;
  expect(block).toContain("# Root");
  // The wait is bounded (1 s): before, the listing's 10 s timeout, or a wrapper's child's whole life.
  expect(ms).toBeLessThan(5000);
}, 40_000);

// Found by a third review (a revert to a part of a message, counted by parts, took plan mode's reminder for an undo).
/**
 * OpenCode 1.18.33 SessionPrompt.run: C = filterCompacted(session) (fresh from the DB each step), then
 * SessionReminders.apply pushes an in-memory (never saved) synthetic text part onto the LAST USER
 * message when the agent is "plan" (or "build" after a plan turn), then messages.transform.
 */
async function requestWithReminder(h: Host, reminder: boolean) {
  const messages = structuredClone(h.messages);
  if (reminder) messages.findLast((m) => m.info.role === "user")!.parts.push({ id: "prt_reminder", type: "text", text: "<system-reminder>plan mode</system-reminder>", synthetic: true });
  await h.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
  const system = [h.header];
  await h.hooks["experimental.chat.system.transform"]!({ sessionID: h.id, model: {} as never } as never, { system });
  return { system, messages };
}

async function subtaskSession(reminder: boolean, undo = false) {
  const plugin = await project({ "AGENTS.md": "ROOT\n", "pkg/AGENTS.md": "PKG v1\n", "pkg/x.ts": "x" });
  const h = new Host(plugin.hooks, "ses_p");
  await h.user("go");
  await requestWithReminder(h, reminder);
  await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  await requestWithReminder(h, reminder);
  // The subagent edits pkg/AGENTS.md; OpenCode's handleSubtask (a command with subtask: true) runs
  // tool.execute.after with callID = the tool PART's id (Z.id), the part's callID being another id.
  await writeFile(join(plugin.root, "pkg/AGENTS.md"), "PKG v2 tabs\n");
  const m = h.msg("assistant");
  const partId = h.nextId("prt");
  const o = { title: "task", output: "task done", metadata: {} };
  await h.hooks["tool.execute.after"]!({ tool: "task", sessionID: h.id, callID: partId, args: { prompt: "p", description: "d", subagent_type: "general" } } as never, o as never);
  expect(o.output).toContain("PKG v2 tabs");
  m.parts.push({ id: partId, type: "tool", callID: "toolu_other", tool: "task", state: { status: "completed", input: {}, ...o, time: { start: 1, end: 2 } } });
  h.messages.push(m);
  await requestWithReminder(h, reminder);
  h.messages.push(Object.assign(h.msg("assistant"), { parts: [{ id: h.nextId("prt"), type: "text", text: "done" }] }));
  // Q&A turns answered in one step (no tool call): no /undo anywhere.
  await h.user("what does pkg do?");
  await requestWithReminder(h, reminder);
  h.messages.push(Object.assign(h.msg("assistant"), { parts: [{ id: h.nextId("prt"), type: "text", text: "it does x" }] }));
  const before = h.messages.length;
  await h.user("and then?");
  await requestWithReminder(h, reminder);
  // /undo of that last question's turn (only it): the subtask's output stays.
  if (undo) {
    h.messages.push(Object.assign(h.msg("assistant"), { parts: [{ id: h.nextId("prt"), type: "text", text: "then y" }] }));
    h.messages = h.messages.slice(0, before);
    await h.user("and then, really?");
    await requestWithReminder(h, reminder);
  }
  await h.tools([{ tool: "read", args: { filePath: "pkg/x.ts" } }]);
  const req = await requestWithReminder(h, reminder);
  return promptOf(req).split("PKG v2 tabs").length - 1;
}

for (const [what, reminder, undo] of [["no reminder", false, false], ["OpenCode's plan-mode reminder part on the last user message (held in memory, not saved)", true, false], ["an /undo of a later turn", false, true]] as const) {
  test(`a subagent's edit delivered on its task output (carried under the part's id) reaches the model once: ${what}`, async () => {
    expect(await subtaskSession(reminder, undo)).toBe(1);
  });
}

test("/undo of the unload of a directory pinned by the tool (file delivered on an output): the file's later edit reaches the model", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT\n", "lib/AGENTS.md": "LIB: use tabs\n", "lib/l.ts": "l", "src/y.ts": "y" });
  const h = new Host(plugin.hooks, "ses_f");
  await h.user("go");
  let req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  await h.request();
  await h.user("pin lib");
  await h.request();
  const { out: [l] } = await ctx(plugin, h, { action: "load", path: "lib" });
  expect(l).toContain("LIB: use tabs");
  await h.request();
  expect(await editAfterUndoneUnload(plugin, h)).toBe("LIB: use spaces");
});

// unload (turn 1), load again (turn 2), then /undo of both turns.
test("unload, load, then /undo of both: the file is in the block once, not repeated", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT: answer in French\n", "src/y.ts": "y" });
  const h = new Host(plugin.hooks, "ses_v");
  await h.user("go");
  let req = await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  await h.request();
  const before = h.messages.length;
  await h.user("unload root");
  await h.request();
  await ctx(plugin, h, { action: "unload", path: "AGENTS.md" });
  await h.request();
  await h.user("load it back");
  await h.request();
  const { out: [l] } = await ctx(plugin, h, { action: "load", path: "AGENTS.md" });
  await h.request();
  h.messages = h.messages.slice(0, before);
  await h.user("carry on");
  await h.request();
  for (let i = 0; i < 2; i++) { await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]); req = await h.request(); }
  const prompt = promptOf(req);
  expect(prompt.split("ROOT: answer in French").length - 1).toBe(1);
});

test("the model unloads a pinned dir, then the user unpins it in the TUI, then /undo of the model's turn: the user's unpin holds", async () => {
  const records = await realpath(await mkdtemp(join(tmpdir(), "tmpx-rec-")));
  cleanups.push(() => rm(records, { recursive: true, force: true }));
  const plugin = await project({ "AGENTS.md": "ROOT\n", "lib/AGENTS.md": "LIB: use tabs\n", "lib/l.ts": "l", "src/y.ts": "y" }, { pin: ["lib"], recordsDir: records });
  const h = new Host(plugin.hooks, "ses_t");
  const before = await stepThenTurn(h, "src/y.ts", "drop lib", "LIB: use tabs");
  let req: Awaited<ReturnType<Host["request"]>>;
  await ctx(plugin, h, { action: "unload", path: "lib" });
  await h.request();
  appendSteer(records, "ses_t", "unload", "lib"); // the user unpins lib in the TUI too
  await h.request();
  h.messages = h.messages.slice(0, before); // /undo of the model's turn only
  await h.user("carry on");
  req = await h.request();
  for (let i = 0; i < 2; i++) { await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]); req = await h.request(); }
  const prompt = promptOf(req);
  const list = String(await plugin.hooks.tool!.project_context!.execute({ action: "list", path: "", section: "", content: "" } as never, { sessionID: h.id, messageID: "m", agent: "build" } as never));
  expect(list).toContain("Pinned: (nothing)");
  // The user's own unpin (not undone) holds: lib's text is not in force without a word.
  expect(prompt.includes("LIB: use tabs") && !/lib\/AGENTS\.md[^\n]*(disregard|taken out)/.test(prompt)).toBe(false);
});

for (const [ids, Conversation, undo] of [["unique ids", Host, true], ["ids reused (call_0)", ReusingHost, true], ["control, no undo, call_0", ReusingHost, false]] as const) test(`an always file only NAMED by an undone turn's output is named or sent again later (${ids})`, async () => {
  const plugin = await project({ "AGENTS.md": "ROOT\n", "src/x.ts": "x" }, { deliveryTokens: 150 });
  const h = new Conversation(plugin.hooks, "ses_n");
  const before = await stepThenTurn(h, "src/x.ts", "work");
  // A large always file appears (a pull, another agent): too big for the step's budget, only named.
  for (const d of ["docs", "guide"]) {
    await mkdir(join(plugin.root, d), { recursive: true });
    await writeFile(join(plugin.root, d, "AGENTS.md"), "---\ninclude: always\n---\n" + `${d.toUpperCase()}RULE line of text here. `.repeat(400) + "\n");
  }
  let named = "";
  await waitFor(async () => {
    const { out: [o] } = await h.tools([{ tool: "read", args: { filePath: "src/x.ts" } }]);
    await h.request();
    named = o!;
    return o!.includes("docs/AGENTS.md") && o!.includes("guide/AGENTS.md");
  }, 5000, "always file named");
  const onlyNamed = named.includes("DOCSRULE") ? "guide" : "docs";
  expect(named).not.toContain(`${onlyNamed.toUpperCase()}RULE`);
  if (undo) h.messages = h.messages.slice(0, before); // /undo of that turn
  await h.user("carry on");
  let req = await h.request();
  for (let i = 0; i < 3; i++) { await h.tools([{ tool: "read", args: { filePath: "src/x.ts" } }]); req = await h.request(); }
  const prompt = promptOf(req);
  expect(prompt).toContain(`${onlyNamed}/AGENTS.md`);
});

test("two unloads run in parallel: each notice is known by its own call, so pruning one brings its file's block copy back out (found in review)", async () => {
  const plugin = await project({ "AGENTS.md": "ROOT: answer in French\n", "AGENTS.local.md": "LOCAL: use tabs\n", "src/y.ts": "y" });
  const h = new Host(plugin.hooks, "ses_pp");
  await h.user("go");
  let req = await h.request();
  expect(req.system[1]).toContain("ROOT: answer in French");
  expect(req.system[1]).toContain("LOCAL: use tabs");
  // Two project_context calls of one step: both run before either's tool.execute.after, as OpenCode runs parallel calls.
  const ctx = { sessionID: "ses_pp", messageID: "m", agent: "build" };
  const root = { action: "unload", path: "AGENTS.md", section: "", content: "" };
  const local = { action: "unload", path: "AGENTS.local.md", section: "", content: "" };
  const [rootText, localText] = await Promise.all([root, local].map((args) => plugin.hooks.tool!.project_context!.execute(args as never, ctx as never)));
  expect(rootText).toContain("disregard");
  expect(localText).toContain("disregard");
  const { ids: [, localCall] } = await h.tools([
    { tool: "project_context", args: root, output: rootText as string },
    { tool: "project_context", args: local, output: localText as string },
  ]);
  await h.request();
  await h.tools([{ tool: "read", args: { filePath: "src/y.ts" } }]);
  // Only the local file's notice is pruned: its copy in the frozen block must not be back in force.
  h.prune(localCall!);
  req = await h.request();
  const prompt = promptOf(req);
  const disregarded = /AGENTS\.local\.md[^\n]*disregard/.test(prompt);
  expect(prompt.includes("LOCAL: use tabs") && !disregarded).toBe(false);
});
