import type { Hooks } from "@opencode-ai/plugin";
type Part = Record<string, any> & { type: string };
type Message = { info: Record<string, any> & { id: string; role: string }; parts: Part[] };
export type Call = { tool: string; args: Record<string, unknown>; output?: string; metadata?: Record<string, unknown> };

/**
 * A small OpenCode host for conversation seams (after bench/host.ts): OpenCode's prune (a tool part's
 * `state.time.compacted`), its compaction (hook, the agent's own request, then a summary and the kept
 * tail) and what the model reads of a request.
 */
export class Host {
  messages: Message[] = [];
  counter = 0;
  lastSystem: string[] = [];
  constructor(readonly hooks: Hooks, readonly id: string, public header = "You are opencode, an interactive CLI agent.") {}
  nextId(p: string) { return `${p}_${String(++this.counter).padStart(8, "0")}`; }
  msg(role: string, extra: Record<string, unknown> = {}): Message {
    return { info: { id: this.nextId("msg"), sessionID: this.id, role, time: { created: Date.now() }, agent: "build", ...extra }, parts: [] };
  }
  async user(text: string) {
    const m = this.msg("user");
    m.parts.push({ id: this.nextId("prt"), type: "text", text });
    await this.hooks["chat.message"]!({ sessionID: this.id, agent: "build", messageID: m.info.id } as never, { message: m.info, parts: m.parts } as never);
    this.messages.push(m);
  }
  /** One step's tool calls; returns outputs and call ids. */
  async tools(calls: Call[], between?: (i: number) => Promise<void>): Promise<{ out: string[]; ids: string[] }> {
    const m = this.msg("assistant");
    const ids = calls.map(() => this.nextId("call"));
    const out = await Promise.all(calls.map(async (c, i) => {
      await this.hooks["tool.execute.before"]!({ tool: c.tool, sessionID: this.id, callID: ids[i]! }, { args: c.args });
      if (between) await between(i);
      const o = { title: c.tool, output: c.output ?? "tool result", metadata: c.metadata ?? {} };
      await this.hooks["tool.execute.after"]!({ tool: c.tool, sessionID: this.id, callID: ids[i]!, args: c.args }, o);
      m.parts.push({ id: this.nextId("prt"), type: "tool", callID: ids[i], tool: c.tool, state: { status: "completed", input: c.args, ...o, time: { start: 1, end: 2 } } });
      return o.output;
    }));
    this.messages.push(m);
    return { out, ids };
  }
  prune(callID: string) {
    for (const m of this.messages) for (const p of m.parts) if (p.type === "tool" && p.callID === callID) p.state = { ...p.state, time: { ...p.state.time, compacted: Date.now() } };
  }
  /** What is sent: messages.transform then system.transform. */
  async request(): Promise<{ system: string[]; messages: Message[] }> {
    const messages = structuredClone(this.messages);
    await this.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
    const system = [this.header];
    await this.hooks["experimental.chat.system.transform"]!({ sessionID: this.id, model: {} as never } as never, { system });
    this.lastSystem = system;
    return { system, messages };
  }
  /** OpenCode compaction: hook, the agent's own transform+request, event, then history = [compaction, summary, ...tail]. */
  async compact(keepTail = 0): Promise<string[]> {
    const out = { context: [] as string[] };
    await this.hooks["experimental.session.compacting"]!({ sessionID: this.id } as never, out as never);
    const head = this.messages.slice(0, this.messages.length - keepTail);
    const tail = keepTail === 0 ? [] : this.messages.slice(-keepTail);
    await this.hooks["experimental.chat.messages.transform"]!({} as never, { messages: structuredClone(head) } as never);
    await this.hooks["experimental.chat.system.transform"]!({ sessionID: this.id, model: {} as never } as never, { system: ["You are a context summarization agent."] });
    const c = this.msg("user"); c.parts.push({ id: this.nextId("prt"), type: "compaction" });
    const s = this.msg("assistant", { summary: true }); s.parts.push({ id: this.nextId("prt"), type: "text", text: "summary of the work" });
    this.messages = [c, s, ...tail];
    await this.hooks.event!({ event: { type: "session.compacted", properties: { sessionID: this.id } } } as never);
    return out.context;
  }
}

/** What the model reads: system entries, then each part's text as sent (pruned outputs cleared). */
export function promptOf(req: { system: string[]; messages: Message[] }): string {
  const texts = [...req.system];
  for (const m of req.messages) for (const p of m.parts) {
    if (p.type === "tool") texts.push(p.state?.time?.compacted ? "[Old tool result content cleared]" : String(p.state?.output));
    else if (p.type === "text") texts.push(String(p.text));
  }
  return texts.join("\n");
}

/** Each file's last section in the prompt: its body (whole or cut), or "DELETED" for a later deletion notice. */
export function latest(prompt: string): Map<string, string> {
  const found = new Map<string, { at: number; body: string }>();
  for (const m of prompt.matchAll(/<context-file path="([^"]*)"[^>]*>\n([\s\S]*?)\n?<\/context-file>/g)) {
    found.set(m[1]!, { at: m.index!, body: m[2]! });
  }
  for (const m of prompt.matchAll(/\["([^"]*)" no longer applies/g)) {
    const prev = found.get(m[1]!);
    if (prev === undefined || prev.at < m.index!) found.set(m[1]!, { at: m.index!, body: "DELETED" });
  }
  return new Map([...found].map(([k, v]) => [k, v.body]));
}
