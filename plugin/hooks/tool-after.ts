import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { reminderPaths, stripReminders } from "../reminders.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["tool.execute.after"]>;

/**
 * Keeps the next step fresh after a tool ran, and removes OpenCode's copy of a nested instruction
 * file from a read's output when the session's block carries that file whole: once in the system
 * prompt (where it survives pruning and compaction) instead of twice.
 */
export function createToolAfter(engine: Engine, log: Logger): Hook {
  return guard(log, "tool.execute.after", async (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    if (typeof input?.sessionID !== "string") return;
    engine.checkBeforeNextStep(input.sessionID);
    // Only read gets OpenCode's reminder; any other output is left exactly as the tool wrote it.
    if (input.tool !== "read" || typeof output?.output !== "string" || !output.output.includes("<system-reminder>")) return;
    const paths = reminderPaths(output.output);
    if (paths.length === 0) return;
    const memo = await engine.current(input.sessionID);
    if (memo === undefined) return;
    const real = new Map(await Promise.all(paths.map(async (path) => [path, await engine.realPath(path)] as const)));
    output.output = stripReminders(output.output, (path) => memo.whole.has(real.get(path) ?? path));
  });
}
