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
  /** The agent of the latest user message (what `agents:` rules go by), if it names one. */
  readonly agent?: string;
}

interface PartShape {
  id?: unknown;
  type?: unknown;
  callID?: unknown;
  tool?: unknown;
  text?: unknown;
  state?: { status?: unknown; input?: unknown; output?: unknown; metadata?: { loaded?: unknown }; time?: { compacted?: unknown } };
}
interface MessageShape {
  info?: { id?: unknown; role?: unknown; sessionID?: unknown; summary?: unknown; agent?: unknown };
  parts?: unknown;
}

export function readHistory(messages: unknown): History {
  const calls: ToolCall[] = [];
  let carried: CarriedText[] = [];
  let compactedCalls = 0;
  let agent: string | undefined;
  for (const message of asArray(messages) as MessageShape[]) {
    if (message?.info?.role === "user" && typeof message.info.agent === "string" && message.info.agent !== "") agent = message.info.agent;
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
  return { calls, compactedCalls, carried, ...(agent === undefined ? {} : { agent }) };
}

/** What the messages about to be sent say of one session. */
export interface Scanned {
  /** The id of its latest compaction summary, if any. */
  summary?: string;
  /** What its messages still hold (user messages, tool outputs not pruned): built on demand. */
  kept: () => KeptCarriers;
  /**
   * Its tool calls among the carriers asked about of which OpenCode has pruned a part (from then on
   * that part reads "[Old tool result content cleared]"), each with how many of its parts are pruned
   * and kept (while those stay the same, so does what is left of it) and its kept parts' outputs.
   */
  pruned: Map<string, { readonly parts: string; readonly kept: readonly KeptOutput[] }>;
  /** Where its latest message is in the list given, and that message's id. */
  lastIndex: number;
  lastId: unknown;
  /** The id of the message at `index` of the list given (undefined past its end). */
  idAt: (index: number) => unknown;
  /** Its message ids and tool call ids: built on demand. */
  ids: () => Set<string>;
}

/** User messages by id, and tool outputs not pruned by their call's id (one id may name several parts). */
export interface KeptCarriers {
  readonly messages: ReadonlySet<string>;
  readonly outputs: ReadonlyMap<string, readonly KeptOutput[]>;
}

/**
 * A tool output not pruned, and the files OpenCode's read reminder on it names (a read's
 * `metadata.loaded`): a reminder entry any other output shows is the tool's own text (a `cat` of a
 * saved transcript), not OpenCode's copy of the file.
 */
export interface KeptOutput {
  readonly text: string;
  readonly loaded: readonly string[];
}

/**
 * One pass over the messages of a request (`experimental.chat.messages.transform` runs before every
 * step): per session, its latest compaction summary, and which of `isCarrier`'s tool calls had a part
 * pruned. OpenCode keeps the turns after a compaction point verbatim, so what they carry is still in
 * the conversation: `kept` says what is. Some providers give calls no id, or number them per response
 * (`call_0` at every step): one id may name several parts, so what a pruned id's files still have is
 * for the caller to judge file by file, from the outputs of that id's parts still kept.
 */
export function scanMessages(messages: unknown, isCarrier: (sessionID: string, callID: string) => boolean): Map<string, Scanned> {
  const list = asArray(messages) as MessageShape[];
  const found = new Map<string, Scanned>();
  // Per session, its carriers with a pruned part, and how many (pruned parts are few: the common step counts none).
  const prunedParts = new Map<string, Map<string, number>>();
  for (let index = 0; index < list.length; index++) {
    const message = list[index];
    const { sessionID, id, summary } = message?.info ?? {};
    if (typeof sessionID !== "string") continue;
    let scanned = found.get(sessionID);
    if (scanned === undefined) {
      const idAt = (at: number) => list[at]?.info?.id;
      const kept = () => ({ messages: userMessageIds(list, sessionID), outputs: keptToolOutputs(list, sessionID) });
      found.set(sessionID, (scanned = { kept, pruned: new Map(), lastIndex: index, lastId: id, idAt, ids: () => conversationIds(list, sessionID) }));
    }
    scanned.lastIndex = index;
    scanned.lastId = id;
    if (summary === true && typeof id === "string") scanned.summary = id;
    for (const part of asArray(message!.parts) as PartShape[]) {
      if (part?.type !== "tool" || part.state?.time?.compacted === undefined || typeof part.callID !== "string" || !isCarrier(sessionID, part.callID)) continue;
      let counts = prunedParts.get(sessionID);
      if (counts === undefined) prunedParts.set(sessionID, (counts = new Map()));
      counts.set(part.callID, (counts.get(part.callID) ?? 0) + 1);
    }
  }
  for (const [sessionID, counts] of prunedParts) {
    const kept = keptToolOutputs(list, sessionID, new Set(counts.keys()));
    const scanned = found.get(sessionID)!;
    for (const [callID, pruned] of counts) {
      const outputs = kept.get(callID) ?? [];
      scanned.pruned.set(callID, { parts: `${pruned}/${outputs.length}`, kept: outputs });
    }
  }
  return found;
}

function conversationIds(list: readonly MessageShape[], sessionID: string): Set<string> {
  const ids = new Set<string>();
  for (const message of list) {
    if (message?.info?.sessionID !== sessionID) continue;
    if (typeof message.info.id === "string") ids.add(message.info.id);
    // A subtask's output is carried under its part's id (OpenCode runs its tool.execute.after with the part's id as callID).
    for (const part of asArray(message.parts) as PartShape[]) {
      if (part?.type === "tool" && typeof part.callID === "string") ids.add(part.callID);
      if (typeof part?.id === "string") ids.add(part.id);
    }
  }
  return ids;
}

function userMessageIds(list: readonly MessageShape[], sessionID: string): Set<string> {
  const ids = new Set<string>();
  for (const message of list) {
    if (message?.info?.sessionID === sessionID && message.info.role === "user" && typeof message.info.id === "string") ids.add(message.info.id);
  }
  return ids;
}

/** The session's tool outputs not pruned, by call id (of `callIDs` only, when given). */
function keptToolOutputs(list: readonly MessageShape[], sessionID: string, callIDs?: ReadonlySet<string>): Map<string, KeptOutput[]> {
  const outputs = new Map<string, KeptOutput[]>();
  for (const message of list) {
    if (message?.info?.sessionID !== sessionID) continue;
    for (const part of asArray(message.parts) as PartShape[]) {
      if (part?.type !== "tool" || typeof part.callID !== "string" || callIDs?.has(part.callID) === false || part.state?.time?.compacted !== undefined) continue;
      const output = part.state?.output;
      if (typeof output !== "string") continue;
      const kept = { text: output, loaded: part.tool === "read" ? strings(part.state?.metadata?.loaded) : [] };
      const known = outputs.get(part.callID);
      if (known === undefined) outputs.set(part.callID, [kept]);
      else known.push(kept);
    }
  }
  return outputs;
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}
