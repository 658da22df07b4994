import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["experimental.chat.system.transform"]>;

/**
 * OpenCode runs its internal agents through the same transform. They get no block: a title needs no
 * project rules, and the compaction agent gets its copy from the compacting hook instead. Their prompt
 * starts an entry, or follows, after a blank line, another entry's whole text: a plugin that runs
 * before this one may put an entry of its own in front and repeat it there (auth plugins that name the
 * model's vendor do). Anywhere else (a line of an agent's prompt, an AGENTS.md) it is no such request.
 */
const TITLE_AGENT = "You are a title generator";
const SUMMARIZATION_AGENT = "You are a context summarization agent";

/** The internal agent whose request this is, if it is one. Runs on every request: compares in place, copies no entry. */
function internalAgent(entries: readonly string[]): string | undefined {
  // Another entry's whole text: an entry never follows itself (that compare alone read OpenCode's whole prompt twice a request).
  const follows = (entry: string, before: string, prompt: string) =>
    before !== "" && before !== entry && entry.startsWith(before) && entry.startsWith("\n\n", before.length) && entry.startsWith(prompt, before.length + 2);
  const asks = (prompt: string) => entries.some((entry) => entry.startsWith(prompt) || entries.some((before) => follows(entry, before, prompt)));
  return [TITLE_AGENT, SUMMARIZATION_AGENT].find(asks);
}

/** Pushes the session's `<project-context>` block as its own system message, or nothing. */
export function createSystemTransform(engine: Engine, log: Logger): Hook {
  return guard(log, "experimental.chat.system.transform", async (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    const system = output?.system;
    if (typeof input?.sessionID !== "string" || !Array.isArray(system)) return;
    const entries = system.filter((part): part is string => typeof part === "string");
    const agent = internalAgent(entries);
    // The compaction's own request: whatever messages OpenCode shows after it are the main loop's.
    if (agent === SUMMARIZATION_AGENT) engine.compactionRequested(input.sessionID);
    if (agent !== undefined) return;
    const block = await engine.system(input.sessionID, entries);
    if (block !== "") system.push(block);
  });
}
