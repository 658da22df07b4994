import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { frameCost } from "../plugin/block/plan.ts";
import { deletedNotice, leftOutListOf, sectionHead, watchNotice, WHOLE_TAIL } from "../plugin/block/render.ts";
import { textBound } from "../plugin/block/tokens.ts";
import { callContextTool, projects, sectionPaths, start, waitFor, type Started } from "./helpers/harness.ts";
import { tokens } from "./helpers/measure.ts";

const openProject = projects();
const open = (options?: Record<string, unknown>, history: unknown[] = []) => openProject("monorepo", options, { history });

/** Runs a tool call as OpenCode does (before, then after with the tool's result) and returns the output the model gets. */
async function tool(plugin: Started, sessionID: string, name: string, args: Record<string, unknown>, result = "tool result", metadata: Record<string, unknown> = {}) {
  await plugin.touch(sessionID, name, args);
  const output = { title: name, output: result, metadata };
  await plugin.hooks["tool.execute.after"]!({ tool: name, sessionID, callID: `call-${sessionID}-${Math.random()}`, args } as never, output as never);
  return output;
}

/** Session "c"'s history as OpenCode gives it: a user message, then a read of apps/web/src/App.tsx whose output was `output`. */
const historyOf = (output: string) => [
  { info: { id: "msg_1", role: "user", sessionID: "c" }, parts: [{ type: "text", text: "hi" }] },
  {
    info: { id: "msg_2", role: "assistant", sessionID: "c" },
    parts: [{ type: "tool", callID: "call-1", tool: "read", state: { status: "completed", input: { filePath: "apps/web/src/App.tsx" }, output, time: { start: 1, end: 2 } } }],
  },
];

/** Runs chat.message for a new user message and returns the parts the plugin added. */
async function userMessage(plugin: Started, sessionID: string) {
  const message = { id: `msg_${Date.now()}_${Math.random()}`, sessionID, role: "user" };
  const parts: { id: string; type: string; text?: string; messageID?: string }[] = [{ id: `prt_${message.id}_1`, type: "text", text: "go on" }];
  await plugin.hooks["chat.message"]!({ sessionID, agent: "build" } as never, { message, parts } as never);
  return parts.slice(1);
}

