/**
 * Reading OpenCode's messages (`{ info, parts }[]`, as `client.session.messages` and
 * `experimental.chat.messages.transform` give them). Everything is `unknown` until checked: a
 * history is host data, and a malformed one must cost the plugin nothing but what it cannot read.
 */

export interface ToolCall {
  readonly tool: unknown;
  readonly input: unknown;
}

/** Text that is still in the conversation, and the part that carries it: a tool call's id, or a user message's. */
export interface CarriedText {
  readonly carrier: string;
  readonly text: string;
  /** For a `read`: the instruction files OpenCode attached (`metadata.loaded`). */
  readonly loaded: readonly string[];
}

export interface History {
  /** Every tool call, oldest first. */
  readonly calls: readonly ToolCall[];
  /** How many of `calls` came before the last compaction (their outputs were summarized away). */
  readonly compactedCalls: number;
  /** Tool outputs and user texts after the last compaction that the model still gets. */
  readonly carried: readonly CarriedText[];
}

interface PartShape {
  type?: unknown;
  callID?: unknown;
  tool?: unknown;
  text?: unknown;
  state?: { status?: unknown; input?: unknown; output?: unknown; metadata?: { loaded?: unknown }; time?: { compacted?: unknown } };
}
interface MessageShape {
  info?: { id?: unknown; role?: unknown; sessionID?: unknown; summary?: unknown };
  parts?: unknown;
}

export function readHistory(messages: unknown): History {
  const calls: ToolCall[] = [];
  let carried: CarriedText[] = [];
  let compactedCalls = 0;
  for (const message of asArray(messages) as MessageShape[]) {
    const parts = asArray(message?.parts) as PartShape[];
    // A compaction request (a `compaction` part) or its summary ends what the model still sees verbatim.
    if (message?.info?.summary === true || parts.some((part) => part?.type === "compaction")) {
      compactedCalls = calls.length;
      carried = [];
      continue;
    }
    const messageID = typeof message?.info?.id === "string" ? message.info.id : undefined;
    for (const part of parts) {
      if (part?.type === "tool") {
        calls.push({ tool: part.tool, input: part.state?.input });
        const output = part.state?.output;
        if (typeof part.callID === "string" && typeof output === "string" && part.state?.time?.compacted === undefined) {
          carried.push({ carrier: part.callID, text: output, loaded: strings(part.state?.metadata?.loaded) });
        }
      } else if (part?.type === "text" && typeof part.text === "string" && messageID !== undefined && message?.info?.role === "user") {
        carried.push({ carrier: messageID, text: part.text, loaded: [] });
      }
    }
  }
  return { calls, compactedCalls, carried };
}

/**
 * Per session, the id of the latest compaction summary in `messages`, and every carrier the
 * messages still hold (tool calls not pruned, user messages): OpenCode keeps the turns after a
 * compaction point verbatim, and what they carry is still in the conversation.
 */
export function summaries(messages: unknown): Map<string, { summary: string; carriers: () => Set<string> }> {
  const found = new Map<string, { summary: string; carriers: () => Set<string> }>();
  const list = asArray(messages) as MessageShape[];
  for (const message of list) {
    const { sessionID, id, summary } = message?.info ?? {};
    if (summary !== true || typeof sessionID !== "string" || typeof id !== "string") continue;
    found.set(sessionID, {
      summary: id,
      carriers: () => {
        const carriers = new Set<string>();
        for (const other of list) {
          if (other?.info?.sessionID !== sessionID) continue;
          if (other.info.role === "user" && typeof other.info.id === "string") carriers.add(other.info.id);
          for (const part of asArray(other.parts) as PartShape[]) {
            if (part?.type === "tool" && typeof part.callID === "string" && part.state?.time?.compacted === undefined) carriers.add(part.callID);
          }
        }
        return carriers;
      },
    });
  }
  return found;
}

/**
 * The sessions and tool calls among `carriers` whose outputs OpenCode has pruned
 * (`state.time.compacted` set: from then on the model gets "[Old tool result content cleared]").
 */
export function prunedCarriers(messages: unknown, isCarrier: (sessionID: string, callID: string) => boolean): Map<string, string[]> {
  const pruned = new Map<string, string[]>();
  for (const message of asArray(messages) as MessageShape[]) {
    const sessionID = message?.info?.sessionID;
    if (typeof sessionID !== "string") continue;
    for (const part of asArray(message?.parts) as PartShape[]) {
      if (part?.type !== "tool" || part.state?.time?.compacted === undefined || typeof part.callID !== "string") continue;
      if (!isCarrier(sessionID, part.callID)) continue;
      const list = pruned.get(sessionID) ?? [];
      list.push(part.callID);
      pruned.set(sessionID, list);
    }
  }
  return pruned;
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}
