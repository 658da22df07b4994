import { describe, expect, test } from "bun:test";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { projects, sectionPaths, start, type Started } from "./helpers/harness.ts";
import { largestStall } from "./helpers/stall.ts";

const openProject = projects();
const open = () => openProject("monorepo");
const count = (text: string, needle: string) => text.split(needle).length - 1;

/** A tool call as OpenCode runs it (before, then after), with an explicit call id; returns what the model gets. */
async function call(plugin: Started, callID: string, tool: string, args: Record<string, unknown>, output = "x", metadata: Record<string, unknown> = {}) {
  await plugin.touch("s", tool, args);
  const result = { title: tool, output, metadata };
  await plugin.hooks["tool.execute.after"]!({ tool, sessionID: "s", callID, args } as never, result as never);
  return result.output;
}
const part = (output: string, callID: string, compacted?: number, input: unknown = {}, loaded?: string[]) => ({
  type: "tool", callID, tool: "read",
  state: { status: "completed", input, output, ...(loaded ? { metadata: { loaded } } : {}), time: { start: 1, end: 2, ...(compacted === undefined ? {} : { compacted }) } },
});
/** The conversation as OpenCode sends it; `compaction`: from a compaction on (its user part, the summary, then `parts`). */
async function transform(plugin: Started, parts: unknown[], compaction = false) {
  const head = compaction
    ? [
        { info: { id: "msg_c", sessionID: "s", role: "user" }, parts: [{ type: "compaction" }] },
        { info: { id: "msg_s", sessionID: "s", role: "assistant", summary: true }, parts: [{ type: "text", text: "summary" }] },
      ]
    : [];
  const messages = [...head, ...parts.map((p, i) => ({ info: { id: `m${i}`, sessionID: "s", role: "assistant" }, parts: [p] }))];
  await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
}
const compactedEvent = (plugin: Started) => plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } } as never);

/** A session whose call_0 carried apps/web/AGENTS.md, one step on. */
async function webOnCall0() {
  const plugin = await open();
  await plugin.step("s");
  const first = await call(plugin, "call_0", "read", { filePath: "apps/web/src/App.tsx" });
  expect(sectionPaths(first)).toEqual(["apps/web/AGENTS.md"]);
  await plugin.step("s");
  return { plugin, first };
}

/** call_0 carries apps/web/AGENTS.md at one step; at the next, a read of the same id carries OpenCode's reminder of services/api/AGENTS.md. */
async function carrierThenReminder() {
  const { plugin, first } = await webOnCall0();
  const api = join(plugin.root, "services/api/AGENTS.md");
  const reminder = `\n\n<system-reminder>\nInstructions from: ${api}\n${await readFile(api, "utf8")}\n</system-reminder>`;
  const second = await call(plugin, "call_0", "read", { filePath: "services/api/src/server.ts" }, `<content>1: y</content>${reminder}`, { loaded: [api] });
  return { plugin, first, second };
}

