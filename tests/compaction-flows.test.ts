import { describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Host } from "./helpers/conversation.ts";
import { projects, sectionPaths, type Started } from "./helpers/harness.ts";

const open = projects();
// Providers that number calls per response send `call_0` at every step (a case the plugin supports).
const part = (output: string, compacted?: number) => ({ type: "tool", callID: "call_0", tool: "read", state: { status: "completed", output, time: { start: 1, end: 2, ...(compacted === undefined ? {} : { compacted }) } } });
async function read(plugin: Started, filePath: string) {
  await plugin.touch("s", "read", { filePath });
  const output = { title: "read", output: "x", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID: "call_0", args: { filePath } } as never, output as never);
  return output.output;
}
const count = (text: string, rel: string) => text.split(`<context-file path="${rel}"`).length - 1;

describe("the compaction's own messages.transform, which shows the head only (found in a hunt)", () => {
  // Without the compaction's own transform (the control), as OpenCode 1.18.33 runs it with a tail kept.
  for (const headShown of [true, false]) {
    test(`a file a kept (tail) output carries is not repeated by the block rebuilt after the compaction (the head's transform ${headShown ? "shown" : "not shown"})`, async () => {
      const plugin = await open("monorepo");
      await plugin.step("s");
      const first = await read(plugin, "services/api/src/server.ts");
      await plugin.step("s");
      const second = await read(plugin, "apps/web/src/App.tsx");
      expect(sectionPaths(second)).toEqual(["apps/web/AGENTS.md"]);
      const m1 = { info: { id: "m1", sessionID: "s", role: "assistant" }, parts: [part(first, 3)] };
      const m2 = { info: { id: "m2", sessionID: "s", role: "assistant" }, parts: [part(second)] };
      // OpenCode pruned the first output; the main loop's request shows both.
      await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: [m1, m2] } as never);
      await plugin.step("s");
      // Compaction with a tail: the hook, then the compaction's transform of the head (m1 only), its request, its event.
      await plugin.compact("s");
      if (headShown) {
        await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: structuredClone([m1]) } as never);
        await plugin.hooks["experimental.chat.system.transform"]!({ sessionID: "s", model: {} as never }, { system: ["You are a context summarization agent."] });
      }
      await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } } as never);
      // The main loop: the summary, and m2 kept verbatim (it still carries apps/web/AGENTS.md whole).
      const after = [
        { info: { id: "msg_c", sessionID: "s", role: "user" }, parts: [{ type: "compaction" }] },
        { info: { id: "msg_s", sessionID: "s", role: "assistant", summary: true }, parts: [{ type: "text", text: "summary" }] },
        m2,
      ];
      await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: after } as never);
      const block = (await plugin.step("s")) ?? "";
      expect(count(block + second, "apps/web/AGENTS.md")).toBe(1);
    });
  }
});

describe("delivery \"system\" through a compaction (found in a hunt)", () => {
  test("control: a prune of that read output sends the file back to the block", async () => {
    const plugin = await open("monorepo", { delivery: "system" });
    const s = "ses_prune";
    await plugin.step(s);
    const path = join(plugin.root, "apps/web/AGENTS.md");
    const raw = await readFile(path, "utf8");
    const args = { filePath: "apps/web/src/App.tsx" };
    await plugin.touch(s, "read", args);
    const text = `<content>x</content>\n\n<system-reminder>\nInstructions from: ${path}\n${raw}\n</system-reminder>`;
    await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: s, callID: "c1", args } as never, { title: "read", output: text, metadata: { loaded: [path] } } as never);
    expect(sectionPaths(await plugin.step(s))).toEqual(["AGENTS.md"]);
    const pruned = [{ info: { id: "m1", role: "assistant", sessionID: s }, parts: [{ type: "tool", callID: "c1", tool: "read", state: { status: "completed", input: args, output: text, time: { start: 1, end: 2, compacted: 3 } } }] }];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: pruned } as never);
    expect(sectionPaths(await plugin.step(s))).toContain("apps/web/AGENTS.md");
  });

  test("a file a read reminder carried (left out of the block meanwhile) is back in the block after the compaction summarized that read away", async () => {
    const plugin = await open("monorepo", { delivery: "system" });
    const s = "ses_sys";
    await plugin.step(s);
    const path = join(plugin.root, "apps/web/AGENTS.md");
    const raw = await readFile(path, "utf8");
    const args = { filePath: "apps/web/src/App.tsx" };
    await plugin.touch(s, "read", args);
    const output = { title: "read", output: `<content>x</content>\n\n<system-reminder>\nInstructions from: ${path}\n${raw}\n</system-reminder>`, metadata: { loaded: [path] } };
    await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: s, callID: "c1", args } as never, output as never);
    // While the read output is in the conversation, the block leaves the file out (documented).
    expect(sectionPaths(await plugin.step(s))).toEqual(["AGENTS.md"]);
    // The compaction: the hook, the compaction's own request, its event; then the main loop's messages: the summary only.
    await plugin.compact(s);
    await plugin.hooks["experimental.chat.system.transform"]!({ sessionID: s, model: {} as never }, { system: ["You are a context summarization agent."] });
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: s } } as never });
    const after = [
      { info: { id: "msg_c", role: "user", sessionID: s }, parts: [{ type: "compaction", auto: false }] },
      { info: { id: "msg_s", role: "assistant", sessionID: s, summary: true }, parts: [{ type: "text", text: "summary" }] },
    ];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: after } as never);
    // The read output is gone: the model has apps/web/AGENTS.md nowhere unless the block carries it.
    expect(sectionPaths(await plugin.step(s))).toContain("apps/web/AGENTS.md");
  });
});

