import type { Hooks, Plugin, PluginInput } from "@opencode-ai/plugin";
import { Engine } from "./engine.ts";
import { CONTEXT_TOOL } from "./host/tool-paths.ts";
import { createChatMessage } from "./hooks/chat-message.ts";
import { createCompacting } from "./hooks/compacting.ts";
import { createContextTool } from "./hooks/context-tool.ts";
import { createEvent } from "./hooks/event.ts";
import { createMessagesTransform } from "./hooks/messages-transform.ts";
import { createSystemTransform } from "./hooks/system-transform.ts";
import { createToolAfter } from "./hooks/tool-after.ts";
import { createToolBefore } from "./hooks/tool-before.ts";
import { warmBound } from "./block/tokens.ts";
import { WARM_FRONTMATTER } from "./files/frontmatter.ts";
import { preload } from "./libraries.ts";
import { nextTurn } from "./turns.ts";
import { createLogger, type Logger } from "./log.ts";
import { resolveOptions } from "./options.ts";
import { VERSION } from "./version.ts";

/**
 * OpenCode may call both exports of this module (default and named) with the same input, and a user
 * may install the plugin both ways (opencode.json and a drop-in), which loads two copies of this
 * module. Only the first call for an input gets hooks, so the block is never injected twice; the
 * registry lives on globalThis so that every copy of the module shares it.
 */
const REGISTRY = Symbol.for("opencode-project-context/started");
const started: WeakSet<object> = ((globalThis as Record<symbol, WeakSet<object>>)[REGISTRY] ??= new WeakSet());

/**
 * The plugin: gives each session the AGENTS.md hierarchy of the directories it touches, once and
 * fresh, in a prompt-cache-stable way, and hands compaction a budgeted copy.
 */
export const ProjectContext: Plugin = async (input: PluginInput, rawOptions?: Record<string, unknown>): Promise<Hooks> => {
  const log = createLogger(input?.client);
  try {
    if (typeof input !== "object" || input === null) throw new Error("no plugin input");
    if (started.has(input)) return {};
    started.add(input);
    const options = await resolveOptions(rawOptions, (message) => log.log("warn", message));
    const directory = typeof input.directory === "string" && input.directory !== "" ? input.directory : process.cwd();
    // Outside a git repository OpenCode's worktree is "/": the session directory is the root then,
    // so nothing above the project is ever read.
    const worktree = typeof input.worktree === "string" && input.worktree !== "" && input.worktree !== "/" ? input.worktree : directory;
    const engine = await Engine.create({ directory, worktree, options, log, client: input.client });
    log.log("info", `project-context ${VERSION} started: worktree ${worktree}, delivery ${options.delivery}, watcher ${engine.store.events ?? "off"}, records ${engine.records?.dir ?? "off"}`);
    // The libraries load with the worktree's catalog (in the background once steps leave the loop
    // alone) if a file needs them; a session's first step waits for git's settings of ignoring only.
    engine.startCatalog(() => warmUp(log));
    // The token bound's table (a 1.1 MB file, 1-2 ms) is wanted by a session's first block: it loads
    // in a task of its own now, while a first message waits for git's settings, not inside that block.
    void preload([warmBound], warn(log));
    return {
      "tool.execute.before": createToolBefore(engine, log),
      "tool.execute.after": createToolAfter(engine, log),
      "chat.message": createChatMessage(engine, log),
      "experimental.chat.messages.transform": createMessagesTransform(engine, log),
      "experimental.chat.system.transform": createSystemTransform(engine, log),
      "experimental.session.compacting": createCompacting(engine, log),
      event: createEvent(engine, log),
      tool: { [CONTEXT_TOOL]: createContextTool(engine, log) },
      dispose: () => engine.dispose().catch(() => {}),
    };
  } catch (error) {
    log.log("error", `project-context failed to start and is off for this instance: ${error instanceof Error ? error.message : String(error)}`);
    return {};
  }
};

/**
 * The libraries a step would otherwise load in one go (gray-matter with js-yaml and esprima, 20-35
 * ms) are loaded in the background, each in an event-loop task of its own, so that no task of the
 * plugin blocks OpenCode for long: by the catalog, before the first file whose frontmatter needs them.
 * A step reads most frontmatter without gray-matter (frontmatter.ts): one that meets another shape
 * before the loads are done (or in a worktree that had none) loads it there and then.
 */
async function warmUp(log: Logger): Promise<void> {
  await preload(WARM_FRONTMATTER, warn(log));
  // Settled in a task of its own: a step waiting for this must not run in the last load's task.
  await nextTurn();
}

const warn = (log: Logger) => (message: string) => log.log("warn", message);

export default ProjectContext;