describe("reused call ids: what a prune or a compaction took is judged file by file (found in review)", () => {
  test("a pruned carrier comes back though a later, kept part of its id quotes 'Instructions from: ' in an ordinary file", async () => {
    const plugin = await open();
    await plugin.step("s");
    const first = await call(plugin, "call_0", "read", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(first)).toEqual(["apps/web/AGENTS.md"]);
    await plugin.step("s");
    // The agent reads a doc that quotes OpenCode's marker (this plugin's README does); no context file of it.
    const second = await call(plugin, "call_0", "read", { filePath: "README.md" }, "<content>1: lines start with Instructions from: /abs/AGENTS.md</content>");
    await transform(plugin, [part(first, "call_0", 3), part(second, "call_0")]);
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });

  test("a pruned carrier comes back though a later, kept read of its id carries OpenCode's reminder of another file", async () => {
    const { plugin, first, second } = await carrierThenReminder();
    // OpenCode prunes the oldest output first; the read keeps its metadata.loaded, as OpenCode stores it.
    await transform(plugin, [part(first, "call_0", 3), part(second, "call_0", undefined, {}, [join(plugin.root, "services/api/AGENTS.md")])]);
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });

  test("after a compaction, a kept read that reuses a summarized carrier's id and carries OpenCode's reminder of another file does not keep the carrier's files", async () => {
    const { plugin, second: kept } = await carrierThenReminder();
    const messages = [
      { info: { id: "msg_c", sessionID: "s", role: "user" }, parts: [{ type: "compaction" }] },
      { info: { id: "msg_s", sessionID: "s", role: "assistant", summary: true }, parts: [{ type: "text", text: "summary" }] },
      { info: { id: "msg_k", sessionID: "s", role: "assistant" }, parts: [part(kept, "call_0", undefined, {}, [join(plugin.root, "services/api/AGENTS.md")])] },
    ];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } } as never);
    // apps/web/AGENTS.md was only in the summarized call_0: the rebuilt block must hold it.
    expect(sectionPaths(await plugin.step("s"))).toContain("apps/web/AGENTS.md");
  });

  test("a pruned carrier comes back though a later, kept part of its id merely quotes its section head (found in review)", async () => {
    const plugin = await open();
    await plugin.step("s");
    const first = await call(plugin, "call_0", "read", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(first)).toEqual(["apps/web/AGENTS.md"]);
    await plugin.step("s");
    // The agent reads a test of this very plugin; no context file rides on it.
    const second = await call(plugin, "call_0", "read", { filePath: "README.md" }, `<content>1: expect(out).toContain('<context-file path="apps/web/AGENTS.md"')</content>`);
    await transform(plugin, [part(first, "call_0", 3), part(second, "call_0")]);
    expect(sectionPaths(await plugin.step("s"))).toContain("apps/web/AGENTS.md");
  });

  test("a pruned carrier comes back though a later, kept part of its id (not a read) ends with text shaped like OpenCode's reminder of its file (found in review)", async () => {
    const { plugin, first } = await webOnCall0();
    // bash prints a saved transcript whose last lines are a reminder: OpenCode attached none (no metadata.loaded).
    const web = join(plugin.root, "apps/web/AGENTS.md");
    const transcript = `session log\n\n<system-reminder>\nInstructions from: ${web}\n# an old copy\n</system-reminder>`;
    const second = await call(plugin, "call_0", "bash", { command: "cat notes/session.txt" }, transcript);
    expect(second).toBe(transcript);
    await transform(plugin, [part(first, "call_0", 3), { ...part(second, "call_0"), tool: "bash" }]);
    expect(sectionPaths(await plugin.step("s"))).toContain("apps/web/AGENTS.md");
  });

  test("a pruned part of a reused id is judged once, not at every step: 600 files under one id (245 ms a step before)", async () => {
    const files: Record<string, string> = { "AGENTS.md": "# root\n" };
    const dirs = Array.from({ length: 600 }, (_, i) => `g${i % 30}/p${i}`);
    for (const d of dirs) Object.assign(files, { [`${d}/AGENTS.md`]: `# ${d}\n- a rule\n`, [`${d}/x.ts`]: "" });
    const plugin = await openProject(undefined, { records: false }, { files });
    const parts: ReturnType<typeof part>[] = [];
    // A typical read's text, about 4.6 KB.
    const content = `<content>\n${"1: some source line of the file that was read\n".repeat(100)}</content>`;
    for (const d of dirs) {
      await plugin.step("s");
      parts.push(part(await call(plugin, "call_0", "read", { filePath: `${d}/x.ts` }, content), "call_0"));
    }
    // OpenCode prunes the oldest output: its file goes back, the others stay where they are.
    (parts[0]!.state.time as Record<string, number>).compacted = 3;
    const timed = async () => {
      const t0 = performance.now();
      await transform(plugin, parts);
      return performance.now() - t0;
    };
    const judged = await timed();
    expect(sectionPaths((await plugin.step("s")) ?? "")).toEqual(["AGENTS.md", "g0/p0/AGENTS.md"]);
    const later = [await timed(), await timed(), await timed()];
    expect({ judged: judged < 100, later: Math.max(...later) < 10 }).toEqual({ judged: true, later: true });
  }, 120_000);

  test("OpenCode's reminder on a call that may carry nothing (empty id) still counts: its file is not sent a second time", async () => {
    const plugin = await open();
    await plugin.step("s");
    const api = join(plugin.root, "services/api/AGENTS.md");
    const raw = await readFile(api, "utf8");
    const reminder = `\n\n<system-reminder>\nInstructions from: ${api}\n${raw}\n</system-reminder>`;
    const first = await call(plugin, "", "read", { filePath: "services/api/src/server.ts" }, `<content>1: y</content>${reminder}`, { loaded: [api] });
    expect(first).toContain(raw);
    await plugin.step("s");
    // OpenCode's own loaded set has it: no reminder on this read; the plugin must not send it either.
    const second = await call(plugin, "c2", "grep", { pattern: "x", path: "services/api/src" });
    expect(count(first + second, '<context-file path="services/api/AGENTS.md"') + count(first, `Instructions from: ${api}`)).toBe(1);
  });
});

