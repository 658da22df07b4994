import type { Hooks, PluginInput, ToolContext } from "@opencode-ai/plugin";
import { afterEach } from "bun:test";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { cp, mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ProjectContext } from "../../plugin/index.ts";

export interface LogEntry {
  service: string;
  level: string;
  message: string;
}

/**
 * Stands in for OpenCode's SDK client: the two endpoints the plugin uses, recording what it logs.
 * `history` is what a session's history read answers; "never" makes it hang, like a stuck server.
 */
export function fakeClient(history: unknown[] | "never" = []) {
  const logs: LogEntry[] = [];
  const client = {
    app: {
      log: async ({ body }: { body: LogEntry }) => {
        logs.push(body);
        return { data: true };
      },
    },
    session: {
      messages: () => (history === "never" ? new Promise(() => {}) : Promise.resolve({ data: history })),
    },
  };
  return { client: client as unknown as PluginInput["client"], logs };
}

/** A temporary copy of `tests/fixtures/<scenario>` (or an empty directory), removed by `cleanup`. */
export async function tempProject(scenario?: string): Promise<{ root: string; cleanup: () => Promise<void> }> {
  const root = await realpath(await mkdtemp(join(tmpdir(), "project-context-")));
  if (scenario !== undefined) await cp(join(import.meta.dir, "..", "fixtures", scenario), root, { recursive: true });
  return { root, cleanup: () => rm(root, { recursive: true, force: true }) };
}

export interface Started {
  /** The worktree the plugin was started on. */
  root: string;
  hooks: Hooks;
  logs: LogEntry[];
  /** Runs `tool.execute.before` as OpenCode does before a tool. */
  touch(sessionID: string, tool: string, args: unknown): Promise<void>;
  /** Runs the system transform as OpenCode does for a step and returns what the plugin pushed (or undefined). */
  step(sessionID: string, header?: string): Promise<string | undefined>;
  /** Steps until the block satisfies `accept` (bounded wait), and returns that block. */
  stepUntil(sessionID: string, accept: (block: string | undefined) => boolean, what: string, timeoutMs?: number): Promise<string | undefined>;
  /** Runs the compacting hook and returns what it added to the context. */
  compact(sessionID: string): Promise<string[]>;
  dispose(): Promise<void>;
}

/** Loads the plugin the way OpenCode does: the exported Plugin function, then its hooks. */
export async function start(
  root: string,
  options?: Record<string, unknown>,
  { directory = root, history = [] as unknown[] | "never", worktree = root } = {},
): Promise<Started> {
  const { client, logs } = fakeClient(history);
  const input = { client, directory, worktree, project: {}, serverUrl: new URL("http://127.0.0.1:4096"), $: undefined } as unknown as PluginInput;
  const hooks = await ProjectContext(input, options);
  let call = 0;
  const step = async (sessionID: string, header = "You are opencode, an interactive CLI tool.") => {
    const output = { system: [header] };
    await hooks["experimental.chat.system.transform"]!({ sessionID, model: {} as never }, output);
    return output.system[1];
  };
  return {
    root,
    hooks,
    logs,
    async touch(sessionID, tool, args) {
      await hooks["tool.execute.before"]!({ tool, sessionID, callID: `call-${++call}` }, { args });
    },
    step,
    async stepUntil(sessionID, accept, what, timeoutMs = 3000) {
      const { block } = await waitFor(async () => {
        const block = await step(sessionID);
        return accept(block) ? { block } : undefined;
      }, timeoutMs, what);
      return block;
    },
    async compact(sessionID) {
      const output = { context: [] as string[] };
      await hooks["experimental.session.compacting"]!({ sessionID }, output);
      return output.context;
    },
    dispose: () => hooks.dispose?.() ?? Promise.resolve(),
  };
}

/** Waits until `condition` holds, checking every few milliseconds, failing after `timeoutMs`. */
export async function waitFor<T>(condition: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 3000, what = "condition"): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(10);
  }
}

/** The `path` attributes of a block's sections, in order. */
export function sectionPaths(block: string | undefined): string[] {
  return [...(block ?? "").matchAll(/<context-file path="([^"]*)">/g)].map((match) => match[1]!);
}

/**
 * For a test file: opens the plugin on a temporary copy of `tests/fixtures/<scenario>` (an empty
 * directory without one) with `files` (worktree-relative path → text) written in before it starts;
 * every plugin opened is disposed and its copy removed after each test.
 */
export function projects() {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  return async (
    scenario: string | undefined,
    options?: Record<string, unknown>,
    startOptions: { directory?: (root: string) => string; history?: unknown[] | "never"; worktree?: string; files?: Record<string, string> } = {},
  ): Promise<Started> => {
    const project = await tempProject(scenario);
    for (const [rel, text] of Object.entries(startOptions.files ?? {})) {
      await mkdir(dirname(join(project.root, rel)), { recursive: true });
      await writeFile(join(project.root, rel), text);
    }
    const plugin = await start(project.root, options, {
      directory: startOptions.directory?.(project.root) ?? project.root,
      history: startOptions.history ?? [],
      worktree: startOptions.worktree ?? project.root,
    });
    cleanups.push(async () => {
      await plugin.dispose();
      await project.cleanup();
    });
    return plugin;
  };
}

/** Calls the project_context tool as OpenCode does: before, execute, after; returns what the model gets. */
/** A `read` as OpenCode runs it (tool.execute.before, then tool.execute.after with its result): what the model gets of its output. */
export async function readTool(plugin: Started, sessionID: string, filePath: string): Promise<string> {
  const args = { filePath };
  await plugin.touch(sessionID, "read", args);
  const result = { title: "read", output: "file text", metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID, callID: `call-${Math.random()}`, args } as never, result as never);
  return result.output;
}

export async function callContextTool(plugin: Started, sessionID: string, args: Record<string, string>): Promise<string> {
  const full = { path: "", section: "", content: "", ...args };
  const callID = `call-${Math.random()}`;
  await plugin.hooks["tool.execute.before"]!({ tool: "project_context", sessionID, callID }, { args: full });
  const output = await plugin.hooks.tool!.project_context!.execute(full as never, { sessionID, messageID: "msg_1", agent: "build" } as unknown as ToolContext);
  const result = { title: "project_context", output: output as string, metadata: {} };
  await plugin.hooks["tool.execute.after"]!({ tool: "project_context", sessionID, callID, args: full }, result);
  return result.output;
}

/**
 * This process's inotify instances and the inode (hex) of the directory of each of their watches, as
 * the kernel lists them (Linux: /proc/self/fdinfo): what is watched, whatever the plugin believes.
 */
export function inotifyWatches(): { instances: number; inodes: string[] } {
  let instances = 0;
  const inodes: string[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (!readlinkSync(`/proc/self/fd/${fd}`).includes("inotify")) continue;
      instances++;
      for (const [, ino] of readFileSync(`/proc/self/fdinfo/${fd}`, "utf8").matchAll(/^inotify wd:\S+ ino:([0-9a-f]+)/gm)) inodes.push(ino!);
    } catch {
      // closed meanwhile (the directory listing's own descriptor, or a watch's instance)
    }
  }
  return { instances, inodes };
}
