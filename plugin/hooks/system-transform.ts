import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["experimental.chat.system.transform"]>;

/**
 * OpenCode runs its internal agents through the same transform. They get no block: a title needs no
 * project rules, and the compaction agent gets its copy from the compacting hook instead. Their prompt
 * is looked for in every entry, at its start or a line's: a plugin that runs before this one may put
 * its own entry or lines in front (auth plugins that name the model's vendor do).
 */
const INTERNAL_AGENTS = ["You are a title generator", "You are a context summarization agent"];

const isInternal = (system: readonly unknown[]): boolean =>
  system.some((part) => typeof part === "string" && INTERNAL_AGENTS.some((prefix) => part.startsWith(prefix) || part.includes(`\n${prefix}`)));

/** Pushes the session's `<project-context>` block as its own system message, or nothing. */
export function createSystemTransform(engine: Engine, log: Logger): Hook {
  return guard(log, "experimental.chat.system.transform", async (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    const system = output?.system;
    if (typeof input?.sessionID !== "string" || !Array.isArray(system)) return;
    if (isInternal(system)) return;
    const block = await engine.system(input.sessionID, system.filter((part): part is string => typeof part === "string"));
    if (block !== "") system.push(block);
  });
}