describe("a continued session (found in review)", () => {
  test("a later read whose duplicate reminder the plugin stripped does not make a restored session send the file again", async () => {
    const plugin = await open();
    await plugin.step("s");
    const web = join(plugin.root, "apps/web/AGENTS.md");
    const raw = await readFile(web, "utf8");
    // An edit reaches apps/web: the plugin delivers the file on it.
    const c1 = await call(plugin, "c1", "edit", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(c1)).toEqual(["apps/web/AGENTS.md"]);
    // A read there: OpenCode (which knows nothing of c1's copy) appends its reminder; the plugin strips it.
    const reminder = `\n\n<system-reminder>\nInstructions from: ${web}\n${raw}\n</system-reminder>`;
    const c2 = await call(plugin, "c2", "read", { filePath: "apps/web/src/App.tsx" }, `<content>1: y</content>${reminder}`, { loaded: [web] });
    expect(c2).toBe("<content>1: y</content>");
    const history = [
      { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
      { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts: [
        { ...part(c1, "c1", undefined, { filePath: "apps/web/src/App.tsx" }), tool: "edit" },
        part(c2, "c2", undefined, { filePath: "apps/web/src/App.tsx" }, [web]),
      ] },
    ];
    const again = await start(plugin.root, {}, { history });
    try {
      const system = (await again.step("s")) ?? "";
      const next = await call(again, "c3", "read", { filePath: "apps/web/src/App.tsx" });
      // The model holds c1's whole copy; neither the block nor the next output repeats it.
      expect(count(c1 + system + next, '<context-file path="apps/web/AGENTS.md"')).toBe(1);
    } finally {
      await again.dispose();
    }
  });

  test("a history from 0.3.17 holding a deletion notice in its unquoted format: the file made again is sent, not taken for the copy it disregards (found in review)", async () => {
    const plugin = await open();
    await plugin.step("s");
    const web = join(plugin.root, "apps/web/AGENTS.md");
    const raw = await readFile(web, "utf8");
    const c1 = await call(plugin, "c1", "read", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(c1)).toEqual(["apps/web/AGENTS.md"]);
    await plugin.step("s");
    await rm(web);
    await plugin.step("s");
    const quotedNotice = await call(plugin, "c2", "read", { filePath: "apps/web/src/App.tsx" });
    expect(quotedNotice).toContain('["apps/web/AGENTS.md" no longer applies');
    // 0.3.17 wrote the path unquoted.
    const c2 = quotedNotice.replace('["apps/web/AGENTS.md" no longer applies', "[apps/web/AGENTS.md no longer applies");
    // The same text is put back: the copy c1 carries is the text on disk, but the model was told to disregard it.
    await writeFile(web, raw);
    const history = [
      { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
      { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts: [
        part(c1, "c1", undefined, { filePath: "apps/web/src/App.tsx" }),
        part(c2, "c2", undefined, { filePath: "apps/web/src/App.tsx" }),
      ] },
    ];
    const again = await start(plugin.root, {}, { history });
    try {
      const system = (await again.step("s")) ?? "";
      const next = await call(again, "c3", "read", { filePath: "apps/web/src/App.tsx" });
      expect([...sectionPaths(system), ...sectionPaths(next)]).toContain("apps/web/AGENTS.md");
    } finally {
      await again.dispose();
    }
  });

  /**
   * A session whose history holds OpenCode's read reminder of web/AGENTS.md with `remembered` as its
   * text (web/AGENTS.md on disk: `files`' own), continued in a new process: what its first request's
   * block and the next read's output carry, together.
   */
  async function restoredWithReminder(files: Record<string, string>, remembered: string): Promise<{ system: string; next: string }> {
    const plugin = await openProject(undefined, { records: false }, { files: { "AGENTS.md": "# root\n", "web/x.ts": "", ...files } });
    const web = join(plugin.root, "web/AGENTS.md");
    const output = `<content>1: y</content>\n\n<system-reminder>\nInstructions from: ${web}\n${remembered}\n</system-reminder>`;
    const history = [
      { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
      { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts: [part(output, "c1", undefined, { filePath: join(plugin.root, "web/x.ts") }, [web])] },
    ];
    const again = await start(plugin.root, { records: false }, { history });
    try {
      const system = (await again.step("s")) ?? "";
      return { system, next: await call(again, "c2", "read", { filePath: "web/x.ts" }) };
    } finally {
      await again.dispose();
    }
  }

  test("a history holding OpenCode's reminder of an older version that begins with the current text: the current file is sent (found in review)", async () => {
    const v1 = "# web\n- rule A\n- rule B: never use the legacy client\n";
    const { system, next } = await restoredWithReminder({ "web/AGENTS.md": "# web\n- rule A\n" }, v1);
    // The model holds v1 (rule B, since removed): v2 must reach it, in the block or on the next output.
    expect([...sectionPaths(system), ...sectionPaths(next)]).toContain("web/AGENTS.md");
  });

  test("a history holding OpenCode's raw reminder of a file that imports another (a run without the plugin, or delivery \"system\"): the imported text is sent (found in review)", async () => {
    const raw = "# web\n\n@docs/style.md\n";
    const { system, next } = await restoredWithReminder({ "web/AGENTS.md": raw, "web/docs/style.md": "# style\n- never indent with tabs\n" }, raw);
    // The model holds the import line only: the file as the rules make it must reach it.
    expect(system + next).toContain("- never indent with tabs");
  });

  test("restoring a session whose history delivered 600 files, each on its own output, does not block the event loop (2.5 s in one task before)", async () => {
    const files: Record<string, string> = { "AGENTS.md": "# root\n" };
    const dirs = Array.from({ length: 600 }, (_, i) => `g${i % 30}/p${i}`);
    for (const d of dirs) Object.assign(files, { [`${d}/AGENTS.md`]: `# ${d}\n${"- a rule line\n".repeat(40)}`, [`${d}/x.ts`]: "" });
    const plugin = await openProject(undefined, { records: false }, { files });
    const parts: unknown[] = [];
    for (const [i, d] of dirs.entries()) {
      await plugin.step("s");
      const args = { filePath: `${d}/x.ts` };
      await plugin.touch("s", "read", args);
      const result = { title: "read", output: "x", metadata: {} };
      await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID: `c${i}`, args } as never, result as never);
      parts.push({ type: "tool", callID: `c${i}`, tool: "read", state: { status: "completed", input: args, output: result.output, time: { start: 1, end: 2 } } });
    }
    const history = [
      { info: { id: "msg_1", role: "user", sessionID: "s" }, parts: [{ type: "text", text: "hi" }] },
      { info: { id: "msg_2", role: "assistant", sessionID: "s" }, parts },
    ];
    const again = await start(plugin.root, { records: false }, { history });
    try {
      const { stallMs, result } = await largestStall(() => again.step("s"));
      // Every file is still carried by its output: the restored block adds none.
      expect((result ?? "").includes("g0/p0/AGENTS.md")).toBe(false);
      expect(stallMs).toBeLessThan(50);
    } finally {
      await again.dispose();
    }
  }, 60_000);
});

describe("reused ids across compactions, and blocks another plugin appended to (found in review)", () => {
  test("after a compaction, a prune of a reused id is judged again, whatever its counts of parts", async () => {
    const plugin = await open();
    await plugin.step("s");
    const p1 = await call(plugin, "call_0", "read", { filePath: "apps/web/src/App.tsx" });
    await plugin.step("s");
    const p2 = await call(plugin, "call_0", "read", { filePath: "services/api/src/server.ts" });
    expect(sectionPaths(p2)).toEqual(["services/api/AGENTS.md"]);
    // Pruned 1, kept 1: apps/web goes back, call_0 still carries services/api (prunesJudged call_0 = "1/1").
    await transform(plugin, [part(p1, "call_0", 3), part(p2, "call_0")]);
    expect(sectionPaths(await plugin.step("s"))).toContain("apps/web/AGENTS.md");
    // A compaction summarizes all of it.
    await transform(plugin, [], true);
    await compactedEvent(plugin);
    await plugin.step("s");
    // After it: call_0 again (ids numbered per response) carries a new file, then a part that carries none.
    const p5 = await call(plugin, "call_0", "read", { filePath: "services/api/plugins/payments/src/charge.ts" });
    expect(sectionPaths(p5)).toEqual(["services/api/plugins/payments/AGENTS.md"]);
    await plugin.step("s");
    const p6 = await call(plugin, "call_0", "read", { filePath: "README.md" });
    expect(p6).toBe("x");
    // OpenCode prunes p5: pruned 1, kept 1 again. Its file must come back to the system block.
    await transform(plugin, [part(p5, "call_0", 9), part(p6, "call_0")], true);
    expect(sectionPaths(await plugin.step("s"))).toContain("services/api/plugins/payments/AGENTS.md");
  });

  test("a kept turn whose output another plugin appended to after the plugin's block still counts: its file is not repeated after a compaction", async () => {
    const plugin = await open();
    await plugin.step("s");
    let kept = await call(plugin, "kept", "read", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(kept)).toEqual(["apps/web/AGENTS.md"]);
    // A plugin whose tool.execute.after runs after this one's (loaded later) appends a note.
    kept += "\n\n[lint: 0 problems]";
    await transform(plugin, [part(kept, "kept")], true);
    await compactedEvent(plugin);
    // The kept turn still carries apps/web/AGENTS.md whole: not again in the block.
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md"]);
  });

  test("the same after a prune of a reused id: the file that block shows is not sent again", async () => {
    const plugin = await open();
    await plugin.step("s");
    const p1 = await call(plugin, "call_0", "read", { filePath: "apps/web/src/App.tsx" });
    await writeFile(join(plugin.root, "apps/web/AGENTS.md"), "# web v2\n- rule\n");
    await plugin.step("s");
    let p2 = await call(plugin, "call_0", "read", { filePath: "apps/web/src/App.tsx" });
    expect(p2).toContain('<context-file path="apps/web/AGENTS.md" status="updated">');
    p2 += "\n\n[lint: 0 problems]";
    await transform(plugin, [part(p1, "call_0", 3), part(p2, "call_0")]);
    // p2 (kept) holds v2 whole: the block must not repeat it.
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md"]);
  });

  test("a kept part whose own text ends like a block (a transcript printed by bash) does not keep a pruned carrier's file out", async () => {
    const plugin = await open();
    await plugin.step("s");
    const p1 = await call(plugin, "call_0", "read", { filePath: "apps/web/src/App.tsx" });
    expect(sectionPaths(p1)).toEqual(["apps/web/AGENTS.md"]);
    await plugin.step("s");
    const transcript = 'tool result\n\n<project-context>\n<context-file path="apps/web/AGENTS.md">\n# old notes\n</context-file>\n</project-context>';
    const p2 = await call(plugin, "call_0", "bash", { command: "cat notes/transcript.txt" }, transcript);
    expect(p2).toBe(transcript);
    await transform(plugin, [part(p1, "call_0", 3), part(p2, "call_0")]);
    expect(sectionPaths(await plugin.step("s"))).toContain("apps/web/AGENTS.md");
  });
});