describe("stable delivery (the default)", () => {
  test("the system block holds what the session had at its start and stays byte-identical; a new directory's file rides on the tool output that reached it, once", async () => {
    const plugin = await open();
    const first = await plugin.step("s");
    expect(sectionPaths(first)).toEqual(["AGENTS.md"]);
    const reached = await tool(plugin, "s", "edit", { filePath: "services/api/plugins/payments/src/charge.ts" });
    expect(reached.output.startsWith("tool result\n\n<project-context")).toBe(true);
    // Closest first: the file of the directory worked in leads.
    expect(sectionPaths(reached.output)).toEqual(["services/api/plugins/payments/AGENTS.md", "services/api/AGENTS.md"]);
    expect(await plugin.step("s")).toBe(first);
    const again = await tool(plugin, "s", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    expect(again.output).toBe("tool result");
    expect(await plugin.step("s")).toBe(first);
  });

  test("a file left pending for the budget is sent when a later step reaches its directory again, whichever of the directory's two files it is (found in review)", async () => {
    // The local variant comes first (closest first) and does not fit: the directory's own file is sent, it is left pending.
    const files = { "AGENTS.md": "# Root\n\nBe kind.\n", "pkg/AGENTS.md": "# Pkg\n\nUse tabs.\n", "pkg/AGENTS.local.md": `# Local\n\n${"- a local rule about something quite specific.\n".repeat(400)}` };
    const plugin = await openProject(undefined, { deliveryTokens: 100 }, { files });
    await plugin.step("s");
    const first = await tool(plugin, "s", "read", { filePath: "pkg/x.ts" });
    expect(sectionPaths(first.output)).toEqual(["pkg/AGENTS.md"]);
    expect(first.output).toContain('pending (budget; sent in a later step): "pkg/AGENTS.local.md"');
    await plugin.step("s");
    // The same path again: nothing new to the session, but its directory holds a file the model knows only by name.
    const again = await tool(plugin, "s", "read", { filePath: "pkg/x.ts" });
    expect(sectionPaths(again.output)).toEqual(["pkg/AGENTS.local.md"]);
  });

  test("a rule file left pending is sent when a later call reaches its directory again, though another rule file there went whole (found in review)", async () => {
    const files = { ".opencode/rules/a.md": "# A\n\nRule a.\n", ".opencode/rules/b.md": `# B\n\n${"- a rule about something quite specific.\n".repeat(400)}` };
    // Rule files apply always: with a system budget too small for them they go to the next tool output.
    const plugin = await openProject(undefined, { deliveryTokens: 100, systemTokens: 60 }, { files });
    const notes = { filePath: ".opencode/rules/notes.txt" };
    // They join once the worktree's catalog is built.
    const first = await waitFor(async () => {
      await plugin.step("s");
      const output = (await tool(plugin, "s", "read", notes)).output;
      return output.includes("pending") ? output : undefined;
    }, 5000, "the rule files, b.md pending");
    expect(sectionPaths(first)).toEqual([".opencode/rules/a.md"]);
    await plugin.step("s");
    const again = await tool(plugin, "s", "read", notes);
    expect(sectionPaths(again.output)).toEqual([".opencode/rules/b.md"]);
  });

  test("a touch in the directory of a pinned file brings that directory's whole chain", async () => {
    const plugin = await open();
    await plugin.step("s");
    const pinned = await callContextTool(plugin, "s", { action: "load", path: "services/api/plugins/payments/AGENTS.md" });
    expect(sectionPaths(pinned)).toEqual(["services/api/plugins/payments/AGENTS.md"]);
    const reached = await tool(plugin, "s", "read", { filePath: "services/api/plugins/payments/package.json" });
    expect(sectionPaths(reached.output)).toEqual(["services/api/AGENTS.md"]);
  });

  test("past maxTouchedDirs a forgotten path takes its directory's files out only when no touched path starts there any more", async () => {
    const plugin = await open({ maxTouchedDirs: 2 });
    await plugin.step("s");
    const listed = async () => (await callContextTool(plugin, "s", { action: "list" })).includes("apps/web/AGENTS.md");
    await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    await tool(plugin, "s", "read", { filePath: "apps/web/src/main.tsx" });
    // App.tsx is forgotten; main.tsx still reaches apps/web.
    await tool(plugin, "s", "read", { filePath: "tools/scripts/release.sh" });
    expect(await listed()).toBe(true);
    // main.tsx goes too, for a path where a walk already starts: nothing reaches apps/web any more,
    // so an edit there is no news for this session.
    await tool(plugin, "s", "read", { filePath: "tools/scripts/notes.sh" });
    await writeFile(join(plugin.root, "apps/web/AGENTS.md"), "# Web\nUse signals now.\n");
    expect((await tool(plugin, "s", "read", { filePath: "tools/scripts/release.sh" })).output).toBe("tool result");
    expect(await listed()).toBe(false);
  });

  test("an edit to a delivered file arrives as its new text on the next tool output; the system block does not move", async () => {
    const plugin = await open();
    const first = await plugin.step("s");
    await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    await writeFile(join(plugin.root, "apps/web/AGENTS.md"), "# Web\nUse signals now.\n");
    const next = await tool(plugin, "s", "grep", { pattern: "x", path: "services/api" });
    expect(next.output).toContain("Use signals now.");
    expect(next.output).toContain('status="updated"');
    expect(await plugin.step("s")).toBe(first);
  });

  test("an edit saved right before a tool call is in that call's output, however recently a barrier passed", async () => {
    const plugin = await open();
    await plugin.step("s");
    await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    for (let i = 0; i < 10; i++) {
      // A directory edited or read in the last 50 ms is stat'd at every step whatever the barrier says:
      // this is about a quiet one, whose edit only the watch event (so the barrier) can tell. Two quiet
      // periods: the first step after an edit reads the file again (it was read just after it changed).
      for (let quiet = 0; quiet < 2; quiet++) {
        await Bun.sleep(60);
        await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
      }
      // Saved synchronously, so that no turn of the loop dispatches its watch event before the calls.
      writeFileSync(join(plugin.root, "apps/web/AGENTS.md"), `# Web\nVersion ${i}.\n`);
      const [first, second] = await Promise.all([
        tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" }),
        tool(plugin, "s", "grep", { pattern: "x", path: "apps/web/src" }),
      ]);
      expect(`${first.output}${second.output}`).toContain(`Version ${i}.`);
    }
  });

  test("an edit to a file of the system block made between messages rides on the next user message", async () => {
    const plugin = await open();
    const first = await plugin.step("s");
    await writeFile(join(plugin.root, "AGENTS.md"), "# Root\nAlways run the linter.\n");
    const parts = await userMessage(plugin, "s");
    expect(parts).toHaveLength(1);
    expect(parts[0]!.text).toContain("Always run the linter.");
    expect(await plugin.step("s")).toBe(first);
    expect(await userMessage(plugin, "s")).toHaveLength(0);
  });

  test("four tool calls of one step reaching the same directory deliver its file once", async () => {
    const plugin = await open();
    await plugin.step("s");
    const outputs = await Promise.all(
      ["a.ts", "b.ts", "c.ts", "d.ts"].map((name) => tool(plugin, "s", "read", { filePath: `apps/web/src/${name}` })),
    );
    const carrying = outputs.filter((output) => output.output.includes("apps/web/AGENTS.md"));
    expect(carrying).toHaveLength(1);
  });

  test("after a compaction the system block holds the whole hierarchy, and nothing is delivered twice", async () => {
    const plugin = await open();
    const first = await plugin.step("s");
    await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } } as never);
    const rebuilt = await plugin.step("s");
    expect(rebuilt).not.toBe(first);
    expect(sectionPaths(rebuilt)).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
    expect((await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" })).output).toBe("tool result");
    expect(await plugin.step("s")).toBe(rebuilt);
  });

  test("a pruned tool output sends the files it carried back to the system block", async () => {
    const plugin = await open();
    await plugin.step("s");
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    const output = { title: "read", output: "x", metadata: {} };
    await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID: "call-pruned", args: { filePath: "apps/web/src/App.tsx" } } as never, output as never);
    expect(output.output).toContain("apps/web/AGENTS.md");
    const messages = [
      {
        info: { id: "msg_1", sessionID: "s", role: "assistant" },
        parts: [{ type: "tool", callID: "call-pruned", tool: "read", state: { status: "completed", output: output.output, time: { start: 1, end: 2, compacted: 3 } } }],
      },
    ];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });

  test("a deleted file is announced once", async () => {
    const plugin = await open();
    await plugin.step("s");
    await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    await rm(join(plugin.root, "apps/web/AGENTS.md"));
    const next = await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    expect(next.output).toContain('"apps/web/AGENTS.md" no longer applies (deleted, moved or replaced)');
    expect((await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" })).output).toBe("tool result");
  });

  test("OpenCode's read reminder counts as the delivery; its second copy of the same file is removed", async () => {
    const plugin = await open();
    await plugin.step("s");
    const path = join(plugin.root, "apps/web/AGENTS.md");
    const raw = await readFile(path, "utf8");
    const reminder = `\n\n<system-reminder>\nInstructions from: ${path}\n${raw}\n</system-reminder>`;
    const first = await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" }, `<content>1: x</content>${reminder}`, { loaded: [path] });
    expect(first.output).toBe(`<content>1: x</content>${reminder}`);
    const second = await tool(plugin, "s", "read", { filePath: "apps/web/src/index.ts" }, `<content>1: y</content>${reminder}`, { loaded: [path] });
    expect(second.output).toBe("<content>1: y</content>");
  });

  test("a file the host's prompt carries is not repeated; a quoted marker line inside another file does not count", async () => {
    const plugin = await open();
    const rootPath = join(plugin.root, "AGENTS.md");
    const raw = await readFile(rootPath, "utf8");
    const header = `You are opencode.\nInstructions from: ${rootPath}\n${raw}`;
    expect(await plugin.step("s", header)).toBeUndefined();
    const nested = join(plugin.root, "apps/web/AGENTS.md");
    const quoting = `You are opencode.\nInstructions from: ${rootPath}\n${raw}\nInstructions from: ${nested}\nnot the file's text`;
    await plugin.step("t", quoting);
    const reached = await tool(plugin, "t", "read", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(reached.output)).toEqual(["apps/web/AGENTS.md"]);
  });

  for (const delivery of ["stable", "system"] as const) {
    test(`delivery ${delivery}: a file the host's prompt carries raw, whose imports the plugin inlines, is still sent: OpenCode's copy lacks the imported text (found in review)`, async () => {
      const raw = "# root\n\n@docs/style.md\n";
      const files = { "AGENTS.md": raw, "docs/style.md": "# style\n- never indent with tabs\n", "web/x.ts": "" };
      const plugin = await openProject(undefined, { delivery, records: false }, { files });
      // OpenCode sends the session directory's AGENTS.md itself, as it is on disk: the import line only.
      const header = `You are opencode.\nInstructions from: ${join(plugin.root, "AGENTS.md")}\n${raw}`;
      const first = (await plugin.step("s", header)) ?? "";
      const reached = await tool(plugin, "s", "read", { filePath: "web/x.ts" });
      const next = (await plugin.step("s", header)) ?? "";
      expect(first + reached.output + next).toContain("[imported from docs/style.md]\n# style\n- never indent with tabs\n");
    });
  }

  test("a continued session is rebuilt from its history: what its tool outputs still carry is not sent again", async () => {
    const plugin = await open();
    await plugin.step("s");
    const delivered = await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    const history = historyOf(delivered.output);
    const continued = await open({}, history);
    expect(sectionPaths(await continued.step("c"))).toEqual(["AGENTS.md"]);
    expect((await tool(continued, "c", "read", { filePath: "apps/web/src/App.tsx" })).output).toBe("tool result");
  });

  test("a continued session whose delivered file was edited since gets the new text in its first request, with no tool call needed", async () => {
    const plugin = await open();
    await plugin.step("s");
    const delivered = await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    const history = historyOf(delivered.output);
    const continued = await openProject("monorepo", {}, { history });
    await writeFile(join(continued.root, "apps/web/AGENTS.md"), "# Web\nEdited between the two runs.\n");
    const first = await continued.step("c");
    expect(sectionPaths(first)).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
    expect(first).toContain("Edited between the two runs.");
  });
});

