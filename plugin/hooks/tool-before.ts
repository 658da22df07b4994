import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["tool.execute.before"]>;

/** Records the paths every tool call names, for its session. */
export function createToolBefore(engine: Engine, log: Logger): Hook {
  return guard(log, "tool.execute.before", (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    if (typeof input?.sessionID !== "string") return;
    engine.touch(input.sessionID, input.tool, output?.args);
  });
}
