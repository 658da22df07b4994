import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["chat.message"]>;

/** A user message starts a step: whatever the user edited since the last one is checked first. */
export function createChatMessage(engine: Engine, log: Logger): Hook {
  return guard(log, "chat.message", (input: Parameters<Hook>[0]) => {
    if (typeof input?.sessionID === "string") engine.checkBeforeNextStep(input.sessionID);
  });
}