describe("delivery: system", () => {
  test("the block is rebuilt every step with everything the session reached", async () => {
    const plugin = await open({ delivery: "system" });
    await plugin.step("s");
    const reached = await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" });
    expect(reached.output).toBe("tool result");
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });

  test("OpenCode's read reminder of a file that imports another is not the file as the rules make it: the imported text reaches the model (found in review)", async () => {
    const files = { "AGENTS.md": "# root\n", "web/AGENTS.md": "# web\n\n@docs/style.md\n", "web/docs/style.md": "# style\n- never indent with tabs\n", "web/x.ts": "" };
    const plugin = await openProject(undefined, { delivery: "system", records: false }, { files });
    await plugin.step("s");
    const path = join(plugin.root, "web/AGENTS.md");
    // OpenCode's copy is the raw file: the import line, not the imported text.
    const reminder = `\n\n<system-reminder>\nInstructions from: ${path}\n${files["web/AGENTS.md"]}\n</system-reminder>`;
    const read = await tool(plugin, "s", "read", { filePath: "web/x.ts" }, `<content>1: x</content>${reminder}`, { loaded: [path] });
    const block = (await plugin.step("s")) ?? "";
    expect(sectionPaths(block)).toEqual(["AGENTS.md", "web/AGENTS.md"]);
    expect(read.output + block).toContain("- never indent with tabs");
  });
});

describe("each file once, on a 45-file monorepo (the shape where a cut copy used to ride beside OpenCode's whole copy)", () => {
  /** 45 nested context files of ~300-2,300 tokens, and a session that reads a source file in each package, OpenCode-style. */
  async function monorepo(plugin: Started): Promise<string[]> {
    const rels: string[] = [];
    for (let i = 0; i < 45; i++) {
      const rel = `packages/p${i}/AGENTS.md`;
      const rules = Array.from({ length: 20 + (i % 9) * 20 }, (_, j) => `- p${i} rule ${j}: keep handlers small and typed.`).join("\n");
      await mkdir(join(plugin.root, `packages/p${i}/src`), { recursive: true });
      await writeFile(join(plugin.root, rel), `# Package p${i}\n\n${rules}\n`);
      rels.push(rel);
    }
    return rels;
  }

  /** A read as OpenCode 1.18.33 returns it: the file, then its reminder carrying the nested file whole. */
  async function read(plugin: Started, sessionID: string, rel: string): Promise<string> {
    const path = join(plugin.root, rel);
    const raw = await readFile(path, "utf8");
    const body = `<content>\n1: export {}\n</content>`;
    const output = await tool(plugin, sessionID, "read", { filePath: join(plugin.root, rel.replace("AGENTS.md", "src/index.ts")) }, `${body}\n\n<system-reminder>\nInstructions from: ${path}\n${raw}\n</system-reminder>`, { loaded: [path] });
    return output.output;
  }

  for (const delivery of ["stable", "system"] as const) {
    test(`delivery ${delivery}: no file is both cut and whole in what the model gets, and every file that fits arrives whole`, async () => {
      const plugin = await open({ delivery, systemTokens: 4000, deliveryTokens: 3000 });
      const rels = await monorepo(plugin);
      await plugin.step("s");
      const conversation: string[] = [];
      for (const rel of rels) {
        conversation.push(await read(plugin, "s", rel));
        const system = (await plugin.step("s")) ?? "";
        // What this request carries: the system block and every tool output so far.
        for (const candidate of rels) {
          const marker = `# Package p${candidate.slice(10, candidate.indexOf("/", 10))}`;
          const whole = [system, ...conversation].filter((text) => text.includes(`${marker}\n`) && !text.includes(`read ${candidate} from line`)).length;
          const cut = [system, ...conversation].filter((text) => text.includes(`read ${candidate} from line`)).length;
          expect(cut > 0 && whole > 0).toBe(false);
        }
      }
      // Every file fits either budget alone: each reached the model whole (OpenCode's copy or the plugin's).
      for (const rel of rels) {
        const raw = await readFile(join(plugin.root, rel), "utf8");
        expect(conversation.some((text) => text.includes(raw.trimEnd()))).toBe(true);
      }
    });
  }
});

