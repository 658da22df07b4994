import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["event"]>;

/** `session.deleted` frees everything the session held (its watches included); `session.compacted` rebuilds its system block. */
export function createEvent(engine: Engine, log: Logger): Hook {
  return guard(log, "event", (input: Parameters<Hook>[0]) => {
    const event = input?.event as { type?: unknown; properties?: { sessionID?: unknown; info?: { id?: unknown } } } | undefined;
    const sessionID = event?.properties?.sessionID ?? event?.properties?.info?.id;
    if (typeof sessionID !== "string") return;
    if (event?.type === "session.deleted") engine.forget(sessionID);
    else if (event?.type === "session.compacted") engine.compacted(sessionID);
  });
}
