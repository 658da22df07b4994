import { escapePath } from "./escape.ts";
import type { BlockKind, Plan, PlanInput } from "./plan.ts";

/** What rendering reads of a plan's input (the budget and the counter are planning's). */
export type RenderInput = Pick<PlanInput, "kind" | "items" | "updated" | "deleted" | "notices">;

/**
 * The block's text, as pieces. The planner charges exactly these pieces (it calls the same
 * functions): framing pieces cost `frame(text)`, content pieces the sum of their units' exact counts.
 * Every framing piece but the last ends with a line break and every note starts on a line of its own
 * with `[`, so no file text, whole or cut, can join with framing into a tag or a marker; and, the
 * section head taking in its doc's lead (see doc.ts), o200k's pieces end wherever two pieces meet,
 * so the block counted at once costs at most what its pieces cost.
 */

export const BLOCK_OPEN = "<project-context>\n";
export const BLOCK_CLOSE = "</project-context>";

/** The last block appended to a tool's output (it follows the tool's own text after a blank line; a plugin after this one may append more). */
export function appendedBlock(output: string): string | undefined {
  const start = output.lastIndexOf(`\n\n${BLOCK_OPEN}`);
  if (start === -1) return undefined;
  const end = output.indexOf(BLOCK_CLOSE, start);
  return end === -1 ? undefined : output.slice(start + 2, end + BLOCK_CLOSE.length);
}
/** Omitted files named at most, so a huge hierarchy cannot fill the budget with names. */
export const MAX_NAMED = 40;

const PREAMBLES: Readonly<Record<BlockKind, string>> = {
  system: "Repository instructions for the directories you work in, root first, closest last; where they disagree, the closer file wins.",
  delivery: "More repository instructions, for directories just reached or files just updated, closest first; where they disagree, the closer file wins.",
  compaction: "Repository instructions for the directories this session worked in, closest first; where they disagree, the closer file wins. Read from the repository what was cut or not included.",
};

export const blockHead = (kind: BlockKind) => `${BLOCK_OPEN}${PREAMBLES[kind]}\n`;

/** What every section of the file at `rel` starts with, whatever its status. */
export const sectionPrefix = (rel: string) => `<context-file path="${escapePath(rel)}"`;

export const sectionHead = (rel: string, updated: boolean) => `${sectionPrefix(rel)}${updated ? ' status="updated"' : ""}>\n`;

/** Closes a whole section: its text ends with its own line break (see doc.ts sectionOf). */
export const WHOLE_TAIL = "</context-file>\n";

/**
 * A path in a note, quoted: a name may be spelled like the rest of a note (`pkg/AGENTS.md no longer
 * applies ...] [x`), and escapePath writes `"` as `&quot;`, so the name ends where the quotes do.
 */
const quoted = (rel: string) => `"${escapePath(rel)}"`;

/** Closes a cut section; `endsLine` tells whether the kept text ends with a line break. */
export const cutTail = (rel: string, leftOut: number, line: number, endsLine: boolean) =>
  `${endsLine ? "" : "\n"}[cut to fit the budget: ${leftOut} tokens left out; read ${quoted(rel)} from line ${line}]\n</context-file>\n`;

export const deletedNotice = (rel: string) => `[${quoted(rel)} no longer applies (deleted, moved or replaced); disregard its instructions]\n`;

/** A file the user took out of the session's context (the TUI's unpin). */
export const unloadNotice = (rel: string) => `[${quoted(rel)} was taken out of this session's context by the user: disregard its instructions]\n`;

/** What can happen to a file a loaded context file keeps an eye on. */
export type WatchChange = "created" | "changed" | "deleted";

/** A file a loaded context file keeps an eye on (`watch:` in its frontmatter) changed. */
export const watchNotice = (watcher: string, target: string, change: WatchChange) =>
  `[${quoted(target)} was ${change}; ${quoted(watcher)} keeps an eye on it (watch): its instructions may need a review]\n`;

export interface Left {
  readonly rel: string;
  readonly tokens: number;
}

/** Files not in the block (in priority order), the first `named` by path, the rest as a count. */
export function leftOutList(kind: BlockKind, left: readonly Left[], named: number): string {
  const rest = left.slice(named);
  return leftOutListOf(kind, left.slice(0, named), rest.length, rest.reduce((total, entry) => total + entry.tokens, 0));
}

/** The same list from its named files and the count and tokens of the rest: what a planner weighing many lists keeps. */
export function leftOutListOf(kind: BlockKind, named: readonly Left[], restCount: number, restTokens: number): string {
  const label = kind === "delivery" ? "pending (budget; sent in a later step)" : "not included (budget)";
  const names = named.map((entry) => `${quoted(entry.rel)} (${entry.tokens} tokens)`);
  if (restCount > 0) {
    const files = `${restCount} ${names.length > 0 ? "more " : ""}file${restCount === 1 ? "" : "s"} (${restTokens} tokens)`;
    names.push(names.length > 0 ? `and ${files}` : files);
  }
  return `[${label}: ${names.join(", ")}]\n`;
}

