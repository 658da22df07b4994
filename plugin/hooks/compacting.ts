import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["experimental.session.compacting"]>;

/** Hands the summarizer a token-budgeted, closest-first copy of the session's context files. */
export function createCompacting(engine: Engine, log: Logger): Hook {
  return guard(log, "experimental.session.compacting", async (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    if (typeof input?.sessionID !== "string" || !Array.isArray(output?.context)) return;
    const copy = await engine.compactionCopy(input.sessionID);
    if (copy !== "") output.context.push(copy);
  });
}
