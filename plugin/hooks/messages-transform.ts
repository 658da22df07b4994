import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["experimental.chat.messages.transform"]>;

/** Runs before each step's system transform: notices tool outputs OpenCode pruned, whose files go back to the system block. */
export function createMessagesTransform(engine: Engine, log: Logger): Hook {
  return guard(log, "experimental.chat.messages.transform", (_input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    engine.observe(output?.messages);
  });
}
