import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["event"]>;

/** Frees a session's state when OpenCode deletes the session. */
export function createEvent(engine: Engine, log: Logger): Hook {
  return guard(log, "event", (input: Parameters<Hook>[0]) => {
    const event = input?.event;
    if (event?.type !== "session.deleted") return;
    const id = (event.properties as { info?: { id?: unknown } } | undefined)?.info?.id;
    if (typeof id === "string") engine.forget(id);
  });
}
