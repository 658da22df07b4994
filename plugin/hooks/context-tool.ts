import type { ToolDefinition } from "@opencode-ai/plugin";
import type { ContextToolArgs, ContextToolAsk, Engine } from "../engine.ts";
import { escapeInline } from "../block/escape.ts";
import type { Logger } from "../log.ts";

const ACTIONS = ["list", "load", "unload", "update"] as const;

const DESCRIPTION = `The project's context files (AGENTS.md and the like) this session has, and steering them.
- list: every context file of the session with its level (root, parent, direct), include mode, tokens, and state (whole, cut with N tokens left out, in the conversation, not in the context, and why).
- load: pin a context file, or a directory (its chain up to the worktree root), to this session.
- unload: take a context file (or a pinned directory) out of this session until a tool call touches its directory again.
- update: replace (or add) one "## section" of a context file: section is the heading's text without the #s, content the section's body without its heading line. Frontmatter cannot be edited.
Paths are worktree-relative or absolute. Pass "" for arguments an action does not use.`;

/**
 * The project_context tool. Its arguments are given as JSON Schema, not zod: OpenCode 1.18.33
 * accepts both (a non-zod shape is sent as written, every key required), and zod would cost the
 * plugin ~20 ms of start-up in one blocking load. The arguments are checked here instead.
 */
export function createContextTool(engine: Engine, log: Logger): ToolDefinition {
  const text = (description: string) => ({ type: "string", description });
  return {
    description: DESCRIPTION,
    args: {
      action: { type: "string", enum: [...ACTIONS], description: "list | load | unload | update" },
      path: text('A file or directory: worktree-relative or absolute ("" for list)'),
      section: text('update: the heading text of the section, without the #s ("" otherwise)'),
      content: text('update: the new body of the section, without its heading line ("" otherwise)'),
    } as unknown as ToolDefinition["args"],
    async execute(args: unknown, context: { sessionID?: unknown; ask?: unknown }): Promise<string> {
      const checked = checkArgs(args);
      if (typeof checked === "string") return `project_context: ${checked}`;
      if (typeof context?.sessionID !== "string") return "project_context: no session";
      try {
        const ask = typeof context.ask === "function" ? (context.ask.bind(context) as ContextToolAsk) : undefined;
        return await engine.contextTool(context.sessionID, checked, ask);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        log.once(`project_context:${message}`, "error", `project_context ${checked.action} failed: ${message}`);
        // Shown as every other text of the tool is: an error names paths, and names are repository content.
        return `project_context ${checked.action} failed: ${escapeInline(message)}`;
      }
    },
  } as ToolDefinition;
}

function checkArgs(raw: unknown): ContextToolArgs | string {
  if (typeof raw !== "object" || raw === null) return 'arguments must be an object: {"action": "list", "path": "", "section": "", "content": ""}';
  const args = raw as Record<string, unknown>;
  const action = args.action;
  if (typeof action !== "string" || !(ACTIONS as readonly string[]).includes(action)) return `action must be one of ${ACTIONS.join(", ")}`;
  const string = (key: string): string | undefined => (args[key] === undefined || args[key] === null ? "" : typeof args[key] === "string" ? (args[key] as string) : undefined);
  const [path, section, content] = [string("path"), string("section"), string("content")];
  if (path === undefined || section === undefined || content === undefined) return "path, section and content must be strings";
  if (action !== "list" && path.trim() === "") return `${action} needs a path`;
  if (action === "update" && section.trim() === "") return "update needs a section (the heading's text, without the #s)";
  return { action: action as ContextToolArgs["action"], path, section, content };
}