/** A read of `filePath` in session `s` with call id `callID`: what the model gets. */
async function readIn(plugin: Started, s: string, callID: string, filePath: string) {
  await plugin.touch(s, "read", { filePath });
  const output = { title: "read", output: "x", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: s, callID, args: { filePath } } as never, output as never);
  return output.output;
}
/** That read's part (call c1), pruned by OpenCode. */
const prunedMsg = (s: string, output: string) => [
  { info: { id: "m1", sessionID: s, role: "assistant" }, parts: [{ type: "tool", callID: "c1", tool: "read", state: { status: "completed", output, time: { start: 1, end: 2, compacted: 3 } } }] },
];

/** Session "s" after a step that delivered services/api/AGENTS.md on call c1's output, and the step after it. */
async function delivered() {
  const plugin = await open("monorepo");
  const s = "s";
  await plugin.step(s);
  const out = await readIn(plugin, s, "c1", "services/api/src/server.ts");
  expect(sectionPaths(out)).toContain("services/api/AGENTS.md");
  await plugin.step(s);
  return { plugin, s, out };
}

describe("a compaction that ends without its event (failed or aborted; found in review)", () => {
  for (const attempted of [false, true]) {
    test(`a prune seen by the next main step's messages.transform is judged at that step (compaction attempted: ${attempted})`, async () => {
      const { plugin, s, out } = await delivered();
      if (attempted) {
        // The hook, the compaction's own request; then it fails: OpenCode publishes no session.compacted.
        await plugin.compact(s);
        await plugin.hooks["experimental.chat.system.transform"]!({ sessionID: s, model: {} as never }, { system: ["You are a context summarization agent."] });
      }
      // The next user turn: OpenCode runs messages.transform BEFORE the system transform of the same step.
      await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: prunedMsg(s, out) } as never);
      const block = await plugin.step(s);
      expect(sectionPaths(block)).toContain("services/api/AGENTS.md");
    });
  }
});

describe("a compaction whose event arrives after the next main step's messages.transform (found in review)", () => {
  test("the summary that main step's messages show still rebuilds the block at that step", async () => {
    const { plugin, s, out } = await delivered();
    await plugin.compact(s);
    await plugin.hooks["experimental.chat.system.transform"]!({ sessionID: s, model: {} as never }, { system: ["You are a context summarization agent."] });
    const after = [
      { info: { id: "msg_c", sessionID: s, role: "user" }, parts: [{ type: "compaction" }] },
      { info: { id: "msg_s", sessionID: s, role: "assistant", summary: true }, parts: [{ type: "text", text: "summary" }] },
    ];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages: after } as never);
    const block = await plugin.step(s);
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: s } } } as never);
    expect(sectionPaths(block)).toContain("services/api/AGENTS.md");
  });
});

describe("compactions with no main request between them, then one whose event comes late (found in review)", () => {
  test("the step after the later compaction has the whole hierarchy, and its late event rebuilds nothing", async () => {
    const plugin = await open("monorepo");
    const h = new Host(plugin.hooks, "s");
    await h.user("go");
    await h.request();
    await h.tools([{ tool: "read", args: { filePath: "services/api/src/server.ts" } }]);
    await h.request();
    // Two /compact in a row: two hooks and two events, and the main loop shows only the latest summary.
    await h.compact();
    await h.compact();
    await h.user("more");
    await h.request();
    const { out } = await h.tools([{ tool: "read", args: { filePath: "apps/web/src/App.tsx" } }]);
    expect(sectionPaths(out[0])).toEqual(["apps/web/AGENTS.md"]);
    await h.request();
    // A third compaction summarizes that output away; its event comes after the next main step's messages.transform.
    await plugin.compact("s");
    await plugin.hooks["experimental.chat.system.transform"]!({ sessionID: "s", model: {} as never }, { system: ["You are a context summarization agent."] });
    const c = h.msg("user");
    c.parts.push({ id: h.nextId("prt"), type: "compaction" });
    const s = h.msg("assistant", { summary: true });
    s.parts.push({ id: h.nextId("prt"), type: "text", text: "summary" });
    h.messages = [c, s];
    const block = (await h.request()).system[1];
    expect(sectionPaths(block)).toContain("apps/web/AGENTS.md");
    await plugin.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: "s" } } } as never);
    await h.tools([{ tool: "read", args: { filePath: "apps/web/src/App.tsx" } }]);
    // Byte-identical until the next compaction: the late event was that compaction's, no news.
    expect((await h.request()).system[1]).toBe(block);
  });
});
