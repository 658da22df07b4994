import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["tool.execute.after"]>;

/**
 * After a tool ran: the files it reached (or that changed) ride on its output, and OpenCode's own
 * reminder copy of a file the conversation already holds whole is removed.
 */
export function createToolAfter(engine: Engine, log: Logger): Hook {
  return guard(log, "tool.execute.after", async (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    if (typeof input?.sessionID !== "string" || typeof output !== "object" || output === null) return;
    await engine.afterTool(input.sessionID, input.tool, input.callID, input.args, output);
  });
}
