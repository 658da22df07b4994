import type { Hooks } from "@opencode-ai/plugin";
import type { Engine } from "../engine.ts";
import type { Logger } from "../log.ts";
import { guard } from "./guard.ts";

type Hook = NonNullable<Hooks["chat.message"]>;

/**
 * A user message: context files edited since the conversation got them (by the user in an editor,
 * say) ride along as one more text part of the message. OpenCode stores a part a plugin adds as it
 * is given and orders a message's parts by id, so the id sorts after the message's own parts.
 */
export function createChatMessage(engine: Engine, log: Logger): Hook {
  return guard(log, "chat.message", async (input: Parameters<Hook>[0], output: Parameters<Hook>[1]) => {
    const message = output?.message as { id?: unknown } | undefined;
    if (typeof input?.sessionID !== "string" || typeof message?.id !== "string" || !Array.isArray(output.parts)) return;
    // What the user wrote (not parts other plugins or OpenCode added): what agent files are ranked against.
    const written = output.parts
      .filter((part) => (part as { type?: unknown; synthetic?: unknown }).type === "text" && (part as { synthetic?: unknown }).synthetic !== true)
      .map((part) => String((part as { text?: unknown }).text ?? ""))
      .join("\n");
    // `opencode run` without --agent leaves input.agent out: the message itself names the agent it resolved (a configured default_agent).
    const agent = [input.agent, (output.message as { agent?: unknown }).agent].find((name): name is string => typeof name === "string" && name !== "");
    const text = await engine.userMessage(input.sessionID, message.id, agent, written);
    if (text === "") return;
    const last = output.parts.reduce<string>((max, part) => {
      const id = (part as { id?: unknown }).id;
      return typeof id === "string" && id > max ? id : max;
    }, `prt_${message.id}`);
    output.parts.push({ id: `${last}~project-context`, sessionID: input.sessionID, messageID: message.id, type: "text", text, synthetic: true } as never);
  });
}