/** A piece of the block; `item`/`units` mark the first `units` units of an item's doc. */
export interface Piece {
  readonly text: string;
  readonly item?: number;
  readonly units?: number;
}

export function renderPieces(input: RenderInput, plan: Plan): Piece[] {
  if (plan.empty) return [];
  const { kind, items } = input;
  const pieces: Piece[] = [{ text: blockHead(kind) }];
  for (const index of displayOrder(input, plan)) {
    const { doc } = items[index]!;
    const decision = plan.decisions[index]!;
    const units = decision.state === "cut" ? decision.keptUnits : doc.units.length;
    pieces.push({ text: sectionHead(doc.rel, input.updated?.has(doc.key) === true) + doc.lead });
    pieces.push({ text: doc.units.slice(0, units).join(""), item: index, units });
    if (decision.state === "cut") {
      const endsLine = doc.units[units - 1]!.endsWith("\n");
      pieces.push({ text: cutTail(doc.rel, decision.totalTokens - decision.keptTokens, decision.line, endsLine) });
    } else pieces.push({ text: WHOLE_TAIL });
  }
  for (const rel of input.deleted ?? []) pieces.push({ text: deletedNotice(rel) });
  for (const notice of input.notices ?? []) pieces.push({ text: notice });
  const left = leftOut(input, plan);
  if (left.length > 0) pieces.push({ text: leftOutList(kind, left, plan.named) });
  pieces.push({ text: BLOCK_CLOSE });
  return pieces;
}

/** The block, or "" when the plan says there is none. */
export function renderBlock(input: RenderInput, plan: Plan): string {
  return renderPieces(input, plan)
    .map((piece) => piece.text)
    .join("");
}

export interface RenderedEntry {
  readonly key: string;
  readonly rel: string;
  readonly state: "whole" | "cut" | "omitted" | "pending";
  /** Tokens of the file's text in the block; undefined when a whole file was never counted. */
  readonly sentTokens: number | undefined;
  readonly totalTokens: number | undefined;
}

export function renderedEntries(input: RenderInput, plan: Plan): RenderedEntry[] {
  return input.items.map(({ doc, counts }, index) => {
    const decision = plan.decisions[index]!;
    const base = { key: doc.key, rel: doc.rel };
    if (decision.state === "whole") {
      const total = counts?.reduce((sum, count) => sum + count, 0);
      return { ...base, state: "whole", sentTokens: total, totalTokens: total };
    }
    if (decision.state === "cut") return { ...base, state: "cut", sentTokens: decision.keptTokens, totalTokens: decision.totalTokens };
    return { ...base, state: input.kind === "delivery" ? "pending" : "omitted", sentTokens: 0, totalTokens: decision.totalTokens };
  });
}

/** Docs left out, in priority order, as the list names them. */
export function leftOut(input: RenderInput, plan: Plan): Left[] {
  const left: Left[] = [];
  plan.decisions.forEach((decision, index) => {
    if (decision.state === "omitted") left.push({ rel: input.items[index]!.doc.rel, tokens: decision.totalTokens });
  });
  return left;
}

/**
 * Shown docs in display order: the system block in tree order (root first, parents before
 * children, siblings by path) so "the closer file wins" reads top to bottom; deliveries and the
 * compaction copy in priority order (closest first).
 */
function displayOrder(input: RenderInput, plan: Plan): number[] {
  const shown = plan.decisions.flatMap((decision, index) => (decision.state === "omitted" ? [] : [index]));
  if (input.kind !== "system") return shown;
  const keys = shown.map((index) => treeKey(input.items[index]!.doc.rel));
  return shown.map((index, at) => ({ index, key: keys[at]! })).sort((a, b) => compareTree(a.key, b.key)).map((entry) => entry.index);
}

/** Directory segments, then the file name. */
function treeKey(rel: string): { dirs: string[]; name: string } {
  const segments = rel.split("/");
  return { dirs: segments.slice(0, -1), name: segments[segments.length - 1]! };
}

function compareTree(a: { dirs: string[]; name: string }, b: { dirs: string[]; name: string }): number {
  for (let i = 0; i < Math.min(a.dirs.length, b.dirs.length); i++) {
    const order = compareStrings(a.dirs[i]!, b.dirs[i]!);
    if (order !== 0) return order;
  }
  return a.dirs.length - b.dirs.length || isLocal(a.name) - isLocal(b.name) || compareStrings(a.name, b.name);
}

/** A personal `<stem>.local.md` follows the other files of its directory: it is read as their amendment. */
const isLocal = (name: string): number => (/\.local\.md$/i.test(name) ? 1 : 0);

/** Code-unit order: the same in every locale, so the block's bytes are too. */
const compareStrings = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