describe("no rebuild repeats what a live tool output carries (found in review)", () => {
  const count = (text: string, needle: string) => text.split(needle).length - 1;
  const pruned = (callID: string) => ({
    messages: [{ info: { id: "m", sessionID: "s", role: "assistant" }, parts: [{ type: "tool", callID, tool: "read", state: { status: "completed", output: "", time: { start: 1, end: 2, compacted: 3 } } }] }],
  });
  /** A tool part as OpenCode sends it; `compacted`: pruned. */
  const part = (output: string, compacted?: number, callID = "call_0") => ({ type: "tool", callID, tool: "read", state: { status: "completed", output, time: { start: 1, end: 2, ...(compacted === undefined ? {} : { compacted }) } } });
  /** Two `call_0` outputs in the conversation, the first pruned by OpenCode. */
  async function prunedThenKept(plugin: Started, first: string, second: string) {
    const messages = [
      { info: { id: "m1", sessionID: "s", role: "assistant" }, parts: [part(first, 3)] },
      { info: { id: "m2", sessionID: "s", role: "assistant" }, parts: [part(second)] },
    ];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
  }
  /** A compaction as OpenCode shows it: its messages from the compaction on (the summary, then `kept`), then its event. */
  async function compacted(plugin: Started, kept: ReturnType<typeof part>) {
    const messages = [
      { info: { id: "msg_c", sessionID: "s", role: "user" }, parts: [{ type: "compaction" }] },
      { info: { id: "msg_s", sessionID: "s", role: "assistant", summary: true }, parts: [{ type: "text", text: "summary" }] },
      { info: { id: "msg_k", sessionID: "s", role: "assistant" }, parts: [kept] },
    ];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } } as never);
  }
  async function toolWithId(plugin: Started, callID: string, args: Record<string, unknown>) {
    await plugin.touch("s", "read", args);
    const output = { title: "read", output: "x", metadata: {} };
    await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID, args } as never, output as never);
    return output.output;
  }

  test("a prune rebuilds the block without a file another live output carries at this version", async () => {
    const plugin = await open();
    await plugin.step("s");
    await toolWithId(plugin, "c1", { filePath: "apps/web/src/App.tsx" });
    await writeFile(join(plugin.root, "AGENTS.md"), "# Root\nROOT V2 marker\n");
    const c2 = await toolWithId(plugin, "c2", { filePath: "apps/web/src/App.tsx" });
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, pruned("c1") as never);
    const system = (await plugin.step("s")) ?? "";
    expect(count(system + c2, "ROOT V2 marker")).toBe(1);
    expect(system).toContain("apps/web/AGENTS.md");
  });

  test("a continued session recognises an updated delivery in its history", async () => {
    const plugin = await open();
    await plugin.step("s");
    const c1 = await toolWithId(plugin, "c1", { filePath: "apps/web/src/App.tsx" });
    await writeFile(join(plugin.root, "AGENTS.md"), "# Root\nROOT V2 marker\n");
    const c2 = await toolWithId(plugin, "c2", { filePath: "apps/web/src/App.tsx" });
    expect(c2).toContain('status="updated"');
    const part = (callID: string, output: string) => ({ type: "tool", callID, tool: "read", state: { status: "completed", input: { filePath: "apps/web/src/App.tsx" }, output, time: { start: 1, end: 2 } } });
    const history = [
      { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
      { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts: [part("c1", c1), part("c2", c2)] },
    ];
    const again = await start(plugin.root, {}, { history });
    try {
      expect(count(((await again.step("s")) ?? "") + c2, "ROOT V2 marker")).toBe(1);
    } finally {
      await again.dispose();
    }
  });

  for (const change of ["edited back to the text first sent", "announced deleted, then made again as it was"]) {
    test(`a continued session whose delivered file was ${change} gets it again: the latest copy in its history decides (found in a hunt)`, async () => {
      const plugin = await open();
      await plugin.step("s");
      const web = join(plugin.root, "apps/web/AGENTS.md");
      const v1 = await readFile(web, "utf8");
      const args = { filePath: "apps/web/src/App.tsx" };
      const c1 = await toolWithId(plugin, "c1", args);
      if (change.startsWith("edited")) await writeFile(web, `${v1}- V2 ONLY: indent with tabs.\n`);
      else await rm(web);
      const c2 = await toolWithId(plugin, "c2", args);
      expect(c2).toContain(change.startsWith("edited") ? "V2 ONLY" : '"apps/web/AGENTS.md" no longer applies');
      // Between `opencode run` and `opencode run -c`: the model's latest word on the file is stale.
      await writeFile(web, v1);
      const call = (callID: string, output: string) => ({ type: "tool", callID, tool: "read", state: { status: "completed", input: args, output, time: { start: 1, end: 2 } } });
      const history = [
        { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
        { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts: [call("c1", c1), call("c2", c2)] },
      ];
      const again = await start(plugin.root, {}, { history });
      try {
        const system = (await again.step("s")) ?? "";
        const next = await toolWithId(again, "c3", args);
        expect(sectionPaths(system + next)).toContain("apps/web/AGENTS.md");
      } finally {
        await again.dispose();
      }
    });
  }

  test("a read reminder before the session's first step is not repeated by its first block", async () => {
    const plugin = await open();
    const path = join(plugin.root, "apps/web/AGENTS.md");
    const raw = await readFile(path, "utf8");
    const output = await tool(plugin, "s", "read", { filePath: "apps/web/src/App.tsx" }, `<content>x</content>\n\n<system-reminder>\nInstructions from: ${path}\n${raw}\n</system-reminder>`, { loaded: [path] });
    expect(output.output).toContain(raw);
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md"]);
  });

  test("a tool call without an id carries files as any other, and a prune of its output sends them back; the id \"system\" carries none (found in a hunt)", async () => {
    const plugin = await open();
    const first = await plugin.step("s");
    const output = await toolWithId(plugin, "", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(output)).toEqual(["apps/web/AGENTS.md"]);
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: [{ info: { id: "m1", sessionID: "s", role: "assistant" }, parts: [part(output, 3, "")] }] } as never);
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
    expect(first).not.toContain("apps/web/AGENTS.md");
    // "system" names the plugin's own block: a call of that id carries nothing, its file rides on the next user message.
    expect(await toolWithId(plugin, "system", { filePath: "services/api/src/server.ts" })).toBe("x");
    expect(sectionPaths((await userMessage(plugin, "s")).map((part) => part.text).join(""))).toEqual(["services/api/AGENTS.md"]);
  });

  test("after an unload, the next tool call that touches the file's directory brings it back, even through a path touched before (found in a hunt)", async () => {
    const plugin = await open();
    await plugin.step("s");
    expect(sectionPaths(await toolWithId(plugin, "c1", { filePath: "apps/web/index.html" }))).toEqual(["apps/web/AGENTS.md"]);
    expect(await callContextTool(plugin, "s", { action: "unload", path: "apps/web/AGENTS.md" })).toContain("It comes back when a tool call touches apps/web");
    await plugin.step("s");
    expect(sectionPaths(await toolWithId(plugin, "c2", { filePath: "apps/web/index.html" }))).toEqual(["apps/web/AGENTS.md"]);
  });

  test("a reused call id: a prune sends back what its own output carried, and only that (found in a hunt)", async () => {
    const plugin = await open();
    await plugin.step("s");
    const first = await toolWithId(plugin, "call_0", { filePath: "apps/web/src/App.tsx" });
    await plugin.step("s");
    const second = await toolWithId(plugin, "call_0", { filePath: "services/api/src/server.ts" });
    expect(sectionPaths(second)).toEqual(["services/api/AGENTS.md"]);
    await prunedThenKept(plugin, first, second);
    const system = (await plugin.step("s")) ?? "";
    expect(sectionPaths(system)).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
    expect(count(system + second, '<context-file path="services/api/AGENTS.md"')).toBe(1);
  });

  test("a reused call id: a pruned part that carried nothing sends back nothing a live part of that id carries (found in a hunt)", async () => {
    const plugin = await open();
    const start = await plugin.step("s");
    const first = await toolWithId(plugin, "call_0", { filePath: "README.md" });
    expect(first).toBe("x");
    const second = await toolWithId(plugin, "call_0", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(second)).toEqual(["apps/web/AGENTS.md"]);
    await prunedThenKept(plugin, first, second);
    expect(await plugin.step("s")).toBe(start);
  });

  test("after a compaction, a kept part that reuses the id of a summarized carrier does not keep that carrier's files (found in a hunt)", async () => {
    const plugin = await open();
    await plugin.step("s");
    const carrier = await toolWithId(plugin, "call_0", { filePath: "apps/web/src/App.tsx" });
    await plugin.step("s");
    const reuse = await toolWithId(plugin, "call_0", { filePath: "README.md" });
    expect(carrier).toContain("apps/web/AGENTS.md");
    // The carrier's turn was summarized; the later part of its id was kept.
    await compacted(plugin, part(reuse));
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });

  test("after a compaction, turns OpenCode kept verbatim still count: their files are not repeated", async () => {
    const plugin = await open();
    await plugin.step("s");
    const kept = await toolWithId(plugin, "kept", { filePath: "apps/web/src/App.tsx" });
    expect(kept).toContain("apps/web/AGENTS.md");
    await compacted(plugin, part(kept, undefined, "kept"));
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md"]);
  });
});

