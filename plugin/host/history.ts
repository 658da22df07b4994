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
  /** Every carrier its messages still hold (tool calls not pruned, user messages): built on demand. */
  carriers: () => Set<string>;
  /** Its tool calls among the carriers asked about that OpenCode has pruned (from then on the model gets "[Old tool result content cleared]"). */
  pruned: string[];
}

/**
 * One pass over the messages of a request (`experimental.chat.messages.transform` runs before every
 * step): per session, its latest compaction summary, and which of `isCarrier`'s tool calls were
 * pruned. OpenCode keeps the turns after a compaction point verbatim, so what they carry is still in
 * the conversation: `carriers` says what is.
 *
 * Some providers number tool calls per response (`call_0` at every step), so one id can name several
 * parts, of which only one carries files (the plugin never delivers on an id that already carries),
 * and the carrier may be summarized away while a later part of its id is kept. So a tool call counts
 * by its outputs: pruned only when no part of its id left shows a copy (`showsCopy`: the plugin's
 * block, OpenCode's reminder), present only while one does.
 */
export function scanMessages(messages: unknown, isCarrier: (sessionID: string, callID: string) => boolean, showsCopy: (output: string) => boolean): Map<string, Scanned> {
  const list = asArray(messages) as MessageShape[];
  const found = new Map<string, Scanned>();
  for (const message of list) {
    const { sessionID, id, summary } = message?.info ?? {};
    if (typeof sessionID !== "string") continue;
    let scanned = found.get(sessionID);
    if (scanned === undefined) found.set(sessionID, (scanned = { carriers: () => carriersOf(list, sessionID, showsCopy), pruned: [] }));
    if (summary === true && typeof id === "string") scanned.summary = id;
    for (const part of asArray(message.parts) as PartShape[]) {
      if (part?.type !== "tool" || part.state?.time?.compacted === undefined || typeof part.callID !== "string") continue;
      if (isCarrier(sessionID, part.callID)) scanned.pruned.push(part.callID);
    }
  }
  for (const [sessionID, scanned] of found) {
    if (scanned.pruned.length === 0) continue;
    const shown = idsShowingCopies(list, sessionID, new Set(scanned.pruned), showsCopy);
    scanned.pruned = scanned.pruned.filter((callID) => !shown.has(callID));
  }
  return found;
}

function carriersOf(list: readonly MessageShape[], sessionID: string, showsCopy: (output: string) => boolean): Set<string> {
  const carriers = idsShowingCopies(list, sessionID, undefined, showsCopy);
  for (const message of list) {
    if (message?.info?.sessionID === sessionID && message.info.role === "user" && typeof message.info.id === "string") carriers.add(message.info.id);
  }
  return carriers;
}

/** The ids (of `among`, or any) of the session's tool parts, not pruned, whose output shows a copy. */
function idsShowingCopies(list: readonly MessageShape[], sessionID: string, among: ReadonlySet<string> | undefined, showsCopy: (output: string) => boolean): Set<string> {
  const shown = new Set<string>();
  for (const message of list) {
    if (message?.info?.sessionID !== sessionID) continue;
    for (const part of asArray(message.parts) as PartShape[]) {
      if (part?.type !== "tool" || typeof part.callID !== "string" || among?.has(part.callID) === false || part.state?.time?.compacted !== undefined) continue;
      const output = part.state?.output;
      if (typeof output === "string" && showsCopy(output)) shown.add(part.callID);
    }
  }
  return shown;
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}
