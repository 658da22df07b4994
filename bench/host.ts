/**
 * A stand-in for OpenCode 1.18.33 driving the plugin through its public hooks only, in the host's
 * order (/tmp/v2/opencode-facts.md, /work/shared/opencode-host.md): a user message fires
 * `chat.message`; a step's tool calls run `tool.execute.before` then `tool.execute.after` (parallel
 * calls concurrently); the next request runs `experimental.chat.messages.transform` on a fresh
 * copy of the conversation (OpenCode re-reads it from its database every step) and then
 * `experimental.chat.system.transform` with system[0] rebuilt as a new string. Tool outputs are
 * stored as the plugin left them, so text it appended stays in the conversation.
 */
import type { Hooks, PluginInput } from "@opencode-ai/plugin";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const pluginPath = (): string => resolve(process.env.BENCH_PLUGIN ?? join(import.meta.dir, "../plugin/index.ts"));

/** Warnings and errors the plugin logged through client.app.log (reported with the results). */
export const pluginLog: string[] = [];

export function pluginInput(root: string): PluginInput {
  const log = async ({ body }: { body?: { level?: string; message?: string } } = {}) => {
    if (body?.level !== "debug" && body?.level !== "info" && pluginLog.length < 200) pluginLog.push(`${body?.level}: ${body?.message}`);
    return {};
  };
  const [project, serverUrl] = [{ id: "bench", worktree: root, time: { created: Date.now() } }, new URL("http://127.0.0.1:4096")];
  const client = { app: { log }, session: { messages: async () => ({ data: [] }) } };
  return { client, project, directory: root, worktree: root, $: Bun.$, serverUrl, experimental_workspace: { register() {} } } as unknown as PluginInput;
}

const MODEL = { id: "m1", providerID: "mock", name: "m1", limit: { context: 200_000, output: 32_000 } };
const AGENT_PROMPT = "You are opencode, an interactive CLI agent that helps users with software engineering tasks. ".repeat(40);

type Part = Record<string, unknown> & { type: string };
type Message = { info: Record<string, unknown> & { id: string; role: string }; parts: Part[] };
export type Request = { system: string[]; messages: Message[] };
export type Call = { tool: string; args: Record<string, unknown> };

/** One OpenCode session. The plugin instance (hooks) may be shared by several sessions. */
export class Session {
  readonly messages: Message[] = [];
  private counter = 0;
  private readonly header: string[];

  constructor(
    readonly hooks: Hooks,
    readonly root: string,
    readonly id = "ses_bench",
  ) {
    // OpenCode's own injection of the session directory's AGENTS.md (the session runs at the root).
    const rootFile = join(root, "AGENTS.md");
    const rootText = existsSync(rootFile) ? readFileSync(rootFile, "utf8") : "";
    this.header = [`${AGENT_PROMPT}\n<env>\n  Working directory: ${root}\n</env>\n`, `Instructions from: ${rootFile}\n${rootText}`];
  }

  private nextId(prefix: string): string {
    return `${prefix}_${String(++this.counter).padStart(10, "0")}`;
  }

  private message(role: string, extra: Record<string, unknown>): Message {
    const info = { id: this.nextId("msg"), sessionID: this.id, role, time: { created: Date.now() }, agent: "build", ...extra };
    return { info, parts: [] };
  }

  private part(message: Message, fields: Record<string, unknown> & { type: string }): Part {
    return { id: this.nextId("prt"), sessionID: this.id, messageID: message.info.id, ...fields };
  }

  /** A user message, through chat.message (the plugin may add parts; they stay in the conversation). */
  async userMessage(text: string): Promise<void> {
    const model = { providerID: "mock", modelID: "m1" };
    const message = this.message("user", { model });
    message.parts.push(this.part(message, { type: "text", text }));
    const input = { sessionID: this.id, agent: "build", model, messageID: message.info.id };
    await this.hooks["chat.message"]?.(input as never, { message: message.info, parts: message.parts } as never);
    this.messages.push(message);
  }

  /** One step's tool calls, run concurrently as OpenCode does; returns what the model sees of each. */
  async tools(calls: readonly Call[], filler = ""): Promise<string[]> {
    const message = this.message("assistant", { mode: "build", modelID: "m1", providerID: "mock", path: { cwd: this.root, root: this.root } });
    if (filler) message.parts.push(this.part(message, { type: "text", text: filler }));
    const outputs = await Promise.all(
      calls.map(async ({ tool, args }) => {
        const callID = this.nextId("call");
        const start = Date.now();
        await this.hooks["tool.execute.before"]?.({ tool, sessionID: this.id, callID }, { args });
        const metadata = tool === "read" ? { preview: "", truncated: false, loaded: [] } : {};
        const output = { title: tool, output: `<file>\n00001| export const value = ${callID.length};\n</file>`, metadata };
        await this.hooks["tool.execute.after"]?.({ tool, sessionID: this.id, callID, args }, output);
        const state = { status: "completed", input: args, ...output, time: { start, end: Date.now() } };
        message.parts.push(this.part(message, { type: "tool", callID, tool, state }));
        return output.output;
      }),
    );
    this.messages.push(message);
    return outputs;
  }

  /** What OpenCode prepares for a request (not timed): a fresh copy of the conversation, system[0] a new string. */
  prepare(): Request {
    const copy = (p: Part): Part => (p.state ? { ...p, state: { ...(p.state as object) } } : { ...p });
    const messages = this.messages.map((m) => ({ info: { ...m.info }, parts: m.parts.map(copy) }));
    return { messages, system: [this.header.join("")] };
  }

  /** The next request: messages.transform then system.transform, on the prepared objects. */
  async request(prepared = this.prepare()): Promise<Request> {
    await this.hooks["experimental.chat.messages.transform"]?.({}, { messages: prepared.messages } as never);
    await this.hooks["experimental.chat.system.transform"]?.({ sessionID: this.id, model: MODEL } as never, { system: prepared.system });
    return prepared;
  }
}

/** What the model reads of a request, as one string: system messages then every part's text. */
export function promptText(system: readonly string[], messages: readonly Message[]): string {
  const texts = [...system];
  for (const { parts } of messages) {
    for (const p of parts) texts.push(String(p.type === "tool" ? (p.state as { output?: string }).output : (p.text ?? "")));
  }
  return texts.join("\n");
}