// Found by a hostile hunt (0.3.16; each failed before its fix): a delivery whose frame and notices
// passed what the step had left, and critical files weighed with a flat allowance.
describe("deliveries at the edge of the step's budget", () => {
  const read = async (plugin: Started, rel: string) => (await tool(plugin, "s", "read", { filePath: join(plugin.root, rel) })).output;
  const packages = (count: number, name = (i: number) => `packages/service-number-${i}`) => Array.from({ length: count }, (_, i) => `${name(i)}/AGENTS.md`);
  /** Each of `rels` delivered whole, by a read in its directory in a step of its own. */
  const deliverEach = async (plugin: Started, rels: readonly string[]) => {
    for (const rel of rels) {
      await plugin.step("s");
      expect(await read(plugin, rel.replace("AGENTS.md", "x.ts"))).toContain(`<context-file path="${rel}">`);
    }
  };
  /** A `priority: critical` file of `lines` rules, ending with `tag`. */
  const criticalText = (lines: number, tag: string, rule = "critical rule") => `---\npriority: critical\n---\n# Crit\n${Array.from({ length: lines }, (_, i) => `- ${rule} ${i}: never skip it.`).join("\n")}\n${tag}\n`;

  test("deletions met by a later call of a step whose budget an earlier call used are told, not dropped unsaid (default budgets)", async () => {
    // The big file goes whole and leaves the step between MIN_DELIVERY_TOKENS (64) and what the frame and twelve notices need.
    const gone = packages(12);
    const fence = "```\n" + Array.from({ length: 60 }, (_, i) => `const value${i} = compute(${i});`).join("\n") + "\n```\n";
    const big = `# Big\n\n${Array.from({ length: 220 }, (_, i) => `- rule ${i}: keep the public API stable and documented.`).join("\n")}\n\n${fence.repeat(6)}`;
    const plugin = await openProject(undefined, {}, { files: { "big/AGENTS.md": big, ...Object.fromEntries(gone.map((rel) => [rel, "Use tabs.\n"])) } });
    await plugin.step("s");
    for (const rel of gone) await read(plugin, rel.replace("AGENTS.md", "x.ts"));
    await plugin.step("s");
    expect(await read(plugin, "big/x.ts")).toContain('<context-file path="big/AGENTS.md">');
    for (const rel of gone) await rm(join(plugin.root, rel));
    let said = await read(plugin, "README.md");
    for (let i = 0; i < 3; i++) {
      await plugin.step("s");
      said += await read(plugin, "README.md");
    }
    for (const rel of gone) expect(said.split(`"${rel}" no longer applies`).length - 1).toBe(1);
  });

  test("a checkout that deletes more delivered files than one block can tell is told over the next deliveries, each once", async () => {
    const gone = packages(40);
    const plugin = await openProject(undefined, { deliveryTokens: 300 }, { files: Object.fromEntries(gone.map((rel) => [rel, "Use tabs.\n"])) });
    await plugin.step("s");
    await deliverEach(plugin, gone);
    for (const rel of gone) await rm(join(plugin.root, rel));
    const blocks: string[] = [];
    for (let i = 0; i < 12; i++) {
      await plugin.step("s");
      blocks.push(await read(plugin, "README.md"));
    }
    // 300 tokens hold the frame and a few notices: more than one delivery, none larger than the budget allows.
    expect(blocks.filter((block) => block.includes("no longer applies")).length).toBeGreaterThan(1);
    const said = blocks.join("");
    for (const rel of gone) expect(said.split(`"${rel}" no longer applies`).length - 1).toBe(1);
  });

  test("an edit that shares an over-full delivery with deletions still reaches the model, and so does each deletion", async () => {
    const [a, b, c] = ["packages/first-package-with-a-long-name/AGENTS.md", "packages/second-package-with-a-long-name/AGENTS.md", "c/AGENTS.md"];
    // 70 tokens: the frame (35) and one notice (32) at most, beside nothing else.
    const plugin = await openProject(undefined, { deliveryTokens: 70 }, { files: { [a]: "Use tabs.\n", [b]: "Use tabs.\n", [c]: "Old rule.\n" } });
    await deliverEach(plugin, [a, b, c]);
    await rm(join(plugin.root, a));
    await rm(join(plugin.root, b));
    await writeFile(join(plugin.root, c), "New rule.\n");
    await plugin.step("s");
    let said = await read(plugin, "README.txt");
    for (let i = 0; i < 3; i++) {
      await plugin.step("s");
      said += (await userMessage(plugin, "s")).map((part) => part.text ?? "").join("");
      said += await read(plugin, "README.txt");
    }
    // An edit "arrives as its new text on the next tool output or the next user message" (README).
    expect(said).toContain("New rule.");
    for (const rel of [a, b]) expect(said.split(`"${rel}" no longer applies`).length - 1).toBe(1);
  });

  const critical = (tag: string) => criticalText(60, tag, "critical rule number");

  /**
   * `gone` and crit/AGENTS.md (`crit("END-V1")`, priority: critical) delivered (`others` exist too);
   * then `gone` deleted and crit/AGENTS.md edited to `crit("END-V2")`: the output of the next read in
   * crit/, after `meanwhile`.
   */
  async function criticalUpdatedBesideDeletions(deliveryTokens: number, gone: string[], crit: (tag: string) => string, others: string[] = [], meanwhile = async (_plugin: Started) => {}) {
    const plugin = await openProject(undefined, { deliveryTokens }, { files: { "crit/AGENTS.md": crit("END-V1"), ...Object.fromEntries([...gone, ...others].map((rel) => [rel, "Use tabs.\n"])) } });
    await deliverEach(plugin, gone);
    await plugin.step("s");
    expect(await read(plugin, "crit/x.ts")).toContain("END-V1");
    for (const rel of gone) await rm(join(plugin.root, rel));
    await writeFile(join(plugin.root, "crit/AGENTS.md"), crit("END-V2"));
    await plugin.step("s");
    await meanwhile(plugin);
    const out = await read(plugin, "crit/x.ts");
    return { plugin, out };
  }

  test("an updated priority: critical file goes whole though deletions share its delivery", async () => {
    const gone = packages(6, (i) => `packages/${["alpha", "beta", "gamma", "delta", "epsilon", "zeta"][i]}-service`);
    const { plugin, out } = await criticalUpdatedBesideDeletions(300, gone, critical);
    expect(out).toContain("END-V2");
    expect(out).not.toContain("[cut to fit the budget");
    // The critical file passes the 300 tokens alone: the deletions wait for the next delivery rather than grow its block further.
    expect(out).not.toContain("no longer applies");
    await plugin.step("s");
    const next = await read(plugin, "README.md");
    for (const rel of gone) expect(next.split(`"${rel}" no longer applies`).length - 1).toBe(1);
  });

  test("a deletion, a watch notice and a pending file that leave no room for the list of pending files are told at a later step, not never (found in review)", async () => {
    // A delivery budget where deletion and notice fit beside the frame, but not with the list naming the pending big file too.
    const frame = frameCost("delivery", [], textBound);
    const notice = textBound(watchNotice("AGENTS.md", "docs/API.md", "changed"));
    expect(notice).toBeGreaterThan(textBound(leftOutListOf("delivery", [], 1, Number.MAX_SAFE_INTEGER)));
    const deliveryTokens = frame + textBound(deletedNotice("gone/AGENTS.md")) + notice;
    const big = `# Big\n\n${Array.from({ length: 200 }, (_, i) => `- rule ${i}: keep the public API stable and documented.`).join("\n")}\n`;
    const files = { "AGENTS.md": "---\nwatch: [docs/API.md]\n---\nROOT-RULE\n", "docs/API.md": "v1\n", "gone/AGENTS.md": "Use tabs.\n", "big/AGENTS.md": big };
    const plugin = await openProject(undefined, { deliveryTokens }, { files });
    await plugin.stepUntil("s", (block) => block?.includes("ROOT-RULE") === true, "the watching root file");
    expect(await read(plugin, "gone/x.ts")).toContain('<context-file path="gone/AGENTS.md">');
    await rm(join(plugin.root, "gone/AGENTS.md"));
    await writeFile(join(plugin.root, "docs/API.md"), "v2, changed\n");
    let said = "";
    for (let i = 0; i < 6; i++) {
      await plugin.step("s");
      said += (await read(plugin, "big/x.ts")) + (await read(plugin, "README.md"));
    }
    expect(said).toContain('"gone/AGENTS.md" no longer applies');
    expect(said).toContain('["docs/API.md" was changed');
  });

  test("a deletion whose notice is longer than a whole block is let go with a warning, and deliveries go on", async () => {
    const long = `${Array.from({ length: 12 }, (_, i) => `a-rather-long-directory-name-number-${i}`).join("/")}/AGENTS.md`;
    const plugin = await openProject(undefined, { deliveryTokens: 100 }, { files: { [long]: "Use tabs.\n", "later/AGENTS.md": "LATER-RULE\n" } });
    expect(textBound(deletedNotice(long))).toBeGreaterThan(100 - frameCost("delivery", [], textBound));
    // Touched before the first step: the system block (8,000 tokens) carries it; deletions are told by deliveries.
    await plugin.touch("s", "read", { filePath: join(plugin.root, long.replace("AGENTS.md", "x.ts")) });
    expect(await plugin.step("s")).toContain("Use tabs.");
    await rm(join(plugin.root, long));
    await plugin.step("s");
    expect(await read(plugin, "later/x.ts")).toContain("LATER-RULE");
    expect(plugin.logs.filter((entry) => entry.message.includes("its notice is larger than a whole block"))).toHaveLength(1);
  });

  test("a priority: critical file that fits the step alone is not pushed past it by deletion notices that can wait (found in review)", async () => {
    const deliveryTokens = 300;
    const crit = (tag: string) => criticalText(6, tag);
    const gone = packages(14, (i) => `packages/service-number-${i}-with-a-longer-name`);
    const { plugin, out } = await criticalUpdatedBesideDeletions(deliveryTokens, gone, crit);
    const block = out.slice(out.indexOf("<project-context"));
    expect(block).toContain("END-V2");
    expect(tokens(block)).toBeLessThanOrEqual(deliveryTokens);
    expect(plugin.logs.filter((entry) => entry.message.includes("priority: critical files"))).toEqual([]);
  });

  test('delivery "system": a watch notice that leaves no room for the list of left-out files does not empty the block step after step (found in review)', async () => {
    const api = "docs/a-rather-long-directory-name-for-the-api/reference-manual-of-the-public-interface.md";
    const systemTokens = frameCost("system", [], textBound) + textBound(watchNotice("AGENTS.md", api, "changed"));
    const big = `# Big\n\n${Array.from({ length: 200 }, (_, i) => `- rule ${i}: keep the public API stable and documented.`).join("\n")}\n`;
    const plugin = await openProject(undefined, { delivery: "system", systemTokens }, { files: { "AGENTS.md": `---\nwatch: [${api}]\n---\nROOT-RULE\n`, [api]: "v1\n", "big/AGENTS.md": big } });
    await plugin.touch("s", "read", { filePath: join(plugin.root, "big/x.ts") });
    await plugin.stepUntil("s", (block) => block?.includes("ROOT-RULE") === true, "the watching root file");
    await writeFile(join(plugin.root, api), "v2, changed\n");
    const blocks = await waitFor(async () => {
      const block = await plugin.step("s");
      return block?.includes("ROOT-RULE") === true && plugin.logs.some((entry) => entry.message.includes("could not be told")) ? [block] : undefined;
    }, 3000, "the block back, the notice it cannot hold let go");
    expect(blocks[0]).toContain("ROOT-RULE");
    for (let i = 0; i < 3; i++) expect(await plugin.step("s")).toContain("ROOT-RULE");
  });

  test("a critical file that fits the step beside the list of pending files is not pushed past it by deletion notices that can wait (found in review)", async () => {
    const deliveryTokens = 600;
    const crit = (tag: string) => criticalText(18, tag);
    const gone = packages(20, (i) => `packages/service-number-${i}-with-a-longer-name`);
    const pending = packages(8, (i) => `pending/some-rather-long-directory-name-number-${i}`);
    // Touched, never delivered: the delivery's list of pending files names them.
    const touchPending = async (plugin: Started) => {
      for (const rel of pending) await plugin.touch("s", "read", { filePath: join(plugin.root, rel.replace("AGENTS.md", "x.ts")) });
    };
    const { plugin, out } = await criticalUpdatedBesideDeletions(deliveryTokens, gone, crit, pending, touchPending);
    const block = out.slice(out.indexOf("<project-context"));
    expect(block).toContain("END-V2");
    expect(block).toContain("no longer applies");
    expect(tokens(block)).toBeLessThanOrEqual(deliveryTokens);
    expect(plugin.logs.filter((entry) => entry.message.includes("priority: critical files"))).toEqual([]);
  });

  test("a critical file that fits systemTokens beside a bare count of the files left out does not grow the block to name forty of them (found in review)", async () => {
    const crit = `---\npriority: critical\n---\n# Crit\n${Array.from({ length: 12 }, (_, i) => `- critical rule ${i}: never skip it.`).join("\n")}\nCRIT-END\n`;
    const others = packages(60, (i) => `pkgs/package-with-a-long-name-${i}`);
    const systemTokens = 400;
    const plugin = await openProject(undefined, { delivery: "system", systemTokens }, { files: { "AGENTS.md": crit, ...Object.fromEntries(others.map((rel) => [rel, `# P\n${"- a rule line\n".repeat(20)}`])) } });
    for (const rel of others) await plugin.touch("s", "read", { filePath: join(plugin.root, rel.replace("AGENTS.md", "x.ts")) });
    const block = (await plugin.stepUntil("s", (b) => b?.includes("CRIT-END") === true, "the critical file")) ?? "";
    expect(tokens(block)).toBeLessThanOrEqual(systemTokens);
    expect(plugin.logs.filter((entry) => entry.message.includes("priority: critical files"))).toEqual([]);
  });

  test('delivery "system": a watch notice that fits beside every file whole is told, not let go for a list the block never needs (found in review)', async () => {
    const api = "docs/api.md";
    const whole = textBound(sectionHead("AGENTS.md", false)) + textBound(WHOLE_TAIL) + textBound("R\n");
    expect(whole).toBeLessThan(textBound(leftOutListOf("system", [], 1, Number.MAX_SAFE_INTEGER)));
    const systemTokens = frameCost("system", [], textBound) + textBound(watchNotice("AGENTS.md", api, "changed")) + whole;
    const plugin = await openProject(undefined, { delivery: "system", systemTokens }, { files: { "AGENTS.md": `---\nwatch: [${api}]\n---\nR\n`, [api]: "v1\n" } });
    await plugin.stepUntil("s", (block) => block?.includes('<context-file path="AGENTS.md">') === true, "the watching root file");
    await writeFile(join(plugin.root, api), "v2, changed\n");
    const said = await waitFor(async () => {
      const block = (await plugin.step("s")) ?? "";
      if (block.includes(`"${api}" was changed`)) return block;
      return plugin.logs.some((entry) => entry.message.includes("could not be told")) ? "LET GO" : undefined;
    }, 3000, "the notice told or let go");
    expect(said).toContain(`"${api}" was changed`);
    expect(said).toContain('<context-file path="AGENTS.md">');
  });

  test('delivery "system": a critical file that fits systemTokens beside the list is not pushed past it by watch notices that can wait (found in review)', async () => {
    const systemTokens = 600;
    const targets = Array.from({ length: 8 }, (_, i) => `docs/watched-api-reference-document-${i}.md`);
    const crit = `---\npriority: critical\nwatch: [${targets.join(", ")}]\n---\n# Crit\n${Array.from({ length: 30 }, (_, i) => `- critical rule ${i}: never skip it.`).join("\n")}\nCRIT-END\n`;
    const others = packages(3, (i) => `pkgs/p${i}`);
    const files = { "AGENTS.md": crit, ...Object.fromEntries(targets.map((rel) => [rel, "v1\n"])), ...Object.fromEntries(others.map((rel) => [rel, `# P\n${"- a rule line about something.\n".repeat(40)}`])) };
    const plugin = await openProject(undefined, { delivery: "system", systemTokens }, { files });
    for (const rel of others) await plugin.touch("s", "read", { filePath: join(plugin.root, rel.replace("AGENTS.md", "x.ts")) });
    const before = (await plugin.stepUntil("s", (block) => block?.includes("CRIT-END") === true && block.includes("pkgs/p2"), "the critical file")) ?? "";
    expect(tokens(before)).toBeLessThanOrEqual(systemTokens);
    for (const rel of targets) await writeFile(join(plugin.root, rel), "v2, changed\n");
    const said = await waitFor(async () => {
      const block = (await plugin.step("s")) ?? "";
      return block.includes("was changed") ? block : undefined;
    }, 3000, "a watch notice");
    expect(said).toContain("CRIT-END");
    expect(tokens(said)).toBeLessThanOrEqual(systemTokens);
    expect(plugin.logs.filter((entry) => entry.message.includes("priority: critical files"))).toEqual([]);
  });

  test("an updated file that fits whole in the step is not demoted to the pending list by a deletion notice that can wait (found in review)", async () => {
    const rel = "a/AGENTS.md";
    const wholeAsPlain = textBound(sectionHead(rel, false)) + textBound(WHOLE_TAIL) + textBound("S\n");
    const wholeAsUpdated = textBound(sectionHead(rel, true)) + textBound(WHOLE_TAIL) + textBound("S\n");
    const bare = textBound(leftOutListOf("delivery", [], 1, Number.MAX_SAFE_INTEGER));
    // Both below the bare list: noticeReserve takes the `list < bare` branch.
    expect(wholeAsUpdated).toBeLessThan(bare);
    expect(wholeAsPlain).toBeLessThan(wholeAsUpdated);
    // The step holds the frame, the deletion and the file as reserved (sent as not updated), not as sent (updated).
    const deliveryTokens = frameCost("delivery", [], textBound) + textBound(deletedNotice("gone/AGENTS.md")) + wholeAsPlain;
    const plugin = await openProject(undefined, { deliveryTokens }, { files: { [rel]: "R\n", "gone/AGENTS.md": "G\n" } });
    await plugin.touch("s", "read", { filePath: join(plugin.root, "a/x.ts") });
    await plugin.touch("s", "read", { filePath: join(plugin.root, "gone/x.ts") });
    const first = (await plugin.step("s")) ?? "";
    expect(first).toContain(`<context-file path="${rel}">`);
    expect(first).toContain(`<context-file path="gone/AGENTS.md">`);
    await rm(join(plugin.root, "gone/AGENTS.md"));
    await writeFile(join(plugin.root, rel), "S\n");
    let said = "";
    for (let i = 0; i < 6; i++) {
      await plugin.step("s");
      said += await read(plugin, "README.md");
    }
    // Each fits a block of its own (and the deletion one beside the file's list): both are told, the deletion once.
    expect(said).toContain('"gone/AGENTS.md" no longer applies');
    expect(said.split('"gone/AGENTS.md" no longer applies').length - 1).toBe(1);
    expect(said).toContain(`<context-file path="${rel}" status="updated">`);
  });

  test("an updated priority: critical file that fits whole beside a deletion is not pushed past the step's budget by it (found in review)", async () => {
    const rel = "a/AGENTS.md";
    const crit = (body: string) => `---\npriority: critical\n---\n${body}`;
    const wholeAsPlain = textBound(sectionHead(rel, false)) + textBound(WHOLE_TAIL) + textBound("S\n");
    expect(textBound(sectionHead(rel, true)) + textBound(WHOLE_TAIL) + textBound("S\n")).toBeLessThan(textBound(leftOutListOf("delivery", [], 1, Number.MAX_SAFE_INTEGER)));
    const deliveryTokens = frameCost("delivery", [], textBound) + textBound(deletedNotice("gone/AGENTS.md")) + wholeAsPlain;
    const plugin = await openProject(undefined, { deliveryTokens }, { files: { [rel]: crit("R\n"), "gone/AGENTS.md": "G\n" } });
    await plugin.touch("s", "read", { filePath: join(plugin.root, "a/x.ts") });
    await plugin.touch("s", "read", { filePath: join(plugin.root, "gone/x.ts") });
    const first = (await plugin.step("s")) ?? "";
    expect(first).toContain(`<context-file path="${rel}">`);
    await rm(join(plugin.root, "gone/AGENTS.md"));
    await writeFile(join(plugin.root, rel), crit("S\n"));
    await plugin.step("s");
    const out = await read(plugin, "README.md");
    const block = out.slice(out.indexOf("<project-context"));
    expect(block).toContain(`<context-file path="${rel}" status="updated">`);
    // The file alone fits the step (beside the frame); the deletion can wait for the next delivery.
    expect(tokens(block)).toBeLessThanOrEqual(deliveryTokens);
    expect(plugin.logs.filter((entry) => entry.message.includes("priority: critical files"))).toEqual([]);
  });

  test("late in a step, an updated critical file that passes what the step has left does not carry deletion notices that can wait past it too, and the next step tells them (found in review)", async () => {
    const deliveryTokens = 600;
    const crit = (tag: string) => criticalText(18, tag);
    const big = `# Big\n${Array.from({ length: 42 }, (_, i) => `- big rule ${i}: keep it.`).join("\n")}\nBIG-END\n`;
    const gone = Array.from({ length: 6 }, (_, i) => `packages/service-${i}/AGENTS.md`);
    const plugin = await openProject(undefined, { deliveryTokens }, { files: { "crit/AGENTS.md": crit("END-V1"), "big/AGENTS.md": big, ...Object.fromEntries(gone.map((rel) => [rel, "Use tabs.\n"])) } });
    await deliverEach(plugin, gone);
    await plugin.step("s");
    expect(await read(plugin, "crit/x.ts")).toContain("END-V1");
    await plugin.step("s");
    // A file not delivered yet uses most of the step.
    const bigOut = await read(plugin, "big/x.ts");
    const bigBlock = bigOut.slice(bigOut.indexOf("<project-context"));
    expect(bigBlock).toContain("BIG-END");
    const left = deliveryTokens - tokens(bigBlock);
    for (const rel of gone) await rm(join(plugin.root, rel));
    await writeFile(join(plugin.root, "crit/AGENTS.md"), crit("END-V2"));
    const out = await read(plugin, "crit/x.ts");
    const block = out.slice(out.indexOf("<project-context"));
    expect(block).toContain("END-V2");
    // Over what the step had left, the block carries the critical file only: deletions wait for the next step.
    expect(tokens(block)).toBeGreaterThan(left);
    expect(block).not.toContain("no longer applies");
    await plugin.step("s");
    const next = await read(plugin, "README.md");
    for (const rel of gone) expect(next.split(`"${rel}" no longer applies`).length - 1).toBe(1);
  });

  test("a priority: critical file past the budget goes whole whatever the length of its path", async () => {
    // A path the tokenizer cuts into many tokens: its section's head and tail alone passed the flat 64 tokens allowed per critical file.
    const dir = Array.from({ length: 3 }, (_, d) => Array.from({ length: 60 }, (_, i) => String.fromCharCode(97 + ((i * 7 + d * 3) % 26)) + ((i * 13) % 10)).join("")).join("/");
    const rel = `${dir}/AGENTS.md`;
    const plugin = await openProject(undefined, { delivery: "system", systemTokens: 150 }, { files: { [rel]: critical("CRITICAL-END") } });
    await plugin.touch("s", "read", { filePath: join(plugin.root, dir, "x.ts") });
    const block = await plugin.step("s");
    expect(block).toContain(`<context-file path="${rel}">`);
    expect(block).toContain("CRITICAL-END");
    expect(block).not.toContain("[cut to fit the budget");
  });
});
