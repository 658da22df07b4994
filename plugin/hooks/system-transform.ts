import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["experimental.chat.system.transform"]>;

/**
 * OpenCode runs its internal agents through the same transform. They get no block: a title needs no
 * project rules, and the compaction agent gets its copy from the compacting hook instead.
 */
const INTERNAL_AGENTS = ["You are a title generator", "You are a context summarization agent"];

/** Pushes the session's `<project-context>` block as its own system message, or nothing. */
export function createSystemTransform(engine: Engine, log: Logger): Hook {
  return guard(log, "experimental.chat.system.transform", async (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    const system = output?.system;
    if (typeof input?.sessionID !== "string" || !Array.isArray(system)) return;
    const first = system[0];
    if (typeof first === "string" && INTERNAL_AGENTS.some((prefix) => first.startsWith(prefix))) return;
    const block = await engine.system(input.sessionID, system.filter((part): part is string => typeof part === "string"));
    if (block !== "") system.push(block);
  });
}
