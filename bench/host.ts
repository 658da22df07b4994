/**
 * Everything the bench needs to stand in for OpenCode: the plugin input, the model object, the
 * system[0] header OpenCode builds (with its own "Instructions from:" section for the root file),
 * and thin wrappers over the three hooks. The plugin is loaded by path at run time so the bench
 * type-checks and runs its baselines even before plugin/index.ts exists.
 */
import type { Hooks, Plugin, PluginInput, PluginOptions } from "@opencode-ai/plugin";
import type { Model } from "@opencode-ai/sdk";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const DEFAULT_PLUGIN_PATH = resolve(import.meta.dir, "../plugin/index.ts");

export function pluginPath(): string {
  return process.env.BENCH_PLUGIN ? resolve(process.env.BENCH_PLUGIN) : DEFAULT_PLUGIN_PATH;
}

export function pluginExists(): boolean {
  return existsSync(pluginPath());
}

export async function loadPlugin(path = pluginPath()): Promise<Plugin> {
  const module = (await import(path)) as { ProjectContext?: Plugin };
  if (typeof module.ProjectContext !== "function") throw new Error(`${path} does not export ProjectContext`);
  return module.ProjectContext;
}

/** What the plugin logged through client.app.log (warnings and errors are reported with the results). */
export interface PluginLogEntry {
  level: string;
  message: string;
}

export const pluginLog: PluginLogEntry[] = [];

export function makePluginInput(root: string): PluginInput {
  const client = {
    app: {
      log: async (request?: { body?: { level?: unknown; message?: unknown } }) => {
        const level = String(request?.body?.level ?? "info");
        if (level !== "debug" && level !== "info" && pluginLog.length < 1000) {
          pluginLog.push({ level, message: String(request?.body?.message ?? "") });
        }
        return {};
      },
    },
    session: { messages: async () => ({ data: [] }) },
  };
  return {
    client: client as unknown as PluginInput["client"],
    project: { id: "bench", worktree: root, time: { created: Date.now() } } as unknown as PluginInput["project"],
    directory: root,
    worktree: root,
    $: Bun.$ as unknown as PluginInput["$"],
    serverUrl: new URL("http://127.0.0.1:4096"),
    experimental_workspace: { register() {} },
  };
}

export const BENCH_MODEL: Model = {
  id: "m1",
  providerID: "mock",
  api: { id: "m1", url: "http://127.0.0.1:1/v1", npm: "@ai-sdk/openai-compatible" },
  name: "m1",
  capabilities: {
    temperature: true,
    reasoning: false,
    attachment: false,
    toolcall: true,
    input: { text: true, audio: false, image: false, video: false, pdf: false },
    output: { text: true, audio: false, image: false, video: false, pdf: false },
  },
  cost: { input: 0, output: 0, cache: { read: 0, write: 0 } },
  limit: { context: 200_000, output: 32_000 },
  status: "active",
  options: {},
  headers: {},
};

const AGENT_PROMPT_SENTENCE =
  "You are opencode, an interactive CLI agent that helps users with software engineering tasks. " +
  "Use the instructions below and the tools available to you to assist the user. Keep responses " +
  "concise, follow the conventions of the codebase, verify changes with the project's tests, and " +
  "never commit unless asked. ";

/**
 * A realistic system[0]: ~4 KB agent prompt, the <env> block, and OpenCode's own injection of the
 * root instruction file (session directory = worktree root, so only the root file is there).
 * OpenCode rebuilds this string for every request, so callers get the parts and join them per call.
 */
export function headerParts(root: string): [string, string] {
  const prompt = AGENT_PROMPT_SENTENCE.repeat(12);
  const env =
    `<env>\n  Working directory: ${root}\n  Is directory a git repo: yes\n  Platform: linux\n` +
    `  Today's date: Sat Nov 22 2025\n</env>\n`;
  const rootFile = join(root, "AGENTS.md");
  const rootText = existsSync(rootFile) ? readFileSync(rootFile, "utf8") : "";
  return [prompt + env, `Instructions from: ${rootFile}\n${rootText}`];
}

/** A fresh, flat string per request, as OpenCode's join produces. */
export function buildHeader(parts: readonly [string, string]): string {
  return [parts[0], parts[1]].join("");
}

export interface HookSet {
  toolBefore: NonNullable<Hooks["tool.execute.before"]>;
  /** Optional in the contract; the host calls it after every tool, so the bench does too. */
  toolAfter: NonNullable<Hooks["tool.execute.after"]>;
  systemTransform: NonNullable<Hooks["experimental.chat.system.transform"]>;
  compacting: NonNullable<Hooks["experimental.session.compacting"]>;
  dispose: () => Promise<void>;
}

export function requireHooks(hooks: Hooks): HookSet {
  const toolBefore = hooks["tool.execute.before"];
  const systemTransform = hooks["experimental.chat.system.transform"];
  const compacting = hooks["experimental.session.compacting"];
  if (!toolBefore || !systemTransform || !compacting) {
    throw new Error("plugin is missing one of tool.execute.before / experimental.chat.system.transform / experimental.session.compacting");
  }
  return {
    toolBefore,
    toolAfter: hooks["tool.execute.after"] ?? (async () => {}),
    systemTransform,
    compacting,
    dispose: hooks.dispose ?? (async () => {}),
  };
}

/** One OpenCode session driving the plugin's hooks the way the host does. */
export class PluginSession {
  private callCounter = 0;

  constructor(
    readonly hooks: HookSet,
    readonly sessionID: string,
    private readonly header: readonly [string, string],
  ) {}

  touchInput(): { tool: string; sessionID: string; callID: string } {
    return { tool: "read", sessionID: this.sessionID, callID: `call_${++this.callCounter}` };
  }

  /** tool.execute.before only, as when timing that hook alone. */
  async touch(filePath: string): Promise<void> {
    await this.hooks.toolBefore(this.touchInput(), { args: { filePath } });
  }

  /** A whole tool call as the host makes it: before, the tool runs, after. */
  async toolCall(tool: string, args: Record<string, unknown>): Promise<void> {
    const input = { tool, sessionID: this.sessionID, callID: `call_${++this.callCounter}` };
    await this.hooks.toolBefore(input, { args });
    await this.hooks.toolAfter({ ...input, args }, { title: tool, output: "ok", metadata: {} });
  }

  transformInput(): { sessionID: string; model: Model } {
    return { sessionID: this.sessionID, model: BENCH_MODEL };
  }

  transformOutput(): { system: string[] } {
    return { system: [buildHeader(this.header)] };
  }

  /** The block the plugin pushed for this request ("" when it pushed nothing). */
  async transform(): Promise<string> {
    const output = this.transformOutput();
    await this.hooks.systemTransform(this.transformInput(), output);
    return output.system.slice(1).join("\n");
  }

  async compact(): Promise<string[]> {
    const output: { context: string[]; prompt?: string } = { context: [] };
    await this.hooks.compacting({ sessionID: this.sessionID }, output);
    return output.context;
  }
}

export interface PluginInstance {
  hooks: HookSet;
  session(sessionID?: string): PluginSession;
}

export async function startPlugin(plugin: Plugin, root: string, options: PluginOptions = {}): Promise<PluginInstance> {
  const hooks = requireHooks(await plugin(makePluginInput(root), options));
  const header = headerParts(root);
  return { hooks, session: (sessionID = "ses_bench") => new PluginSession(hooks, sessionID, header) };
}
